"""Upgrades of what older checkpoints stored, run once per load: an unset option takes today's default when a
model is built, so a changed default or a renamed option would silently build another model. Ordered steps,
each named by what changed, recognise what they concern (docs/choices.md, "Old checkpoints").
"""
import logging
from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

from ..core.placement import PLACEMENTS, SIDES
from ..mixers.engine import MIXER_REGISTRY, EnergyMixingAttention
from ..mixers.engine.frozen_energy import FROZEN_OPTION
from ..position_encodings.base import POSITION_ENCODING_REGISTRY
from .options import (DEFAULTS_VERSION_KEY, DEFAULTS_VERSION, side_has_position_signal, stored_defaults_version,
                      todays_default, todays_gating, write_legacy_reading)
from .layers import sublayers

logger = logging.getLogger(__name__)

class Occupants(NamedTuple):
    """What occupies a kind of scope: the sublayers' mixers or the sides' position encodings."""
    scopes: Sequence  # PLACEMENTS or SIDES
    registry: object  # the registry of the entries
    option: str  # the option naming a scope's entry
    default: Optional[str]  # that option's default


MIXERS = Occupants(PLACEMENTS, MIXER_REGISTRY, "mixer", "mha")
ENCODINGS = Occupants(SIDES, POSITION_ENCODING_REGISTRY, "position-encoding", None)


def options_read(args, scope, occupants: Occupants = MIXERS):
    """The options declared by the stored mixer (or position encoding) of ``scope``; none if unknown."""
    name = scope.read(args, occupants.option, occupants.default)
    return occupants.registry.get(name, scope.flag(occupants.option)).options if name in occupants.registry else {}


def pin(option: str, former: Callable, occupants: Occupants = MIXERS, among=None):
    """Writes ``former(args, scope)`` where the stored arguments leave ``option`` unset and the scope's
    mixer (or position encoding) reads it, or is one of ``among`` (an option that became a legacy reading)."""

    def apply(args) -> bool:
        changed = False
        for scope in occupants.scopes:
            reads = option in options_read(args, scope, occupants) if among is None else \
                scope.read(args, occupants.option, occupants.default) in among
            if reads and scope.read(args, option) is None:
                scope.write(args, option, former(args, scope))
                changed = True
        return changed
    return apply


def rename(scopes, renames, then=None):
    """Moves each stored old option to its new name (unless the new one is set) and deletes the old; then
    runs ``then(args)``. Arguments stored without the old names are left alone."""
    def apply(args) -> bool:
        if not any(scope.stored(args, old) for scope in scopes for old in renames):
            return False
        for scope in scopes:
            for old, new in renames.items():
                value = scope.read(args, old)
                if scope.stored(args, old):
                    delattr(args, scope.attr(old))
                if value is not None and scope.read(args, new) is None:
                    scope.write(args, new, value)
        if then is not None:
            then(args)
        return True
    return apply


def keep_positions_within(option: str, mixer: str):
    """Stored max source/target positions above the table of ``option`` of ``mixer`` sublayers are
    lowered to it (the model cannot run beyond its table; within the limit, fairseq's size filter
    refuses longer sentences and generation stops there)."""
    def apply(args) -> bool:
        changed = False
        for placement in PLACEMENTS:
            if placement.read(args, "mixer") != mixer:
                continue
            table = placement.read(args, option)
            for side in placement.sides:
                limit = getattr(args, side.max_positions_attr, None)
                if limit is None or limit > table:
                    setattr(args, side.max_positions_attr, table)
                    changed = True
        return changed
    return apply


def all_of(*steps):
    def apply(args) -> bool:
        return any([step(args) for step in steps])  # a list: every step runs
    return apply


# ---- renamed options -------------------------------------------------------------------------------

def _drop_unread_mixer_options(args):
    """The code that stored the old mixer option names stored every mixer option for every sublayer, and
    had no --position-blind (the no-PE arch then was position-blind by construction)."""
    for placement in PLACEMENTS:
        read = options_read(args, placement)
        for option in MIXER_REGISTRY.declared_options():
            if option not in read and placement.read(args, option) is not None:
                placement.write(args, option, None)
    if getattr(args, "position_blind", None) is None:
        blind = [s.name for s in SIDES if not side_has_position_signal(args, s)]
        args.position_blind = ",".join(blind) or None


