"""The command-line schema of ``posmix_transformer``: flags, defaults, validation, and the upgrade
of arguments stored by older checkpoints.

Per sublayer S in ``encoder-self``, ``decoder-self``, ``decoder-cross``: ``--S-mixer`` and
``--S-gating``, plus every option a registered mixer declares (``--S-<option>``; given for a
sublayer whose mixer does not read it, it is an error). Per side (``encoder``, ``decoder``):
``--<side>-position-encoding`` plus every option a registered position encoding declares.
"""
import logging

from ..core.placement import DECODER, ENCODER, PLACEMENTS, SIDES
from ..mixers.base import MIXER_REGISTRY
from ..position_encodings.base import POSITION_ENCODING_REGISTRY

logger = logging.getLogger(__name__)

GATING_CHOICES = ("default", "on", "off")

# stored argument names of checkpoints made before the renames, per sublayer/side: old -> new option
LEGACY_MIXER_OPTIONS = {"position_embedding": "position-table", "value_projection": "gaussian-value-projection"}


def add_posmix_args(parser):
    group = parser  # fairseq hands add_args an argument group already
    mixers = MIXER_REGISTRY.names()
    for placement in PLACEMENTS:
        where = placement.name.replace("_", " ")
        group.add_argument(placement.flag("mixer"), choices=mixers, metavar="MIXER",
                           help=f"token mixer of the {where}-attention sublayer: {', '.join(mixers)} (default: mha)")
        group.add_argument(placement.flag("gating"), choices=GATING_CHOICES,
                           help="Eq. 4 GeLU gating: on, off, or the mixer's default (on for aposnet/rposnet)")
    for option, kwargs in MIXER_REGISTRY.declared_options().items():
        readers = ", ".join(MIXER_REGISTRY.readers(option))
        kwargs = dict(kwargs, help=f"{kwargs.get('help', '')} [read by: {readers}]")
        for placement in PLACEMENTS:
            group.add_argument(placement.flag(option), **kwargs)
    encodings = POSITION_ENCODING_REGISTRY.names()
    for side in SIDES:
        group.add_argument(side.flag("position-encoding"), choices=encodings, metavar="KIND",
                           help=f"position module of the {side} input: {', '.join(encodings)} (default: fairseq's "
                                f"flags: sinusoidal, learned with --{side}-learned-pos, none with "
                                "--no-token-positional-embeddings)")
    for option, kwargs in POSITION_ENCODING_REGISTRY.declared_options().items():
        readers = ", ".join(POSITION_ENCODING_REGISTRY.readers(option))
        kwargs = dict(kwargs, help=f"{kwargs.get('help', '')} [read by: {readers}]")
        for side in SIDES:
            group.add_argument(side.flag(option), **kwargs)
    group.add_argument("--position-blind", type=str, metavar="SIDES",
                       help="encoder, decoder or encoder,decoder: allow these sides to have no position signal at "
                            "all (the no-PE baselines); otherwise such a combination is an error")
    group.add_argument("--decoder-cross-heads", type=str, metavar="H1,H2,...",
                       help="learned cross-attention heads per decoder layer, one number per layer; 0 removes "
                            "that layer's cross-attention (SH-X: 0,0,0,0,0,1). Default: --decoder-attention-heads "
                            "in every layer")
    group.add_argument("--no-encoder-ffn", action="store_true",
                       help="remove the feed-forward sublayers of the encoder (the -FF ablation)")
    group.add_argument("--no-decoder-ffn", action="store_true",
                       help="remove the feed-forward sublayers of the decoder (the -FF ablation)")
    from .paper_readings import MARKER, VERSION
    group.add_argument("--" + MARKER.replace("_", "-"), type=int, default=VERSION, metavar="N",
                       help="which papers' readings the model was built with (stored in checkpoints; a checkpoint "
                            "without it keeps its pre-issue-11 defaults, see models/paper_readings.py)")
    group.add_argument("--length-ratio", type=float, metavar="GAMMA",
                       help="gamma of cross-attention positions floor(gamma*n); default: mean source "
                            "length / mean target length of the binarized training set (stored in the "
                            "checkpoint)")
    group.add_argument("--frozen-energy-positions", type=int, metavar="N",
                       help="search-time model: every aposnet/rposnet sublayer keeps its energies as a frozen table "
                            "over positions 0..N-1 (GPA Sections 4.1-4.2) instead of W^Q, W^K, n~/m~ and Emb_rel; "
                            "set by posmix-freeze --max-positions N (not a training option)")


