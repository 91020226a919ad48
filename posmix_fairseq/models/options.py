"""The command-line schema of ``posmix_transformer``: flags, defaults and validation.

Per sublayer (``encoder-self``, ``decoder-self``, ``decoder-cross``): ``--<sublayer>-mixer``, ``--<sublayer>-gating`` and
every option a registered mixer declares; per side: ``--<side>-position-encoding`` and every option a
registered position encoding declares. An option given where nothing reads it is an error.
The defaults version (a parser default, no flag) and the stored legacy readings: docs/choices.md, "Old
checkpoints". Every option a built model reads is stored with its value (:func:`store_option_values`), so a
default changed later never changes a trained model.
"""
from typing import Callable, Dict

from fairseq.models.transformer.transformer_legacy import base_architecture

from ..core.placement import PLACEMENTS, SIDES
from ..binarized_data import check_length_ratio
from ..mixers import MIXER_REGISTRY, frozen_mixers
from ..mixers.engine.frozen_energy import FROZEN_OPTION, TABLES_AS_LIMITS
from ..position_encodings.base import POSITION_ENCODING_REGISTRY

DEFAULTS_VERSION_KEY = "posmix_paper_readings"  # the attribute checkpoints store the defaults version under
#: the version of the defaults this code builds; upgrade steps with ``defaults_below`` <= it pin former ones
DEFAULTS_VERSION = 15
LEGACY_READINGS = "posmix_legacy_readings"
GATING_CHOICES = ("default", "on", "off")


def add_posmix_args(group):
    """The model's flags on ``group`` (fairseq hands ``add_args`` an argument group)."""
    gated = ", ".join(name for name, entry in MIXER_REGISTRY.items() if entry.gated_by_default)
    for placement in PLACEMENTS:
        where, mixers = placement.name.replace("_", " "), MIXER_REGISTRY.names_at(placement)
        group.add_argument(placement.flag("mixer"), choices=mixers, metavar="MIXER",
                           help=f"token mixer of the {where}-attention sublayer: {', '.join(mixers)} (default: mha)")
        group.add_argument(placement.flag("gating"), choices=GATING_CHOICES,
                           help=f"Eq. 4 GeLU gating: on, off, or the mixer's default (on for {gated})")
    add_declared_options(group, MIXER_REGISTRY, PLACEMENTS)
    encodings = POSITION_ENCODING_REGISTRY.names()
    for side in SIDES:
        group.add_argument(side.flag("position-encoding"), choices=encodings, metavar="KIND",
                           help=f"position module of the {side} input: {', '.join(encodings)} (default: fairseq's "
                                f"flags: sinusoidal, learned with --{side}-learned-pos, none with "
                                "--no-token-positional-embeddings)")
    add_declared_options(group, POSITION_ENCODING_REGISTRY, SIDES)
    group.add_argument("--position-blind", type=str, metavar="SIDES",
                       help="encoder, decoder or encoder,decoder: allow these sides to have no position signal at "
                            "all (the no-PE baselines); otherwise such a combination is an error")
    group.add_argument("--decoder-cross-heads", type=str, metavar="H1,H2,...",
                       help="learned cross-attention heads per decoder layer, one number per layer; 0 removes "
                            "that layer's cross-attention (SH-X: 0,0,0,0,0,1). Default: --decoder-attention-heads "
                            "in every layer")
    for side in SIDES:
        group.add_argument(f"--no-{side}-ffn", action="store_true",
                           help=f"remove the feed-forward sublayers of the {side} (the -FF ablation)")
    group.set_defaults(**{DEFAULTS_VERSION_KEY: DEFAULTS_VERSION})  # a parser default, no flag
    group.add_argument("--length-ratio", type=float, metavar="GAMMA",
                       help="gamma of cross-attention positions floor(gamma*n); default: mean source "
                            "length / mean target length of the binarized training set (stored in the "
                            "checkpoint)")
    for side in SIDES:
        group.add_argument(side.flag(FROZEN_OPTION), type=int, metavar="N",
                           help=f"search-time model: every aposnet/rposnet sublayer keeps its energies as a frozen "
                                f"table (GPA Sections 4.1-4.2) instead of W^Q, W^K, n~/m~ and Emb_rel, covering "
                                f"{side.role} positions 0..N-1; set by posmix-freeze (not a training option)")
    group.add_argument("--" + TABLES_AS_LIMITS.replace("_", "-"), action="store_true",
                       help="search-time model: its max positions are the frozen tables' sizes, so fairseq refuses "
                            "longer sentences and stops outputs within the target table (without it: the trained "
                            "model's --max-source/target-positions, and a position beyond a table is an error); set "
                            "by posmix-freeze --tables-as-max-positions (not a training option)")