def _frozen_positions_per_side(args) -> bool:
    if not hasattr(args, "frozen_energy_positions"):
        return False
    n = args.frozen_energy_positions
    delattr(args, "frozen_energy_positions")
    if n is not None:
        for side in SIDES:
            if side.read(args, FROZEN_OPTION) is None:
                side.write(args, FROZEN_OPTION, n)
    return True


# ---- changed defaults and values -------------------------------------------------------------------

def _t5_adaptive_cumulative(args) -> bool:
    changed = False
    for placement in PLACEMENTS:
        if placement.read(args, "mixer") == "t5bias" and placement.read(args, "t5-adaptive") == "on":
            placement.write(args, "t5-adaptive", "cumulative")
            changed = True
    return changed


def _drop_unread_conditional_options(args) -> bool:
    changed = False
    for placement in PLACEMENTS:
        mixer = placement.read(args, "mixer", "mha")
        if mixer not in MIXER_REGISTRY:
            continue
        entry = MIXER_REGISTRY.get(mixer, placement.flag("mixer"))
        for option in entry.read_when:
            if placement.read(args, option) is not None and \
                    entry.unread_condition(option, placement.read_declared(args, entry.options)):
                placement.write(args, option, None)
                changed = True
    return changed


#: options no command line has any more: option -> (scopes, the value kept as a legacy reading)
LEGACY_ONLY_OPTIONS = {"relative-sinusoids": (PLACEMENTS, "head"), "posnet-kernel": (PLACEMENTS, "head"),
                       "rpe-reading": (SIDES, "sliced-legacy")}
LEGACY_ONLY_VALUES = {"t5-adaptive": (PLACEMENTS, "cumulative")}  # option -> (scopes, a value no CLI offers)


def _legacy_values_leave_the_command_line(args) -> bool:
    changed = False
    for option, (scopes, legacy) in LEGACY_ONLY_OPTIONS.items():
        for scope in scopes:
            if scope.stored(args, option):
                value = scope.read(args, option)
                delattr(args, scope.attr(option))
                if value == legacy:
                    write_legacy_reading(args, scope, option, value)
                changed = True
    for option, (scopes, legacy) in LEGACY_ONLY_VALUES.items():
        for scope in scopes:
            if scope.read(args, option) == legacy:
                scope.write(args, option, None)
                write_legacy_reading(args, scope, option, legacy)
                changed = True
    return changed


@dataclass(frozen=True)
class ArgsUpgrade:
    name: str  # what changed
    apply: Callable  # args -> whether anything was written
    defaults_below: Optional[int] = None  # changed defaults: stored defaults version < this

    def concerns(self, args) -> bool:
        return self.defaults_below is None or stored_defaults_version(args) < self.defaults_below


