"""What stored model arguments say about the code that made them (docs/choices.md, "Old checkpoints").

The defaults version (stored under the key ``posmix_paper_readings``) is the version of the defaults
and option values the arguments were made with: no flag, a parser default
(:func:`.options.add_posmix_args`), so every command line of this code
carries :data:`DEFAULTS_VERSION`, while arguments stored by older code carry a lower version or none
and are upgraded (:mod:`.upgrades`). ``posmix_legacy_readings`` (``{scope: {option: value}}``, written
by the upgrade only) holds the computations of older checkpoints that no command line can ask for;
builders read them as one more option value (:func:`read_options`).
"""
from typing import Dict

DEFAULTS_VERSION_KEY = "posmix_paper_readings"  # the attribute checkpoints store the defaults version under
#: the version of the defaults this code builds; upgrade steps with ``defaults_below`` <= it pin former ones
DEFAULTS_VERSION = 13
LEGACY_READINGS = "posmix_legacy_readings"


def stored_defaults_version(args) -> int:
    """The defaults version stored with ``args`` (0: stored without one)."""
    return getattr(args, DEFAULTS_VERSION_KEY, None) or 0


def made_by_this_code(args) -> bool:
    return stored_defaults_version(args) >= DEFAULTS_VERSION


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