def add_declared_options(group, registry, scopes):
    """``--<scope>-<option>`` for every option declared by an entry of ``registry`` that may fill the scope."""
    for scope in scopes:
        for option, kwargs in registry.declared_options(scope).items():
            readers = ", ".join(registry.readers(option, scope))
            group.add_argument(scope.flag(option), **dict(kwargs, help=f"{kwargs.get('help', '')} [read by: {readers}]"))


def stored_defaults_version(args) -> int:
    """The defaults version stored with ``args`` (0: stored without one)."""
    return getattr(args, DEFAULTS_VERSION_KEY, None) or 0


def check_not_newer(version: int) -> None:
    """Refuses arguments stored by newer code: they may name options this code does not know, and building
    them with this code's defaults would give another model without a word."""
    if version > DEFAULTS_VERSION:
        raise ValueError(f"the model was saved by a newer posmix_fairseq (defaults version {version}; this code reads "
                         f"up to {DEFAULTS_VERSION}): upgrade posmix_fairseq to load it")


def made_by_this_code(args) -> bool:
    return stored_defaults_version(args) >= DEFAULTS_VERSION


def legacy_readings(args, scope) -> Dict:
    """option -> value of the legacy readings stored for ``scope`` (a Side or Placement)."""
    return dict((getattr(args, LEGACY_READINGS, None) or {}).get(scope.name, {}))


def write_legacy_reading(args, scope, option: str, value):
    readings = {name: dict(options) for name, options in (getattr(args, LEGACY_READINGS, None) or {}).items()}
    readings.setdefault(scope.name, {})[option] = value
    setattr(args, LEGACY_READINGS, readings)


def read_options(args, scope, entry) -> Dict:
    """The options a registry ``entry`` declares for ``scope`` (each checked against its declaration: a clear
    error naming its flag), with the scope's stored legacy readings."""
    declared = scope.read_declared(args, entry.options)
    entry.check_options(scope, declared)
    return {**declared, **legacy_readings(args, scope)}


def default_mixers(args):
    for placement in PLACEMENTS:
        placement.write(args, "mixer", placement.read(args, "mixer", "mha"))


#: (registry, entry name, option) -> the default an unset option takes; today's: the registry's
Defaults = Callable[[object, str, str], object]


def todays_default(registry, name: str, option: str):
    return registry.get(name, option).options[option].get("default")


def todays_gating(mixer: str) -> bool:
    return MIXER_REGISTRY.get(mixer, "--mixer").gated_by_default


def store_option_values(args, default: Defaults = todays_default, gated: Callable = todays_gating):
    """Writes into ``args`` the value of every option the model reads and the arguments leave unset: each
    sublayer's gating ("default": its mixer's, on or off) and the options its mixer reads, each side's
    position encoding's options, by ``default(registry, name, option)`` (today's defaults, or those an older
    checkpoint was trained with). Run last by every registered arch function, so the arguments a checkpoint
    stores hold every value it was built with. Options whose default is a rule (None: e.g. "--dropout") stay
    unset; an unknown mixer or encoding is left for the validation to name."""
    for placement in PLACEMENTS:
        name = placement.read(args, "mixer", "mha")
        if name not in MIXER_REGISTRY or not MIXER_REGISTRY.get(name, placement.flag("mixer")).available_at(placement):
            continue
        entry = MIXER_REGISTRY.get(name, placement.flag("mixer"))
        if placement.read(args, "gating", "default") == "default":
            placement.write(args, "gating", "on" if gated(name) else "off")
        for option in entry.options:
            if placement.read(args, option) is None and \
                    not entry.unread_condition(option, placement.read_declared(args, entry.options)):
                placement.write(args, option, default(MIXER_REGISTRY, name, option))
    for side in SIDES:
        name = side.read(args, "position-encoding")
        if name in POSITION_ENCODING_REGISTRY:
            entry = POSITION_ENCODING_REGISTRY.get(name, side.flag("position-encoding"))
            for option in entry.options:
                if side.read(args, option) is None:
                    side.write(args, option, default(POSITION_ENCODING_REGISTRY, name, option))


