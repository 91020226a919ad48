"""``posmix-options [ARCH]``: the model options of a posmix architecture, the value each takes when it is
not given, and its valid values.

fairseq 0.12's ``fairseq-train --arch ARCH --help`` lists no model options (for its own archs too): the
model's options are added to the parser only after ``--help`` has been answered. This command builds the
arguments exactly as ``fairseq-train --arch ARCH`` does (fairseq's parser, the arch function) and lists
each option of the model: the value used when the flag is not given, the valid values (choices, or the
kind of value), and what it does. By default the posmix options the arch reads; ``--all`` adds the
options of mixers and position encodings the arch does not use (giving one is an error unless its mixer
is chosen too) and fairseq's Transformer options. Without ARCH: the posmix archs.

    posmix-options rposnet_iwslt_de_en
    posmix-options rposnet_iwslt_de_en --all
    python -m posmix_fairseq.harness.options hc_sa_iwslt_de_en
"""
import argparse
import logging
import textwrap
from typing import Dict, List, Optional, Tuple

from .command import UsageError, build_parser, console
from .pipeline import USER_DIR


def posmix_archs() -> List[str]:
    """The archs whose model is posmix_transformer (or a subclass), sorted."""
    # fairseq and the plugin load in seconds: only when the options are listed, not for --help
    from fairseq.models import ARCH_MODEL_REGISTRY
    from .. import register
    from ..models.posmix_transformer import PosMixTransformerModel

    register()
    return sorted(name for name, model in ARCH_MODEL_REGISTRY.items() if issubclass(model, PosMixTransformerModel))


def arch_arguments(arch: str) -> argparse.Namespace:
    """The arguments ``fairseq-train DATA --arch ARCH`` builds the model from when no model flag is given."""
    # fairseq loads in seconds: only when the options are listed
    from fairseq import options

    logging.getLogger("fairseq.utils").setLevel(logging.WARNING)  # "--user-dir ... has already been imported"
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["unused-data-dir", "--task", "posmix_translation",
                                                "--user-dir", USER_DIR, "--arch", arch])


def model_actions(arch: str) -> Tuple[List[argparse.Action], set]:
    """(every option the arch's model class declares, the destinations of the posmix ones)."""
    # fairseq loads in seconds: only when the options are listed
    from fairseq.models import ARCH_MODEL_REGISTRY
    from ..models.options import add_posmix_args

    parser = argparse.ArgumentParser(add_help=False)
    ARCH_MODEL_REGISTRY[arch].add_args(parser)
    own = argparse.ArgumentParser(add_help=False)
    add_posmix_args(own)
    return [a for a in parser._actions if a.option_strings], {a.dest for a in own._actions}


def declared_readers() -> Dict[str, Tuple[object, object, str]]:
    """dest -> (registry, scope, option) for every option a mixer or position encoding declares."""
    # the plugin's registries: loaded with fairseq above
    from ..core.placement import PLACEMENTS, SIDES
    from ..mixers import MIXER_REGISTRY
    from ..position_encodings.base import POSITION_ENCODING_REGISTRY

    out = {}
    for registry, scopes in ((MIXER_REGISTRY, PLACEMENTS), (POSITION_ENCODING_REGISTRY, SIDES)):
        for option in registry.declared_options():
            for scope in scopes:
                out[scope.attr(option)] = (registry, scope, option)
    return out


def chosen_entry(args, registry, scope):
    """The registry entry ``scope`` uses under ``args`` (None: fairseq's own position embeddings)."""
    from ..mixers import MIXER_REGISTRY  # loaded with fairseq above

    key = "mixer" if registry is MIXER_REGISTRY else "position-encoding"
    name = scope.read(args, key)
    return (name, registry.get(name, scope.flag(key))) if name is not None and name in registry else (name, None)


def valid_values(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "a switch (on when given)"
    if action.choices:
        return ", ".join(str(c) for c in action.choices)
    if hasattr(action.type, "describe"):  # a number of a declared range (core/number_ranges.py)
        return action.type.describe().replace("must be ", "", 1)
    kind = getattr(action.type, "__name__", None) if action.type else "str"
    return {"int": "an integer", "float": "a number", "str": "text"}.get(kind, kind or "text")


def describe(args, action: argparse.Action, readers) -> Tuple[Optional[str], bool]:
    """(the value used when the flag is not given, shown as text; whether the arch reads the option)."""
    value = getattr(args, action.dest, None)
    read = True
    if action.dest in readers:
        registry, scope, option = readers[action.dest]
        name, entry = chosen_entry(args, registry, scope)
        read = entry is not None and option in entry.options
        if read and hasattr(entry, "unread_condition"):  # a mixer option read only under another's value
            read = entry.unread_condition(option, scope.read_declared(args, entry.options)) is None
        if value is None and read:
            value = entry.options[option].get("default")
    if action.nargs == 0:
        return ("on" if value else "off"), read
    return (None if value is None else str(value)), read


def format_option(args, action, readers, width: int = 100) -> str:
    value, _ = describe(args, action, readers)
    flag = max(action.option_strings, key=len)
    head = f"  {flag} {value if value is not None else '(not set)'}"
    help_text = " ".join((action.help or "").replace("%(default)s", str(action.default)).split())
    body = textwrap.fill(f"valid: {valid_values(action)}. {help_text}", width=width, initial_indent="      ",
                         subsequent_indent="      ")
    return f"{head}\n{body}"


def list_options(arch: str, show_all: bool = False) -> str:
    archs = posmix_archs()
    if arch not in archs:
        close = [a for a in archs if a.split("_")[0] == arch.split("_")[0]] or archs
        raise UsageError(f"ARCH {arch!r} is not a posmix arch; valid: {', '.join(close)}"
                         + ("" if close is archs else " (posmix-options without ARCH lists all)"))
    args = arch_arguments(arch)
    actions, own = model_actions(arch)
    readers = declared_readers()
    posmix, unread, fairseq_own = [], [], []
    for action in actions:
        if action.help == argparse.SUPPRESS:
            continue
        if action.dest not in own:
            fairseq_own.append(action)
        elif describe(args, action, readers)[1]:
            posmix.append(action)
        else:
            unread.append(action)
    lines = [f"{arch}: the model options of fairseq-train --arch {arch} (flag, the value used when it is not "
             "given, its valid values)", "", "posmix options this arch reads:"]
    lines += [format_option(args, a, readers) for a in posmix]
    if show_all:
        lines += ["", "posmix options of mixers and position encodings this arch does not use (an error unless "
                      "the option's mixer or encoding is chosen):"]
        lines += [format_option(args, a, readers) for a in unread]
        lines += ["", "fairseq's Transformer options:"]
        lines += [format_option(args, a, readers) for a in fairseq_own]
    else:
        lines += ["", f"({len(unread)} options of other mixers and position encodings and {len(fairseq_own)} of "
                      "fairseq's Transformer: --all)"]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> str:
    p = build_parser("posmix-options", __doc__)
    p.add_argument("arch", nargs="?", metavar="ARCH", help="a posmix arch (without it: the list of posmix archs)")
    p.add_argument("--all", action="store_true",
                   help="also the options of unused mixers and position encodings, and fairseq's Transformer options")
    a = p.parse_args(argv)
    text = list_options(a.arch, a.all) if a.arch else "posmix archs (posmix-options ARCH lists one's options):\n" + \
        "\n".join(f"  {name}" for name in posmix_archs())
    print(text)
    return text


cli = console(main, "posmix-options")


if __name__ == "__main__":
    raise SystemExit(cli())
