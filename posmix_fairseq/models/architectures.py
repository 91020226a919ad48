"""Named architectures ``<variant>_<size>``: one table of flag defaults, each overridable on the command
line. Sizes follow GPA Section 5.1: Small (``iwslt_de_en``) = Base with FFN 1024 and dropout 0.3; Base
(``wmt_en_de``); Big (``wmt_en_de_big``). K = 16 for Small/Base and 8 for Big.
"""
import functools

from fairseq.models import ARCH_MODEL_REGISTRY, register_model_architecture

from ..core.placement import PLACEMENTS, SELF_ATTENTION, SIDES
from ..mixers import MIXER_REGISTRY
from ..position_encodings.base import POSITION_ENCODING_REGISTRY
from .options import (check_not_newer, default_mixers, made_by_this_code, posmix_base_architecture,
                      store_option_values, stored_defaults_version)
from .posmix_transformer import PosMixTransformerModel  # noqa: F401  (registers the model first)
from . import upgrades


def both_sides(**options):
    """Each option for the encoder and the decoder: ``self_mixer="shaw"`` sets
    ``encoder_self_mixer`` and ``decoder_self_mixer``; ``position_encoding="none"`` sets
    ``encoder_position_encoding`` and ``decoder_position_encoding``."""
    return {side.attr(option): value for option, value in options.items() for side in SIDES}


def size(dim: int, ffn_dim: int, heads: int, layers: int, dropout: float, k: int):
    """A model size, the same in the encoder and the decoder, with its K (``max_relative_position``)."""
    return dict(both_sides(embed_dim=dim, ffn_embed_dim=ffn_dim, attention_heads=heads, layers=layers),
                dropout=dropout, max_relative_position=k)


SIZES = {"iwslt_de_en": size(512, 1024, 8, 6, 0.3, 16), "wmt_en_de": size(512, 2048, 8, 6, 0.1, 16),
         "wmt_en_de_big": size(1024, 4096, 16, 6, 0.3, 8)}
# The Gaussian paper's own small IWSLT16 configuration (HC Section 4): embedding 288, hidden 507, 4 heads,
# 5 layers; registered for its three variants and its BASE Transformer as <variant>_iwslt_small.
HC_IWSLT_SMALL = size(288, 507, 4, 5, 0.1, 16)


def _table_size(side, mixer: str, option: str):
    """A side's default max positions: the rows of its self-attention mixer's table ``--<side>-self-<option>``
    (LinearNet, PosNet-Attn), by default the size the registry declares (the archs import no variant)."""
    def default(args):
        return SELF_ATTENTION[side].read(args, option, MIXER_REGISTRY.get(mixer, "--mixer").options[option]["default"])
    return default


LINEAR_MAX_POSITIONS = {side.max_positions_attr: _table_size(side, "linear", "linear-max-positions") for side in SIDES}
POSNET_MAX_POSITIONS = {side.max_positions_attr: _table_size(side, "posnet", "posnet-max-positions") for side in SIDES}


def rpe_heads(t):
    """--<side>-rpe-heads t for each side whose position encoding reads it (the other side may use another)."""
    def per_side(side):
        return lambda args: t if "rpe-heads" in POSITION_ENCODING_REGISTRY.get(
            side.read(args, "position-encoding"), side.flag("position-encoding")).options else None
    return {side.attr("rpe-heads"): per_side(side) for side in SIDES}