ARGS_UPGRADES: List[ArgsUpgrade] = [
    # renames first: every later step reads today's names
    ArgsUpgrade("--<sublayer>-position-embedding renamed --<sublayer>-position-table, --<sublayer>-value-projection renamed "
                "--<sublayer>-gaussian-value-projection",
                rename(PLACEMENTS, {"position-embedding": "position-table",
                                    "value-projection": "gaussian-value-projection"}, then=_drop_unread_mixer_options)),
    ArgsUpgrade("PosNet-Embed's --<side>-posnet-* options renamed --<side>-posnet-embed-*",
                rename(SIDES, {f"posnet-{o}": f"posnet-embed-{o}"
                               for o in ("dim", "max-positions", "dropout", "activation")})),
    ArgsUpgrade("frozen energy tables sized per side: --frozen-energy-positions N is "
                "--encoder-frozen-energy-positions N --decoder-frozen-energy-positions N", _frozen_positions_per_side),
    # defaults that changed (the defaults version, stored as posmix_paper_readings; docs/choices.md)
    ArgsUpgrade("relative-distance embeddings laid out as each arch's paper does (were shared by the heads)",
                pin("relative-embedding-heads", lambda args, p: "shared"), defaults_below=11),
    ArgsUpgrade("sinusoidal relative tables take the first D_h dims of the D-dim encoding (were a D_h-dim one)",
                pin("relative-sinusoids", lambda args, p: "head" if p.read(args, "position-table") == "sinusoidal"
                    else None, among=("shaw", "relattn")), defaults_below=11),
    ArgsUpgrade("the shaw archs drop Shaw's a^V term (GPA Table 8)",
                pin("shaw-value-term", lambda args, p: "on"), defaults_below=11),
    ArgsUpgrade("RecPE's first layer is multi-head attention over all of m_j (was head-sliced)",
                pin("rpe-reading", lambda args, side: "sliced-legacy", ENCODINGS, among=("rpehead", "mprhead")),
                defaults_below=11),
    ArgsUpgrade("RecPE's recurrent heads t default per arch (was 1)",
                pin("rpe-heads", lambda args, side: 1, ENCODINGS), defaults_below=11),
    ArgsUpgrade("LSTM position encoding width 2D per direction (was D/2 in the encoder, D in the decoder)",
                pin("position-lstm-units", lambda args, side: side.read(args, "embed-dim") // (1 if side.causal else 2),
                    ENCODINGS), defaults_below=11),
    ArgsUpgrade("LinearNet's matrix covers 128 positions (was 256), and the model's max positions stay within it",
                all_of(pin("linear-max-positions", lambda args, p: 256),
                       keep_positions_within("linear-max-positions", "linear")), defaults_below=11),
    ArgsUpgrade("PosNet-Attn's kernel is shared by the heads, covers 128 positions and has dropout (was per head, "
                "256, none), and the model's max positions stay within it",
                all_of(pin("posnet-kernel", lambda args, p: "head", among=("posnet",)),
                       pin("posnet-max-positions", lambda args, p: 256),
                       pin("posnet-dropout", lambda args, p: 0.0),
                       keep_positions_within("posnet-max-positions", "posnet")), defaults_below=11),
    ArgsUpgrade("--<sublayer>-t5-adaptive on is Wu et al.'s soft buckets (were T5's table with cumulative bucket increments)",
                _t5_adaptive_cumulative, defaults_below=11),
    ArgsUpgrade("PosNet-Embed's activation is ReLU (was GeLU)",
                pin("posnet-embed-activation", lambda args, side: "gelu", ENCODINGS), defaults_below=11),
    ArgsUpgrade("PosNet-Attn's activation is ReLU, as PosNet-Embed's (was GeLU)",
                pin("posnet-activation", lambda args, p: "gelu"), defaults_below=12),
    ArgsUpgrade("K (--<sublayer>-max-relative-position) of hard-coded Gaussian heads is stored only with --<sublayer>-gaussian-impl "
                "window, the one implementation that reads it (was stored for every implementation)",
                _drop_unread_conditional_options, defaults_below=13),
    ArgsUpgrade("PosNet-Embed's d_p defaults to the embedding dim / 4 (was 128, 256 from an embedding dim of 1024)",
                pin("posnet-embed-dim", lambda args, side: 256 if side.read(args, "embed-dim") >= 1024 else 128,
                    ENCODINGS), defaults_below=15),
    # last: the values only older checkpoints use leave the command line for stored legacy readings
    ArgsUpgrade("--<sublayer>-relative-sinusoids, --<sublayer>-posnet-kernel, --<side>-rpe-reading and --<sublayer>-t5-adaptive cumulative "
                "are stored legacy readings (no command line asks for per-head sinusoids or kernels, RecPE's "
                "head-sliced first layer or cumulative T5 buckets)",
                _legacy_values_leave_the_command_line, defaults_below=13),
]