def posmix_base_architecture(args):
    if getattr(args, "ddp_backend", None) == "fully_sharded":  # the arch function sees it before FSDP wraps
        raise ValueError("--ddp-backend fully_sharded (fairseq's FSDP, through fairscale) is not supported by posmix "
                         "models; use pytorch_ddp (alias c10d, the default) or legacy_ddp (alias no_c10d)")
    default_mixers(args)
    for placement in PLACEMENTS:
        placement.write(args, "gating", placement.read(args, "gating", "default"))
    for side in SIDES:
        if side.read(args, "position-encoding") is None:  # fairseq's own flags decide
            kind = ("none" if getattr(args, "no_token_positional_embeddings", False)
                    else "learned" if side.read(args, "learned-pos", False) else "sinusoidal")
            side.write(args, "position-encoding", kind)
        side.write(args, FROZEN_OPTION, side.read(args, FROZEN_OPTION))
    for name in ("length_ratio", "decoder_cross_heads", "position_blind"):
        setattr(args, name, getattr(args, name, None))
    for name in (TABLES_AS_LIMITS, "no_encoder_ffn", "no_decoder_ffn"):
        setattr(args, name, bool(getattr(args, name, False)))
    base_architecture(args)


def side_has_position_signal(args, side) -> bool:
    """Whether ``side`` sees word order: an embedding-level position module, or a position-aware mixer
    on its queries."""
    if side.read(args, "position-encoding", "sinusoidal") != "none":
        return True
    return any(MIXER_REGISTRY.get(p.read(args, "mixer", "mha"), p.flag("mixer")).uses_positions
               for p in PLACEMENTS if p.owner == side)


def check_declared_options(args, scope, registry, kind: str, entry_name: str, what: str):
    """A clear error for an option of ``registry`` given where the scope's entry does not read it (and for an
    entry that may not fill the scope)."""
    entry = registry.get_at(entry_name, scope, kind)
    for option in registry.declared_options():
        if option not in entry.options and scope.read(args, option) is not None:
            raise ValueError(f"{scope.flag(option)} is read only by the {what}(s) "
                             f"{', '.join(registry.readers(option))}, but {scope.flag(kind)} is {entry_name}: "
                             f"drop the flag or choose one of those {what}s")
    return entry


def validate_posmix_args(args):
    """Clear errors for bad options, naming the option and the valid values."""
    for placement in PLACEMENTS:
        mixer, gating = placement.read(args, "mixer"), placement.read(args, "gating")
        if gating not in GATING_CHOICES:
            raise ValueError(f"{placement.flag('gating')}: {gating!r} is not one of {', '.join(GATING_CHOICES)}")
        entry = check_declared_options(args, placement, MIXER_REGISTRY, "mixer", mixer, "mixer")
        for option in MIXER_REGISTRY.declared_options():
            unread = entry.unread_condition(option, placement.read_declared(args, entry.options))
            if unread and placement.read(args, option) is not None:
                other, value = unread
                raise ValueError(f"{placement.flag(option)} is read by the {mixer} mixer only with "
                                 f"{placement.flag(other)} {value}, but {placement.flag(other)} is "
                                 f"{placement.read(args, other, entry.options[other].get('default'))}: "
                                 f"drop the flag or set {placement.flag(other)} {value}")
    blind = position_blind_sides(args)
    for side in SIDES:
        check_declared_options(args, side, POSITION_ENCODING_REGISTRY, "position-encoding",
                               side.read(args, "position-encoding"), "position encoding")
        if side.name not in blind and not side_has_position_signal(args, side):
            via = " (--no-token-positional-embeddings)" if getattr(args, "no_token_positional_embeddings", 0) else ""
            mixers = " / ".join(f"{p.flag('mixer')} {p.read(args, 'mixer')}" for p in PLACEMENTS if p.owner == side)
            aware = ", ".join(n for n, e in MIXER_REGISTRY.items() if e.uses_positions)
            raise ValueError(f"the {side} has no position signal: {side.flag('position-encoding')} none{via} and "
                             f"{mixers} ignore word order. Add positions with {side.flag('position-encoding')} "
                             f"sinusoidal (or another encoding) or a position-aware mixer ({aware}); or pass "
                             f"--position-blind {side} if a position-blind {side} is what you want")
    if args.length_ratio is not None:
        check_length_ratio(args.length_ratio)
    cross_heads(args)  # validates --decoder-cross-heads
    validate_frozen_energy_positions(args)
    validate_fairseq_options(args)


