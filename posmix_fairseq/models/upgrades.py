"""Upgrades of what older checkpoints stored, run once per load: an unset option takes today's default when a
model is built, so a changed default or a renamed option would silently build another model. Ordered steps,
each named by what changed, recognise what they concern (docs/choices.md, "Old checkpoints").
"""
import logging
from dataclasses import dataclass
from typing import Callable, List, Optional

from ..core.placement import PLACEMENTS, SIDES
from ..mixers.engine import MIXER_REGISTRY, EnergyMixingAttention
from ..mixers.engine.frozen_energy import FROZEN_OPTION
from ..position_encodings.base import POSITION_ENCODING_REGISTRY
from .options import (DEFAULTS_VERSION_KEY, DEFAULTS_VERSION, side_has_position_signal, stored_defaults_version,
                      write_legacy_reading)
from .layers import sublayers

logger = logging.getLogger(__name__)

#: what fills a scope: (its scopes, the registry, the option naming the entry, that option's default)
MIXERS = (PLACEMENTS, MIXER_REGISTRY, "mixer", "mha")
ENCODINGS = (SIDES, POSITION_ENCODING_REGISTRY, "position-encoding", None)


def options_read(args, scope, fillers=MIXERS):
    """The options declared by the stored mixer (or position encoding) of ``scope``; none if unknown."""
    _, registry, kind, default = fillers
    name = scope.read(args, kind, default)
    return registry.get(name, scope.flag(kind)).options if name in registry else {}


def pin(option: str, former: Callable, fillers=MIXERS, among=None):
    """Writes ``former(args, scope)`` where the stored arguments leave ``option`` unset and the scope's
    mixer (or position encoding) reads it, or is one of ``among`` (an option that became a legacy reading)."""
    scopes, _, kind, default = fillers

    def apply(args) -> bool:
        changed = False
        for scope in scopes:
            reads = option in options_read(args, scope, fillers) if among is None else \
                scope.read(args, kind, default) in among
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
    ArgsUpgrade("--S-position-embedding renamed --S-position-table, --S-value-projection renamed "
                "--S-gaussian-value-projection",
                rename(PLACEMENTS, {"position-embedding": "position-table",
                                    "value-projection": "gaussian-value-projection"}, then=_drop_unread_mixer_options)),
    ArgsUpgrade("PosNet-Embed's --<side>-posnet-* options renamed --<side>-posnet-embed-*",
                rename(SIDES, {f"posnet-{o}": f"posnet-embed-{o}"
                               for o in ("dim", "max-positions", "dropout", "activation")})),
    ArgsUpgrade("frozen energy tables sized per side: --frozen-energy-positions N is "
                "--encoder-frozen-energy-positions N --decoder-frozen-energy-positions N", _frozen_positions_per_side),
    # defaults that changed with the paper readings (docs/choices.md)
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
    ArgsUpgrade("--S-t5-adaptive on is Wu et al.'s soft buckets (were T5's table with cumulative bucket increments)",
                _t5_adaptive_cumulative, defaults_below=11),
    ArgsUpgrade("PosNet-Embed's activation is ReLU (was GeLU)",
                pin("posnet-embed-activation", lambda args, side: "gelu", ENCODINGS), defaults_below=11),
    ArgsUpgrade("PosNet-Attn's activation is ReLU, as PosNet-Embed's (was GeLU)",
                pin("posnet-activation", lambda args, p: "gelu"), defaults_below=12),
    ArgsUpgrade("K (--S-max-relative-position) of hard-coded Gaussian heads is stored only with --S-gaussian-impl "
                "window, the one implementation that reads it (was stored for every implementation)",
                _drop_unread_conditional_options, defaults_below=13),
    # last: the values only older checkpoints use leave the command line for stored legacy readings
    ArgsUpgrade("--S-relative-sinusoids, --S-posnet-kernel, --<side>-rpe-reading and --S-t5-adaptive cumulative "
                "are stored legacy readings (no command line asks for per-head sinusoids or kernels, RecPE's "
                "head-sliced first layer or cumulative T5 buckets)",
                _legacy_values_leave_the_command_line, defaults_below=13),
]


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

#: parameters of a mixer that moved under its Values hook: old suffix -> new suffix
VALUES_PARAMETER_RENAMES = {"v_proj.": "values.projection.", "gating.value_norm.": "values.norm.",
                            "energy.relative_values.": "values.relative_values.", "kernels.": "values.kernels."}


def keys_under(state_dict, prefix: str):
    """(key, what follows ``prefix``) of every stored key under ``prefix``, as a list."""
    return [(key, key[len(prefix):]) for key in state_dict if key.startswith(prefix)]


def move_value_parameters(model, state_dict, prefix: str):
    """W^V, the gate's value LayerNorm, Shaw's a^V and PosNet-Attn's kernels live under ``values.``."""
    for sublayer in sublayers(model):
        if not isinstance(sublayer.module, EnergyMixingAttention):
            continue
        base = prefix + sublayer.path + "."
        for key, rest in keys_under(state_dict, base):
            for old, new in VALUES_PARAMETER_RENAMES.items():
                if rest.startswith(old):
                    state_dict[base + new + rest[len(old):]] = state_dict.pop(key)
                    break


def rename_cumulative_t5_tables(model, state_dict, prefix: str):
    """The cumulative T5 variant's shared table is ``t5bias_<sublayer>_t5cumulative`` (was ``..._at5``,
    a name that read as AT5, whose table is ``..._at5soft``)."""
    for side in SIDES:
        tables = prefix + f"{side.name}.mixer_position_tables."
        for key, rest in keys_under(state_dict, tables):
            table, _, rest = rest.partition(".")
            if table.startswith("t5bias_") and table.endswith("_at5"):
                state_dict[tables + table[:-len("_at5")] + "_t5cumulative." + rest] = state_dict.pop(key)


def drop_unbuilt_position_tables(model, state_dict, prefix: str):
    """A cross-attention rPosNet reads only the target side's n~: checkpoints that stored an unused
    learned source table in the decoder lose it on load."""
    for side in SIDES:
        tables = prefix + f"{side.name}.mixer_position_tables."
        built = getattr(model, side.name).mixer_position_tables
        for key, rest in keys_under(state_dict, tables):
            if rest.split(".")[0] not in built:
                del state_dict[key]


def move_position_encoding(model, state_dict, prefix: str):
    """The side's position encoding and embedding LayerNorm live under ``position_encoding.`` (they
    were stored under fairseq's ``layernorm_embedding.`` slot, the LayerNorm alone or both)."""
    for side in SIDES:
        old, new = prefix + f"{side.name}.layernorm_embedding.", prefix + f"{side.name}.position_encoding."
        for key, rest in keys_under(state_dict, old):
            inner = rest if rest.startswith(("encoding.", "layer_norm.")) else "layer_norm." + rest
            state_dict[new + inner] = state_dict.pop(key)


PARAMETER_UPGRADES = (move_value_parameters, rename_cumulative_t5_tables, drop_unbuilt_position_tables,
                      move_position_encoding)


def upgrade_stored_parameters(model, state_dict, prefix: str = ""):
    """Every parameter step, in order, on ``state_dict`` (in place) for ``model``; run by the model's
    ``upgrade_state_dict_named`` when a checkpoint's state is loaded."""
    prefix = prefix + "." if prefix else ""
    for step in PARAMETER_UPGRADES:
        step(model, state_dict, prefix)