# ---- the defaults of arguments stored before every value was ----------------------------------------
#: the version from which a checkpoint stores the value of every option its model reads
EVERY_VALUE_STORED = 14
#: the defaults of version 13, the last whose checkpoints leave unset options to the code's defaults: mixer ->
#: (gated by default, {option: default}), position encoding -> {option: default}; frozen here, so a default
#: changed later does not change those checkpoints (options with a rule for a default, None, are not listed)
VERSION_13_MIXERS = {
    "aposnet": (True, {"position-table": "sinusoidal", "position-table-layernorm": "off", "position-table-dropout": 0.0}),
    "fourier": (False, {}),
    "gaussian": (False, {"gaussian-sigma": 1.0, "gaussian-impl": "full", "max-relative-position": 16,
                         "gaussian-value-projection": "on"}),
    "lightconv": (False, {"max-relative-position": 16, "lightconv-glu": "on", "lightconv-global-context": "off"}),
    "linear": (False, {"linear-max-positions": 128}),
    "mha": (False, {}),
    "none": (False, {}),
    "posnet": (False, {"posnet-max-positions": 128, "posnet-activation": "relu", "posnet-share-kernels": "on"}),
    "relattn": (False, {"max-relative-position": 16, "position-table": "learned", "relative-embedding-heads": "sliced"}),
    "rposnet": (True, {"max-relative-position": 16, "position-table": "learned", "position-table-layernorm": "off",
                       "position-table-dropout": 0.0, "relative-embedding-heads": "sliced", "rposnet-impl": "auto"}),
    "shaw": (False, {"max-relative-position": 16, "position-table": "learned", "relative-embedding-heads": "shared",
                     "shaw-value-term": "on"}),
    "t5bias": (False, {"t5-buckets": 32, "t5-max-distance": 128, "t5-adaptive": "off", "at5-hidden": "32,4"}),
}
VERSION_13_ENCODINGS = {
    "lstm": {"position-lstm-layers": 1},
    "posnet": {"posnet-embed-max-positions": 256, "posnet-embed-activation": "relu"},
    **{name: {"rpe-heads": 1, "rpe-cell": "gru", "rpe-direction": "forward", "rpe-sinusoids": "on"}
       for name in ("rpehead", "mprhead")},
}


def version_13_default(registry, name: str, option: str):
    """The default of version 13 (today's for an option or entry that did not exist then)."""
    frozen = VERSION_13_MIXERS.get(name, (None, {}))[1] if registry is MIXER_REGISTRY else \
        VERSION_13_ENCODINGS.get(name, {})
    return frozen[option] if option in frozen else todays_default(registry, name, option)


def version_13_gating(mixer: str) -> bool:
    return VERSION_13_MIXERS[mixer][0] if mixer in VERSION_13_MIXERS else todays_gating(mixer)


def defaults_of_version(version: int):
    """(default(registry, name, option), gated(mixer)): what the unset options of arguments stored with defaults version
    ``version`` read (:func:`~.options.store_option_values`). From :data:`EVERY_VALUE_STORED` on, a checkpoint
    stores every value, so only options added since it was made read today's defaults."""
    if version >= EVERY_VALUE_STORED:
        return todays_default, todays_gating
    return version_13_default, version_13_gating


def upgrade_stored_args(args) -> List[str]:
    """Runs every step that concerns ``args`` (in order) and stamps the current defaults version.
    Returns the names of the steps that changed something (empty for arguments of this code, and for
    older arguments whose sublayers read none of the changed options)."""
    ran = [step.name for step in ARGS_UPGRADES if step.concerns(args) and step.apply(args)]
    if stored_defaults_version(args) < DEFAULTS_VERSION:
        setattr(args, DEFAULTS_VERSION_KEY, DEFAULTS_VERSION)
    for name in ran:
        logger.info("stored arguments upgraded: %s", name)
    return ran


# ---- stored parameters ----------------------------------------------------------------------------
# A state dict carries no defaults version, and fairseq loads older weights with today's arguments too
# (--restore-file, --finetune-from-model): each step recognises the stored layout it concerns by its keys,
# answers what moves where, and runs only where it finds some; a checkpoint of this code has none of them.

#: parameters of a mixer that moved under its Values hook: old suffix -> new suffix
VALUES_PARAMETER_RENAMES = {"v_proj.": "values.projection.", "gating.value_norm.": "values.norm.",
                            "energy.relative_values.": "values.relative_values.", "kernels.": "values.kernels."}


def keys_under(state_dict, prefix: str):
    """(key, what follows ``prefix``) of every stored key under ``prefix``, as a list."""
    return [(key, key[len(prefix):]) for key in state_dict if key.startswith(prefix)]