# Options added by issue 11 ("Match the papers") -> the value that reproduces the code before it, set on
# arguments stored before issue 11 where the sublayer's mixer / the side's encoding reads the option.
# Fresh arguments carry the stored marker of models/paper_readings.py (a model option whose parser
# default is its VERSION); arguments stored before issue 11 lack it. (fairseq leaves unset model options
# absent from fresh arguments too, so they cannot tell old from new.) fairseq runs the arch function on
# stored arguments before build_model, so every arch function upgrades first (before its defaults fill
# the unset options).
# (shaw-value-term and rpe-heads: the shaw / rpehead / mprhead archs' defaults changed with issue 11)
# (relative-sinusoids: only where the relative table is sinusoidal)
ISSUE11_MIXER_OPTIONS = {
    "relative-embedding-heads": lambda args, placement: "shared",
    "relative-sinusoids": lambda args, placement:
        "head" if getattr(args, placement.attr("position-table"), None) == "sinusoidal" else None,
    "shaw-value-term": lambda args, placement: "on",
}
# (per side; the LSTM's old width: D/2 per direction in the encoder, D in the decoder)
ISSUE11_ENCODING_OPTIONS = {
    "rpe-reading": lambda args, side: "sliced-legacy",
    "rpe-heads": lambda args, side: 1,
    "position-lstm-units": lambda args, side: getattr(args, f"{side}_embed_dim") // (2 if side.causal is False else 1),
}


def upgrade_legacy_args(args) -> bool:
    """Arguments stored by older checkpoints: the renames (below), then the defaults issue 11 changed
    (baselines: models/paper_readings.py; relative tables, RPE, LSTM: ``upgrade_issue11_args``),
    which a checkpoint made before it lacks: it gets the values that rebuild the model it was
    trained as. Called by every arch function before it fills defaults. Returns whether anything
    was upgraded."""
    from .paper_readings import made_before_issue11, upgrade_pre_issue11_args

    renamed = upgrade_renamed_args(args)
    if not made_before_issue11(args):
        return renamed
    relative = upgrade_issue11_args(args)  # first: upgrade_pre_issue11_args sets the marker
    pinned = upgrade_pre_issue11_args(args)
    if pinned or relative:
        logger.info("arguments stored before issue 11: its former defaults pinned (README, Choices, issue 11)")
    return True


def upgrade_issue11_args(args) -> bool:
    """Relative tables, RPE and the LSTM of arguments stored before issue 11 (the caller checks the
    marker): the values their code built. Returns whether anything was set."""
    upgraded = False
    for placement in PLACEMENTS:
        mixer = getattr(args, placement.attr("mixer"), None) or "mha"
        read = MIXER_REGISTRY.get(mixer, placement.flag("mixer")).options if mixer in MIXER_REGISTRY else {}
        for option, value in ISSUE11_MIXER_OPTIONS.items():
            if option in read and getattr(args, placement.attr(option), None) is None:
                setattr(args, placement.attr(option), value(args, placement))
                upgraded = True
    for side in SIDES:
        name = getattr(args, f"{side}_position_encoding", None)
        read = POSITION_ENCODING_REGISTRY.get(name, side.flag("position-encoding")).options \
            if name in POSITION_ENCODING_REGISTRY else {}
        for option, value in ISSUE11_ENCODING_OPTIONS.items():
            attr = f"{side}_{option.replace('-', '_')}"
            if option in read and getattr(args, attr, None) is None:
                setattr(args, attr, value(args, side))
                upgraded = True
    return upgraded