# variant -> (paper, what it reproduces, flag defaults). Self-attention is replaced in the
# encoder and decoder; cross-attention stays multi-head attention, as in the paper's main tables.
# Relative embeddings are laid out as each arch's paper does (docs/choices.md): GPA counts (2K+1) D per
# layer for Shaw, rPosNet and relative attention (Table 8; Tables 2, 3, 6), with no a^V term in its Shaw
# (its totals exclude one); the positional-encoding analysis shares them across heads, as Shaw et al. do.
# RecPE: t = 3 (RPEHead) and 2 (MPRHead) come closest to the paper's +0.49M / +0.37M at Base.
GPA, HC = "Gated position-based attention", "Hard-coded Gaussian attention"
PEA, RECPE = "Analysis of positional encodings", "Recurrent positional embedding"
VARIANTS = {
    "posmix_transformer": ("Vaswani et al. 2017", "Transformer baseline (Table 6 row 1)",
                           both_sides(self_mixer="mha")),
    "rposnet": (GPA, "rPosNet, Eqs. 9-10, gated (Eq. 4); Tables 2-6",
                both_sides(self_mixer="rposnet", position_encoding="none", self_relative_embedding_heads="sliced")),
    "aposnet": (GPA, "aPosNet, Eq. 8, gated (Eq. 4); Tables 2-6",
                both_sides(self_mixer="aposnet", position_encoding="none")),
    "shaw": ("Shaw et al. 2018", "GPA's Shaw baseline: relative keys, one (2K+1) x D table per layer sliced over the "
                                 "heads, no a^V term; Tables 2, 3, 6",
             both_sides(self_mixer="shaw", position_encoding="none", self_relative_embedding_heads="sliced",
                        self_shaw_value_term="off")),
    "relattn": (GPA, "token-position relative attention, Section 7.2; Table 6",
                both_sides(self_mixer="relattn", position_encoding="none", self_relative_embedding_heads="sliced")),
    "hc_sa": (HC, "HC-SA: hard-coded self-attention, learned cross-attention", both_sides(self_mixer="gaussian")),
    "hc_all": (HC, "HC-ALL: hard-coded self- and cross-attention (gamma)",
               dict(both_sides(self_mixer="gaussian"), decoder_cross_mixer="gaussian")),
    "sh_x": (HC, "SH-X: HC-SA + one learned cross head, last decoder layer only",
             dict(both_sides(self_mixer="gaussian"),
                  decoder_cross_heads=lambda args: ",".join(["0"] * (args.decoder_layers - 1) + ["1"]))),
    "fouriernet": (GPA, "FourierNet, Eq. 11 (encoder; decoder keeps MHA); Appendix A",
                   dict(encoder_self_mixer="fourier", decoder_self_mixer="mha")),
    # GPA 5.2: "All other position-based token-mixing approaches use sinusoidal positional
    # embeddings" -> LinearNet/gLinearNet keep the Transformer's sinusoidal token embeddings; the
    # model's max positions default to the matrix size N (GPA Table 2: N = 128)
    "linearnet": (GPA, "LinearNet, Eq. 13; Appendix A",
                  dict(both_sides(self_mixer="linear", position_encoding="sinusoidal"), **LINEAR_MAX_POSITIONS)),
    "glinearnet": (GPA, "gLinearNet: LinearNet + gating (Eq. 4); Appendix A",
                   dict(both_sides(self_mixer="linear", self_gating="on", position_encoding="sinusoidal"),
                        **LINEAR_MAX_POSITIONS)),
    "lightconvnet": (GPA, "light convolution with GLU, Eq. 14; Appendix E Table 7", both_sides(self_mixer="lightconv")),
    # Analysis of positional encodings
    "nope": (PEA, "no position signal at all (encoder and decoder)",
             dict(both_sides(position_encoding="none"), position_blind="encoder,decoder")),
    "learnedpe": (PEA, "learned absolute position embeddings", both_sides(position_encoding="learned")),
    "shaw_konly": (PEA, "Shaw relative positions, K term only (no a^V)",
                   both_sides(self_mixer="shaw", self_shaw_value_term="off", position_encoding="none",
                              self_relative_embedding_heads="shared")),
    "shaw_sin": (PEA, "Shaw relative positions with sinusoidal a^K, a^V (no position parameters)",
                 both_sides(self_mixer="shaw", self_position_table="sinusoidal", position_encoding="none",
                            self_relative_embedding_heads="shared")),
    "shaw_abs": (PEA, "relative + absolute: Shaw (K and V) with sinusoidal absolute embeddings",
                 both_sides(self_mixer="shaw", position_encoding="sinusoidal", self_relative_embedding_heads="shared")),
    "lstmpe": (PEA, "LSTM positional encoding: biLSTM encoder input, LSTM decoder input",
               both_sides(position_encoding="lstm")),
    "rpehead": (RECPE, "RPEHead, Eqs. 1-4", dict(both_sides(position_encoding="rpehead"), **rpe_heads(3))),
    "mprhead": (RECPE, "MPRHead, Eqs. 1-3, 5", dict(both_sides(position_encoding="mprhead"), **rpe_heads(2))),
    # PosNet and its baselines
    "posnet_embed": ("PosNet", "PosNet-Embed, Eq. 24 (replaces the absolute embeddings)",
                     both_sides(position_encoding="posnet")),
    "posnet_attn": ("PosNet", "PosNet-Attn, Eqs. 20, 23 (kernels on the self-attention values)",
                    dict(both_sides(self_mixer="posnet", position_encoding="none"), **POSNET_MAX_POSITIONS)),
    "t5bias": ("PosNet (baseline: Raffel et al. 2020)", "T5 scalar relative position bias",
               both_sides(self_mixer="t5bias", position_encoding="none")),
    "at5bias": ("PosNet (baseline: Wu et al. 2021)",
                "AT5: soft learnable buckets (1 - exp(-alpha d)) and a per-head MLP",
                both_sides(self_mixer="t5bias", self_t5_adaptive="on", position_encoding="none")),
    # Two position methods that length-generalisation studies compare against, beyond the five papers
    "alibi": ("Press, Smith & Lewis, ICLR 2022 (arXiv:2108.12409)",
              "ALiBi: per-head linear distance penalties, slopes 2^(-8h/H); no position embeddings",
              both_sides(self_mixer="alibi", position_encoding="none")),
    "rope": ("Su, Lu, Pan, Murtadha, Wen & Liu 2021 (arXiv:2104.09864)",
             "RoPE (RoFormer): rotary query and key positions; no position embeddings",
             both_sides(self_mixer="rope", position_encoding="none")),
}