def value_parameters_moved(model, state_dict, prefix: str) -> Dict[str, Optional[str]]:
    """W^V, the gate's value LayerNorm, Shaw's a^V and PosNet-Attn's kernels live under ``values.``."""
    moves = {}
    for sublayer in sublayers(model):
        if not isinstance(sublayer.module, EnergyMixingAttention):
            continue
        base = prefix + sublayer.path + "."
        for key, rest in keys_under(state_dict, base):
            old = next((old for old in VALUES_PARAMETER_RENAMES if rest.startswith(old)), None)
            if old is not None:
                moves[key] = base + VALUES_PARAMETER_RENAMES[old] + rest[len(old):]
    return moves


def cumulative_t5_tables_renamed(model, state_dict, prefix: str) -> Dict[str, Optional[str]]:
    """The cumulative T5 variant's shared table is ``t5bias_<sublayer>_t5cumulative`` (was ``..._at5``,
    a name that read as AT5, whose table is ``..._at5soft``)."""
    moves = {}
    for side in SIDES:
        tables = prefix + f"{side.name}.mixer_position_tables."
        for key, rest in keys_under(state_dict, tables):
            table, _, rest = rest.partition(".")
            if table.startswith("t5bias_") and table.endswith("_at5"):
                moves[key] = tables + table[:-len("_at5")] + "_t5cumulative." + rest
    return moves


def unused_source_tables_dropped(model, state_dict, prefix: str) -> Dict[str, Optional[str]]:
    """A cross-attention rPosNet reads only the target side's n~: the decoders of older checkpoints stored
    a source table (``source_*``) that no decoder of today builds. Only such a table is dropped (and the drop
    logged); any other table the model does not build stays, for fairseq's strict loading to refuse."""
    tables = prefix + "decoder.mixer_position_tables."
    built = model.decoder.mixer_position_tables
    return {key: None for key, rest in keys_under(state_dict, tables)
            if rest.startswith("source_") and rest.split(".")[0] not in built}


def position_encoding_moved(model, state_dict, prefix: str) -> Dict[str, Optional[str]]:
    """The side's position encoding and embedding LayerNorm live under ``position_encoding.`` (they
    were stored under fairseq's ``layernorm_embedding.`` slot, the LayerNorm alone or both)."""
    moves = {}
    for side in SIDES:
        old, new = prefix + f"{side.name}.layernorm_embedding.", prefix + f"{side.name}.position_encoding."
        for key, rest in keys_under(state_dict, old):
            moves[key] = new + (rest if rest.startswith(("encoding.", "layer_norm.")) else "layer_norm." + rest)
    return moves


@dataclass(frozen=True)
class ParameterUpgrade:
    name: str  # what changed
    #: (model, state dict, prefix) -> {stored key: its key today, or None: dropped} of the older layout found
    moves: Callable[..., Dict[str, Optional[str]]]


PARAMETER_UPGRADES = (
    ParameterUpgrade("W^V, the value LayerNorm, Shaw's a^V and PosNet-Attn's kernels under values.",
                     value_parameters_moved),
    ParameterUpgrade("the cumulative T5 table renamed t5bias_<sublayer>_t5cumulative (was _at5)",
                     cumulative_t5_tables_renamed),
    ParameterUpgrade("an unused source table of a cross-attention rPosNet decoder dropped", unused_source_tables_dropped),
    ParameterUpgrade("the position encoding and embedding LayerNorm under position_encoding. (were under "
                     "fairseq's layernorm_embedding.)", position_encoding_moved),
)


def upgrade_stored_parameters(model, state_dict, prefix: str = "") -> List[str]:
    """Every parameter step that finds the older layout it concerns, in order, on ``state_dict`` (in place) for
    ``model``; run by the model's ``upgrade_state_dict_named`` when a checkpoint's state is loaded. Returns the
    names of the steps that ran (none for a checkpoint of this code)."""
    prefix = prefix + "." if prefix else ""
    ran = []
    for step in PARAMETER_UPGRADES:
        moves = step.moves(model, state_dict, prefix)
        if not moves:
            continue
        for old, new in moves.items():
            value = state_dict.pop(old)
            if new is not None:
                state_dict[new] = value
        dropped = sorted(old for old, new in moves.items() if new is None)
        logger.info("stored parameters upgraded: %s (%d keys)%s", step.name, len(moves),
                    f"; dropped: {', '.join(dropped)}" if dropped else "")
        ran.append(step.name)
    return ran