def upgrade_renamed_args(args) -> bool:
    """Arguments stored by checkpoints made before the option renames: rename them, and drop the
    mixer options their code stored for sublayers whose mixer never read them (so they still
    build the model they were trained as). Returns whether anything was upgraded."""
    legacy = any(hasattr(args, p.attr(old)) for p in PLACEMENTS for old in LEGACY_MIXER_OPTIONS)
    if not legacy:
        return False
    for placement in PLACEMENTS:
        for old, new in LEGACY_MIXER_OPTIONS.items():
            value = getattr(args, placement.attr(old), None)
            if hasattr(args, placement.attr(old)):
                delattr(args, placement.attr(old))
            if value is not None and getattr(args, placement.attr(new), None) is None:
                setattr(args, placement.attr(new), value)
        mixer = getattr(args, placement.attr("mixer"), None) or "mha"
        read = MIXER_REGISTRY.get(mixer, placement.flag("mixer")).options if mixer in MIXER_REGISTRY else {}
        for option in MIXER_REGISTRY.declared_options():
            if option not in read and getattr(args, placement.attr(option), None) is not None:
                setattr(args, placement.attr(option), None)
    if getattr(args, "position_blind", None) is None:  # the no-PE arch had no such flag then
        blind = [s.name for s in SIDES if not side_has_position_signal(args, s)]
        args.position_blind = ",".join(blind) or None
    return True


def default_mixers(args):
    for placement in PLACEMENTS:
        if getattr(args, placement.attr("mixer"), None) is None:
            setattr(args, placement.attr("mixer"), "mha")


def posmix_base_architecture(args):
    from fairseq.models.transformer.transformer_legacy import base_architecture

    upgrade_legacy_args(args)  # stored arguments: before any default fills them (idempotent)
    default_mixers(args)
    for placement in PLACEMENTS:
        if getattr(args, placement.attr("gating"), None) is None:
            setattr(args, placement.attr("gating"), "default")
    for side in SIDES:
        if getattr(args, f"{side}_position_encoding", None) is None:  # fairseq's own flags decide
            kind = ("none" if getattr(args, "no_token_positional_embeddings", False)
                    else "learned" if getattr(args, f"{side}_learned_pos", False) else "sinusoidal")
            setattr(args, f"{side}_position_encoding", kind)
    for name in ("length_ratio", "decoder_cross_heads", "position_blind", "frozen_energy_positions"):
        setattr(args, name, getattr(args, name, None))
    args.no_encoder_ffn = getattr(args, "no_encoder_ffn", False)
    args.no_decoder_ffn = getattr(args, "no_decoder_ffn", False)
    base_architecture(args)


def side_has_position_signal(args, side) -> bool:
    """An embedding-level position module, or a position-aware mixer on the side's queries."""
    if getattr(args, f"{side}_position_encoding", "sinusoidal") != "none":
        return True
    placements = [p for p in PLACEMENTS if p.owner == side]
    return any(MIXER_REGISTRY.get(getattr(args, p.attr("mixer"), "mha"), p.flag("mixer")).uses_positions
               for p in placements)