# The released code of GPA (github.com/apptek/posnet-position_based_attention: models/posnet/models/posnet.py,
# pytorchmt/, models/posnet/configs/posnet*.yaml) builds its models differently from the paper's reading
# above; the *_released archs build them as it does (docs/choices.md, "The released GPA code").
GPA_RELEASED = "Gated position-based attention, released code"


def _dropout_where_read(option: str):
    """``--<sublayer>-<option>`` = --dropout for each self-attention sublayer whose mixer reads it."""
    def per(placement):
        return lambda args: args.dropout if _reads(args, placement, option) else None
    return {SELF_ATTENTION[side].attr(option): per(SELF_ATTENTION[side]) for side in SIDES}


RELEASED = dict(
    both_sides(position_encoding="mixer-table"),  # use_pos_embed: n~ added to the word embeddings too
    **_dropout_where_read("position-table-dropout"),  # PosNetEncoder/Decoder._embed: dropout on n~
    encoder_normalize_before=True, decoder_normalize_before=True,  # pre-LayerNorm layers, final LayerNorm
    attention_dropout=lambda args: args.dropout,  # PositionBasedAttention and MultiHeadAttention: the model's
    max_relative_position=16,  # K: 16 in every config, the Big one too
    max_source_positions=128, max_target_positions=128,  # max_sentence_length: 128
    source_prefix="eos",  # TranslationDataset: sources [EOS] x [EOS] (task posmix_translation)
)
VARIANTS.update({
    "rposnet_released": (GPA_RELEASED, "rPosNet as the released code builds it: learned n~ added to the embeddings, "
                                       "LayerNorm + dropout on n~, pre-LN, sources start with EOS",
                         dict(both_sides(self_mixer="rposnet", self_position_table_layernorm="on"), **RELEASED)),
    "aposnet_released": (GPA_RELEASED, "aPosNet as the released code builds it: interleaved sinusoids n~, m~ added "
                                       "to the embeddings, dropout on them, pre-LN, sources start with EOS",
                         dict(both_sides(self_mixer="aposnet", self_absolute_sinusoids="interleaved"), **RELEASED)),
})


