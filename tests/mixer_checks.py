"""Which tests check one mixer: ``pytest --mixer NAME`` (``scripts/check_mixer.sh NAME``) keeps them and deselects
the rest. Nothing here lists mixers, archs or their tests: the selection is read off each collected test.

A test checks the mixer when

- its file is one of the checks every change must pass, the docs, floors, budget and house checks
  (:data:`EVERY_CHANGE`);
- one of its parameters names the mixer: the name itself; a configuration of the every-arch suite
  (``ALL_CONFIGS``: every registered arch and the extra configurations), a variant of the arch table (its arch at
  a size; the sizes change no mixer) or a list of fairseq-train flags whose model puts the mixer in one of its sublayers (read from the arguments
  fairseq's parser builds); this is how the generated checks (decoding exactness, batch invariance, dtypes,
  reload, option sweeps and ranges, the CLI end to end case of the mixer) select themselves;
- its function's name has the mixer's name as one of its words (``test_alibi_slopes_are_the_papers``): the
  mixer's own equation tests.
"""
import functools
import os
import re
from typing import Iterable

import pytest

from posmix_fairseq.core.placement import PLACEMENTS
from posmix_fairseq.harness.testing import ALL_CONFIGS, parse_model_args
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.models.architectures import SIZES, VARIANTS

#: the files every change runs whole: the generated docs, no hand-kept list, the import floors and line budgets,
#: the house rules (a new mixer is one file, the Energy contract)
EVERY_CHANGE = ("test_generated_docs.py", "test_no_hand_kept_lists.py", "test_import_floors.py", "test_house.py")


@functools.lru_cache(maxsize=None)
def mixers_of(flags: tuple) -> frozenset:
    """The mixers of every sublayer of the model that fairseq-train builds from ``flags`` (empty when the flags do
    not parse as a model's: a test of a refusal)."""
    try:
        args = parse_model_args(list(flags))
    except (SystemExit, Exception):  # a deliberately bad flag list: it names no model
        return frozenset()
    return frozenset(placement.read(args, "mixer") for placement in PLACEMENTS)


def flag_lists(value) -> Iterable[tuple]:
    """The fairseq-train flag lists a test parameter stands for (a variant: its arch at the first size; its
    sizes change no mixer)."""
    if isinstance(value, str):
        if value in ALL_CONFIGS:
            yield tuple(ALL_CONFIGS[value])
        if value in VARIANTS:
            yield "--arch", f"{value}_{next(iter(SIZES))}"
    elif isinstance(value, (list, tuple)):
        if "--arch" in value and all(isinstance(item, str) for item in value):
            yield tuple(value)
        else:
            for item in value:
                yield from flag_lists(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from flag_lists(item)


def names(value, name: str) -> bool:
    """Whether a test parameter names the mixer ``name`` (itself, or a model that uses it)."""
    if isinstance(value, str) and value == name:
        return True
    if isinstance(value, (list, tuple)) and any(isinstance(item, str) and item == name for item in value):
        return True
    return any(name in mixers_of(flags) for flags in flag_lists(value))


def checks(item, name: str) -> bool:
    """Whether the collected test ``item`` checks the mixer ``name`` (the module docstring's rules)."""
    if os.path.basename(str(item.fspath)) in EVERY_CHANGE:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(names(value, name) for value in params.values()):
        return True
    function = getattr(item, "originalname", None) or item.name.split("[")[0]
    return re.search(rf"(^|_){re.escape(name)}(_|$)", function) is not None


def check_name(name: str):
    """A usage error (pytest's exit status 4) for a name no mixer is registered under, listing the mixers."""
    if name not in MIXER_REGISTRY.names():
        raise pytest.UsageError(f"--mixer {name}: not a registered mixer; choose one of "
                                f"{', '.join(sorted(MIXER_REGISTRY.names()))}")


def select(items, config, name: str):
    """Keeps in ``items`` the tests of the mixer ``name``; the others are reported deselected."""
    check_name(name)
    kept = {id(item) for item in items if checks(item, name)}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
    items[:] = [item for item in items if id(item) in kept]