def validate_fairseq_options(args):
    """fairseq's transformer options the posmix flags rule out (docs/choices.md, "fairseq's transformer options")."""
    if getattr(args, "cross_self_attention", False):
        if args.decoder_self_mixer != "mha" or args.decoder_self_gating == "on":
            raise ValueError("--cross-self-attention needs --decoder-self-mixer mha, --decoder-self-gating off")
        if args.encoder_embed_dim != args.decoder_embed_dim:
            raise ValueError("--cross-self-attention attends over [encoder states; target prefix]: --encoder-embed-dim "
                             f"({args.encoder_embed_dim}) must equal --decoder-embed-dim ({args.decoder_embed_dim})")
    unread = [flag for flag, on in (("--decoder-cross-mixer", args.decoder_cross_mixer != "mha"), ("--decoder-cross-"
              "gating", args.decoder_cross_gating == "on"), ("--decoder-cross-heads", args.decoder_cross_heads)) if on]
    if getattr(args, "no_cross_attention", False) and unread:
        raise ValueError(f"--no-cross-attention removes the cross-attention sublayers that {', '.join(unread)} "
                         "configure: drop those flags or --no-cross-attention")
    tied = args.share_decoder_input_output_embed or args.share_all_embeddings
    if tied and args.decoder_output_dim != args.decoder_embed_dim and not getattr(args, "adaptive_softmax_cutoff", 0):
        raise ValueError("--share-decoder-input-output-embed / --share-all-embeddings: the output layer is the target "
                         f"embeddings, so --decoder-output-dim must be --decoder-embed-dim {args.decoder_embed_dim}")


def validate_frozen_energy_positions(args):
    """A search-time model: a table size >= 1 for each side a frozen table reads, and something to freeze."""
    given = {side: side.read(args, FROZEN_OPTION) for side in SIDES if side.read(args, FROZEN_OPTION) is not None}
    if not given:
        if getattr(args, TABLES_AS_LIMITS, False):
            raise ValueError(f"--{TABLES_AS_LIMITS.replace('_', '-')} applies to a search-time model only (one with "
                             f"--encoder/decoder-{FROZEN_OPTION}, written by posmix-freeze); drop the flag")
        return
    for side, n in given.items():
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"{side.flag(FROZEN_OPTION)} must be an integer >= 1 (got {n!r})")
    frozen = [(p, MIXER_REGISTRY.get(p.read(args, "mixer"), p.flag("mixer"))) for p in PLACEMENTS]
    frozen = [(p, entry) for p, entry in frozen if entry.frozen_energy is not None]
    if not frozen:
        flags = " / ".join(f"{side.flag(FROZEN_OPTION)} {n}" for side, n in given.items())
        raise ValueError(f"{flags}: no sublayer has a position-only energy to freeze (--*-mixer "
                         f"{' or '.join(frozen_mixers())}); drop the flag")
    for placement, entry in frozen:
        for side in entry.frozen_energy.table_sides(placement):
            if side not in given:
                raise ValueError(f"{side.flag(FROZEN_OPTION)} is needed: the frozen {placement.read(args, 'mixer')} "
                                 f"table of the {placement} sublayer covers {side.role} positions")


def position_blind_sides(args):
    text = getattr(args, "position_blind", None)
    sides = [s.strip() for s in str(text).split(",") if s.strip()] if text else []
    valid = [s.name for s in SIDES]
    for s in sides:
        if s not in valid:
            raise ValueError(f"--position-blind: {s!r} is not one of {', '.join(valid)}")
    return sides


def cross_heads(cfg):
    """Cross-attention heads of each decoder layer (``--decoder-cross-heads``); 0 = none. ``cfg``: the flat
    namespace or a TransformerConfig (which maps the flat names onto its nested ones)."""
    layers, heads, dim = cfg.decoder_layers, cfg.decoder_attention_heads, cfg.decoder_embed_dim
    text = getattr(cfg, "decoder_cross_heads", None)
    if text is None:
        return [heads] * layers
    try:
        values = [int(v) for v in str(text).split(",")]
    except ValueError:
        raise ValueError(f"--decoder-cross-heads: {text!r} is not a comma list of integers") from None
    if len(values) != layers:
        raise ValueError(f"--decoder-cross-heads needs one number per decoder layer ({layers}); got {len(values)}")
    for v in values:
        if v < 0 or (v > 0 and dim % v != 0):
            raise ValueError(f"--decoder-cross-heads: {v} heads is invalid: use 0 or a divisor of "
                             f"--decoder-embed-dim {dim}")
    if not any(values):
        raise ValueError("--decoder-cross-heads: at least one decoder layer needs cross-attention")
    return values