def _reads(args, placement, option: str) -> bool:
    """Whether the mixer of ``placement`` (already chosen) reads its own ``option`` under its options."""
    entry = MIXER_REGISTRY.get(placement.read(args, "mixer"), placement.flag("mixer"))
    return option in entry.options and not entry.unread_condition(option, placement.read_declared(args, entry.options))


def _apply(args, defaults):
    """Set each default the user did not give; callables are evaluated last, on the sized args.
    A mixer's own option is set only for the sublayers whose mixer reads it."""
    own_options = {placement.attr(option): (placement, option)
                   for placement in PLACEMENTS for option in MIXER_REGISTRY.declared_options()}
    for key, value in defaults.items():
        if callable(value):
            continue
        if key == "max_relative_position":  # the size's K, for every sublayer that clips distances
            for placement in PLACEMENTS:
                if _reads(args, placement, "max-relative-position"):
                    placement.write(args, "max-relative-position", placement.read(args, "max-relative-position", value))
        elif key in own_options and not _reads(args, *own_options[key]):
            continue
        elif getattr(args, key, None) is None:
            setattr(args, key, value)


def _apply_computed(args, defaults, keys):
    """Set each callable default of ``keys`` the user did not give, computed from the args."""
    for key in keys:
        if callable(defaults.get(key)) and getattr(args, key, None) is None:
            setattr(args, key, defaults[key](args))


def make_architecture(variant_defaults, size_defaults):
    def architecture(args):
        _apply(args, {k: v for k, v in variant_defaults.items() if k.endswith("_mixer")})
        default_mixers(args)  # the mixers are chosen before their own options
        _apply(args, variant_defaults)
        _apply(args, size_defaults)
        # before fairseq's defaults fill them
        _apply_computed(args, variant_defaults, ("max_source_positions", "max_target_positions", "attention_dropout"))
        posmix_base_architecture(args)
        _apply_computed(args, variant_defaults, variant_defaults)

    return architecture


ARCHITECTURES = {}
for _variant, (_paper, _what, _defaults) in VARIANTS.items():
    for _size, _size_defaults in SIZES.items():
        ARCHITECTURES[f"{_variant}_{_size}"] = (_paper, _what, make_architecture(_defaults, _size_defaults))
    if _variant in ("hc_sa", "hc_all", "sh_x", "posmix_transformer"):
        ARCHITECTURES[f"{_variant}_iwslt_small"] = (_paper, _what + " (the paper's small IWSLT model)",
                                                    make_architecture(_defaults, HC_IWSLT_SMALL))


def upgrading_stored_arguments(architecture):
    """The registered arch function. fairseq runs it first on a loaded checkpoint's arguments, so those
    stored by older code (defaults version below the current version) are upgraded here, once, before any
    default fills them; arguments of this code's command lines run no upgrade code. Then every option the model
    reads takes its value (unset ones: the defaults of the code the arguments come from), so the checkpoint
    stores them all."""
    @functools.wraps(architecture)
    def registered(args):
        version = stored_defaults_version(args)
        check_not_newer(version)
        if not made_by_this_code(args):
            upgrades.upgrade_stored_args(args)
        architecture(args)
        store_option_values(args, *upgrades.defaults_of_version(version))
    return registered


if "posmix_transformer" not in ARCH_MODEL_REGISTRY:
    register_model_architecture("posmix_transformer", "posmix_transformer")(
        upgrading_stored_arguments(posmix_base_architecture))
for _name, (_paper, _what, _fn) in ARCHITECTURES.items():
    if _name not in ARCH_MODEL_REGISTRY:
        register_model_architecture("posmix_transformer", _name)(upgrading_stored_arguments(_fn))