def validate_posmix_args(args):
    """Clear errors for bad options, naming the option and the valid values."""
    for placement in PLACEMENTS:
        mixer = getattr(args, placement.attr("mixer"))
        entry = MIXER_REGISTRY.get(mixer, placement.flag("mixer"))
        gating = getattr(args, placement.attr("gating"))
        if gating not in GATING_CHOICES:
            raise ValueError(f"{placement.flag('gating')}: {gating!r} is not one of {', '.join(GATING_CHOICES)}")
        for option in MIXER_REGISTRY.declared_options():
            if option not in entry.options and getattr(args, placement.attr(option), None) is not None:
                raise ValueError(f"{placement.flag(option)} is read only by the mixer(s) "
                                 f"{', '.join(MIXER_REGISTRY.readers(option))}, but {placement.flag('mixer')} is "
                                 f"{mixer}: drop the flag or choose one of those mixers")
    for side in SIDES:
        name = getattr(args, f"{side}_position_encoding")
        entry = POSITION_ENCODING_REGISTRY.get(name, side.flag("position-encoding"))
        for option in POSITION_ENCODING_REGISTRY.declared_options():
            if option not in entry.options and getattr(args, f"{side}_{option.replace('-', '_')}", None) is not None:
                raise ValueError(f"{side.flag(option)} is read only by the position encoding(s) "
                                 f"{', '.join(POSITION_ENCODING_REGISTRY.readers(option))}, but "
                                 f"{side.flag('position-encoding')} is {name}: drop the flag or choose one of those")
        self_mixer = getattr(args, f"{side}_self_mixer")
        first = entry.first_self_mixer_of({o: getattr(args, f"{side}_{o.replace('-', '_')}", None) or kw.get("default")
                                           for o, kw in entry.options.items()})
        if first and self_mixer != "mha":
            raise ValueError(f"{side.flag('position-encoding')} {name} feeds its first self-attention layer head by "
                             f"head ({first}); it needs --{side}-self-mixer mha (got {self_mixer})")
    blind = position_blind_sides(args)
    for side in SIDES:
        if side.name not in blind and not side_has_position_signal(args, side):
            mixers = " / ".join(f"{p.flag('mixer')} {getattr(args, p.attr('mixer'))}"
                                for p in PLACEMENTS if p.owner == side)
            aware = ", ".join(n for n, e in MIXER_REGISTRY.items() if e.uses_positions)
            raise ValueError(f"the {side} has no position signal: {side.flag('position-encoding')} none and "
                             f"{mixers} ignore word order. Add positions with {side.flag('position-encoding')} "
                             f"sinusoidal (or another encoding) or a position-aware mixer ({aware}); or pass "
                             f"--position-blind {side} if a position-blind {side} is what you want")
    if args.length_ratio is not None and not args.length_ratio > 0:
        raise ValueError(f"--length-ratio must be > 0 (got {args.length_ratio})")
    cross_heads(args)  # validates --decoder-cross-heads
    validate_frozen_energy_positions(args)
    if getattr(args, "cross_self_attention", False) and args.decoder_self_mixer != "mha":
        raise ValueError("--cross-self-attention works only with --decoder-self-mixer mha")


def validate_frozen_energy_positions(args):
    frozen = getattr(args, "frozen_energy_positions", None)
    if frozen is None:
        return
    if not isinstance(frozen, int) or frozen < 1:
        raise ValueError(f"--frozen-energy-positions must be an integer >= 1 (got {frozen!r})")
    from ..mixers.frozen_energy import FROZEN_ENERGIES
    if not any(getattr(args, p.attr("mixer")) in FROZEN_ENERGIES for p in PLACEMENTS):
        raise ValueError(f"--frozen-energy-positions {frozen}: no sublayer has a position-only energy to freeze "
                         f"(--*-mixer {' or '.join(FROZEN_ENERGIES)}); drop the flag")


def position_blind_sides(args):
    text = getattr(args, "position_blind", None)
    sides = [s.strip() for s in str(text).split(",") if s.strip()] if text else []
    valid = [s.name for s in SIDES]
    for s in sides:
        if s not in valid:
            raise ValueError(f"--position-blind: {s!r} is not one of {', '.join(valid)}")
    return sides


def cross_heads(cfg):
    """Cross-attention heads of each decoder layer (``--decoder-cross-heads``); 0 = none."""
    if hasattr(cfg, "decoder") and not isinstance(cfg.decoder, str):  # TransformerConfig (nested)
        layers, heads, dim = cfg.decoder.layers, cfg.decoder.attention_heads, cfg.decoder.embed_dim
    else:  # the flat argparse namespace
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
