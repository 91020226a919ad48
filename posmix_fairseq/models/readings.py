"""What stored model arguments say about the code that made them: the readings marker, and the
legacy readings that only checkpoints of older code use.

``posmix_paper_readings`` is the version of the defaults and option values the arguments were made
with. It is no command-line flag: the model's ``add_args`` sets it as a parser default, so every
command line of this code carries :data:`READINGS_VERSION` and every checkpoint stores it, while
arguments stored by older code carry a lower version or none. fairseq runs the arch function first
on a loaded checkpoint's arguments; the registered arch functions upgrade arguments below the current
version there, once (:mod:`.upgrades`), and stamp the version.

``posmix_legacy_readings`` holds the computations older checkpoints were trained with that no
command line can ask for (``{scope: {option: value}}``, e.g. ``{"encoder": {"rpe-reading":
"sliced-legacy"}}``); only the upgrade writes it. :func:`read_options` lays it over a scope's declared
options, so a builder reads a legacy reading as one more option value.
"""
from typing import Dict

READINGS_MARKER = "posmix_paper_readings"
#: the version of the defaults this code builds; upgrade steps with ``readings_below`` <= it pin former ones
READINGS_VERSION = 13
LEGACY_READINGS = "posmix_legacy_readings"


def stored_readings(args) -> int:
    """The readings version stored with ``args`` (0: stored without the marker)."""
    return getattr(args, READINGS_MARKER, None) or 0


def made_by_this_code(args) -> bool:
    return stored_readings(args) >= READINGS_VERSION


def mark_command_lines(parser):
    """Every command line parsed with ``parser`` carries the current readings version (no flag)."""
    parser.set_defaults(**{READINGS_MARKER: READINGS_VERSION})


def legacy_readings(args, scope) -> Dict:
    """option -> value of the legacy readings stored for ``scope`` (a Side or Placement)."""
    return dict((getattr(args, LEGACY_READINGS, None) or {}).get(scope.name, {}))


def write_legacy_reading(args, scope, option: str, value):
    readings = {name: dict(options) for name, options in (getattr(args, LEGACY_READINGS, None) or {}).items()}
    readings.setdefault(scope.name, {})[option] = value
    setattr(args, LEGACY_READINGS, readings)


def read_options(args, scope, declared: Dict[str, Dict]) -> Dict:
    """The options ``declared`` by a registry entry for ``scope``, with its stored legacy readings."""
    return {**scope.read_declared(args, declared), **legacy_readings(args, scope)}
