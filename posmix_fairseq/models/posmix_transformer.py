"""``posmix_transformer``: fairseq's Transformer with a token mixer chosen per attention sublayer
and a position encoding chosen per encoder/decoder.

Built on fairseq's transformer through its hooks: the model's ``build_encoder``/``build_decoder``,
the encoder's/decoder's ``build_*_layer``, and the layers' ``build_self_attention`` /
``build_encoder_attention``. Each sublayer (``encoder_self``, ``decoder_self``,
``decoder_cross``) takes its mixer and options from ``--<sublayer>-mixer``, ``-gating``,
``-max-relative-position`` and ``-position-embedding``. The encoder and the decoder each take an
embedding-level position module from ``--encoder-position-encoding`` / ``--decoder-position-encoding``
(see :mod:`posmix_fairseq.position_encodings`).
"""
import logging

from torch import nn

from fairseq.distributed import fsdp_wrap
from fairseq.models import MODEL_REGISTRY, register_model
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.models.transformer.transformer_legacy import base_architecture
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper

from ..length_ratio import training_length_ratio
from ..mixers.base import MIXER_REGISTRY, POSITION_EMBEDDING_KINDS, MixerSpec, build_mixer, mixer_entry
from ..mixers.no_mixing import NoMixing
from ..mixers.positions import PositionContext, SharedPositionTables
from ..position_encodings.base import (POSITION_ENCODING_REGISTRY, SIDES, EmbeddingStage, PositionEncodingSpec,
                                       position_encoding_entry)

logger = logging.getLogger(__name__)

SUBLAYERS = ("encoder_self", "decoder_self", "decoder_cross")
GATING_CHOICES = ("default", "on", "off")
DEFAULT_MAX_RELATIVE_POSITION = 16


def flag(sublayer: str, option: str) -> str:
    return "--" + sublayer.replace("_", "-") + "-" + option


def add_posmix_args(parser):
    group = parser  # fairseq hands add_args an argument group already
    for sub in SUBLAYERS:
        group.add_argument(flag(sub, "mixer"), choices=sorted(MIXER_REGISTRY), metavar="MIXER",
                           help=f"token mixer of the {sub.replace('_', ' ')}-attention sublayer: "
                                f"{', '.join(sorted(MIXER_REGISTRY))} (default: mha)")
        group.add_argument(flag(sub, "gating"), choices=GATING_CHOICES,
                           help="Eq. 4 GeLU gating: on, off, or the mixer's default (on for aposnet/rposnet)")
        group.add_argument(flag(sub, "max-relative-position"), type=int, metavar="K",
                           help=f"clip relative distances to [-K, K] (default {DEFAULT_MAX_RELATIVE_POSITION})")
        group.add_argument(flag(sub, "position-embedding"), choices=POSITION_EMBEDDING_KINDS,
                           help="position embeddings of position-aware mixers (default: the mixer's)")
    for option, kwargs in mixer_options().items():
        kwargs = {k: v for k, v in kwargs.items() if k != "default"}
        for sub in SUBLAYERS:
            group.add_argument(flag(sub, option), **kwargs)
    for side in SIDES:
        group.add_argument(f"--{side}-position-encoding", choices=sorted(POSITION_ENCODING_REGISTRY),
                           metavar="KIND",
                           help=f"position module of the {side} input: {', '.join(sorted(POSITION_ENCODING_REGISTRY))} "
                                "(default: fairseq's flags: sinusoidal, learned with --" + side + "-learned-pos, "
                                "none with --no-token-positional-embeddings)")
    for option, kwargs in position_encoding_options().items():
        kwargs = {k: v for k, v in kwargs.items() if k != "default"}
        for side in SIDES:
            group.add_argument(f"--{side}-{option}", **kwargs)
    group.add_argument("--decoder-cross-heads", type=str, metavar="H1,H2,...",
                       help="learned cross-attention heads per decoder layer, one number per layer; 0 removes "
                            "that layer's cross-attention (SH-X: 0,0,0,0,0,1). Default: --decoder-attention-heads "
                            "in every layer")
    group.add_argument("--no-encoder-ffn", action="store_true",
                       help="remove the feed-forward sublayers of the encoder (the -FF ablation)")
    group.add_argument("--no-decoder-ffn", action="store_true",
                       help="remove the feed-forward sublayers of the decoder (the -FF ablation)")
    group.add_argument("--length-ratio", type=float, metavar="GAMMA",
                       help="gamma of cross-attention positions floor(gamma*n); default: mean source "
                            "length / mean target length of the binarized training set (stored in the "
                            "checkpoint)")


def mixer_options():
    """Every registered mixer's own options (name -> argparse kwargs), merged."""
    merged = {}
    for entry in MIXER_REGISTRY.values():
        merged.update(entry.options)
    return merged


def position_encoding_options():
    """Every registered position encoding's own options (name -> argparse kwargs), merged."""
    merged = {}
    for entry in POSITION_ENCODING_REGISTRY.values():
        merged.update(entry.options)
    return merged


def option_value(cfg, prefix: str, option: str, default):
    value = getattr(cfg, f"{prefix}_{option.replace('-', '_')}", None)
    return default if value is None else value


def posmix_base_architecture(args):
    defaults = {"mixer": "mha", "gating": "default", "max_relative_position": DEFAULT_MAX_RELATIVE_POSITION,
                "position_embedding": None}
    for sub in SUBLAYERS:
        for option, default in defaults.items():
            if getattr(args, f"{sub}_{option}", None) is None:  # never `or`: K=0 must reach validation
                setattr(args, f"{sub}_{option}", default)
    for side in SIDES:
        if getattr(args, f"{side}_position_encoding", None) is None:  # fairseq's own flags decide
            kind = ("none" if getattr(args, "no_token_positional_embeddings", False)
                    else "learned" if getattr(args, f"{side}_learned_pos", False) else "sinusoidal")
            setattr(args, f"{side}_position_encoding", kind)
    args.length_ratio = getattr(args, "length_ratio", None)
    args.decoder_cross_heads = getattr(args, "decoder_cross_heads", None)
    args.no_encoder_ffn = getattr(args, "no_encoder_ffn", False)
    args.no_decoder_ffn = getattr(args, "no_decoder_ffn", False)
    base_architecture(args)


def validate_posmix_args(args):
    """Clear errors for bad options, naming the option and the valid values."""
    for sub in SUBLAYERS:
        mixer_entry(getattr(args, f"{sub}_mixer"), flag(sub, "mixer"))
        gating = getattr(args, f"{sub}_gating")
        if gating not in GATING_CHOICES:
            raise ValueError(f"{flag(sub, 'gating')}: {gating!r} is not one of {', '.join(GATING_CHOICES)}")
        k = getattr(args, f"{sub}_max_relative_position")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"{flag(sub, 'max-relative-position')} must be an integer >= 1 (got {k!r})")
        kind = getattr(args, f"{sub}_position_embedding")
        if kind is not None and kind not in POSITION_EMBEDDING_KINDS:
            raise ValueError(f"{flag(sub, 'position-embedding')}: {kind!r} is not one of "
                             f"{', '.join(POSITION_EMBEDDING_KINDS)}")
    for side in SIDES:
        name = getattr(args, f"{side}_position_encoding")
        entry = position_encoding_entry(name, f"--{side}-position-encoding")
        if entry.first_self_mixer and getattr(args, f"{side}_self_mixer") != "mha":
            raise ValueError(f"--{side}-position-encoding {name} feeds its first self-attention layer head by head "
                             f"({entry.first_self_mixer}); it needs --{side}-self-mixer mha "
                             f"(got {getattr(args, f'{side}_self_mixer')})")
    if args.length_ratio is not None and not args.length_ratio > 0:
        raise ValueError(f"--length-ratio must be > 0 (got {args.length_ratio})")
    cross_heads(args)  # validates --decoder-cross-heads
    if getattr(args, "cross_self_attention", False) and args.decoder_self_mixer != "mha":
        raise ValueError("--cross-self-attention works only with --decoder-self-mixer mha")


def cross_heads(cfg):
    """Cross-attention heads of each decoder layer (``--decoder-cross-heads``); 0 = none."""
    if hasattr(cfg, "decoder"):  # TransformerConfig (nested)
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


def cross_mixer_uses_positions(args) -> bool:
    return mixer_entry(args.decoder_cross_mixer, "--decoder-cross-mixer").uses_positions


class MixerPlan:
    """Builds the mixer of each (sublayer, layer index) of one encoder or decoder.

    Layers are built in order by fairseq's list comprehension; ``next_layer_index`` hands out
    their explicit indices (fairseq's layer hooks take no index).
    """

    def __init__(self, cfg, shared_tables: SharedPositionTables, position_context=None):
        self.cfg = cfg
        self.shared_tables = shared_tables
        self.position_context = position_context
        self._built_layers = 0

    def next_layer_index(self) -> int:
        self._built_layers += 1
        return self._built_layers - 1

    def spec(self, sublayer: str, layer_idx: int) -> MixerSpec:
        cfg = self.cfg
        name = getattr(cfg, f"{sublayer}_mixer", "mha")
        if sublayer != "decoder_cross" and layer_idx == 0:
            side = sublayer.split("_")[0]
            encoding = position_encoding_entry(getattr(cfg, f"{side}_position_encoding", "sinusoidal"),
                                               f"--{side}-position-encoding")
            name = encoding.first_self_mixer or name  # RPEHead/MPRHead: heads from input slices
        entry = mixer_entry(name, flag(sublayer, "mixer"))
        gating = getattr(cfg, f"{sublayer}_gating", "default")
        side = cfg.encoder if sublayer == "encoder_self" else cfg.decoder
        num_heads = cross_heads(cfg)[layer_idx] if sublayer == "decoder_cross" else side.attention_heads
        src_max, tgt_max = cfg.max_source_positions, cfg.max_target_positions
        src_opt, tgt_opt = "--max-source-positions", "--max-target-positions"
        if sublayer == "encoder_self":
            q_max, k_max, q_opt, k_opt = src_max, src_max, src_opt, src_opt
        elif sublayer == "decoder_self":
            q_max, k_max, q_opt, k_opt = tgt_max, tgt_max, tgt_opt, tgt_opt
        else:
            q_max, k_max, q_opt, k_opt = tgt_max, src_max, tgt_opt, src_opt
        length_ratio = 1.0
        if sublayer == "decoder_cross" and entry.uses_positions:
            if getattr(cfg, "length_ratio", None) is None:
                raise ValueError("--length-ratio is required by the position-aware --decoder-cross-mixer "
                                 f"{name!r} (build the model through fairseq to compute it from the data)")
            length_ratio = float(cfg.length_ratio)
        return MixerSpec(
            name=name,
            placement=sublayer,
            layer_idx=layer_idx,
            num_layers=side.layers,
            embed_dim=side.embed_dim,
            num_heads=num_heads,
            kdim=cfg.encoder.embed_dim,
            attention_dropout=cfg.attention_dropout,
            gated=entry.gated_by_default if gating == "default" else gating == "on",
            max_relative_position=getattr(cfg, f"{sublayer}_max_relative_position", DEFAULT_MAX_RELATIVE_POSITION),
            position_embedding=getattr(cfg, f"{sublayer}_position_embedding", None)
            or entry.default_position_embedding,
            length_ratio=length_ratio,
            max_query_positions=q_max,
            max_key_positions=k_max,
            query_positions_option=q_opt,
            key_positions_option=k_opt,
            shared_tables=self.shared_tables,
            position_context=self.position_context,
            options={option: self._option(sublayer, option, kwargs.get("default"))
                     for option, kwargs in entry.options.items()},
        )

    def _option(self, sublayer, option, default):
        return option_value(self.cfg, sublayer, option, default)

    def build(self, sublayer: str, layer_idx: int):
        return build_mixer(self.spec(sublayer, layer_idx))


def wrap_layer(cfg, layer):
    """Activation checkpointing and FSDP wrapping, as fairseq's own build_*_layer hooks do."""
    checkpoint = cfg.checkpoint_activations
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap if not checkpoint else 0)


class ZeroSublayer(nn.Module):
    """Stands in for a removed feed-forward projection: outputs zeros of ``out_dim`` features."""

    def __init__(self, out_dim: int):
        super().__init__()
        self.out_dim = out_dim

    def forward(self, x):
        return x.new_zeros(*x.shape[:-1], self.out_dim)


class RemovableSublayers:
    """Mixin of the posmix layers: a removed sublayer (mixer ``none``, ``--no-*-ffn``) adds 0 to
    the residual, and its LayerNorm becomes the identity, so the layer equals one without it."""

    def build_fc1(self, input_dim, output_dim, q_noise, qn_block_size):
        if self._ffn_removed:
            return ZeroSublayer(output_dim)
        return super().build_fc1(input_dim, output_dim, q_noise, qn_block_size)

    def build_fc2(self, input_dim, output_dim, q_noise, qn_block_size):
        if self._ffn_removed:
            return ZeroSublayer(output_dim)
        return super().build_fc2(input_dim, output_dim, q_noise, qn_block_size)

    def drop_norms_of_removed_sublayers(self):
        if isinstance(self.self_attn, NoMixing):
            self.self_attn_layer_norm = nn.Identity()
        if self._ffn_removed:
            self.final_layer_norm = nn.Identity()


class PosMixEncoderLayer(RemovableSublayers, TransformerEncoderLayerBase):
    def __init__(self, cfg, plan: MixerPlan, layer_idx: int, return_fc=False):
        # read by the build_* hooks during TransformerEncoderLayerBase.__init__
        self.__dict__.update(_mixer_plan=plan, layer_idx=layer_idx, _ffn_removed=bool(cfg.no_encoder_ffn))
        super().__init__(cfg, return_fc=return_fc)
        self.drop_norms_of_removed_sublayers()

    def build_self_attention(self, embed_dim, cfg):
        return self._mixer_plan.build("encoder_self", self.layer_idx)


class PosMixDecoderLayer(RemovableSublayers, TransformerDecoderLayerBase):
    def __init__(self, cfg, plan: MixerPlan, layer_idx: int, no_encoder_attn=False):
        self.__dict__.update(_mixer_plan=plan, layer_idx=layer_idx, _ffn_removed=bool(cfg.no_decoder_ffn))
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)
        self.drop_norms_of_removed_sublayers()

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("add_bias_kv/add_zero_attn are not supported by posmix decoder layers")
        return self._mixer_plan.build("decoder_self", self.layer_idx)

    def build_encoder_attention(self, embed_dim, cfg):
        return self._mixer_plan.build("decoder_cross", self.layer_idx)


def side_config(args, side: str) -> TransformerConfig:
    """The encoder's or decoder's config: fairseq's additive position embeddings on or off and
    learned or sinusoidal as ``--<side>-position-encoding`` says (fairseq's flags are global)."""
    cfg = TransformerConfig.from_namespace(args)
    entry = position_encoding_entry(getattr(args, f"{side}_position_encoding"), f"--{side}-position-encoding")
    cfg.no_token_positional_embeddings = entry.token_positions is None
    getattr(cfg, side).learned_pos = entry.token_positions == "learned"
    return cfg


def install_position_encoding(owner, cfg, side: str, context: PositionContext):
    """Build the side's embedding-level position module (if it is not fairseq's additive one) and
    run it in the ``layernorm_embedding`` slot, before the original LayerNorm."""
    name = getattr(cfg, f"{side}_position_encoding", "sinusoidal")
    entry = position_encoding_entry(name, f"--{side}-position-encoding")
    side_cfg = getattr(cfg, side)
    spec = PositionEncodingSpec(
        name=name, side=side, embed_dim=side_cfg.embed_dim, num_heads=side_cfg.attention_heads, dropout=cfg.dropout,
        options={option: option_value(cfg, side, option, kwargs.get("default"))
                 for option, kwargs in entry.options.items()})
    module = entry.builder(spec)
    if module is not None:
        owner.layernorm_embedding = EmbeddingStage(module, context, owner.layernorm_embedding)
    limit = None
    if entry.token_positions == "learned":  # fairseq's table has one row per position up to the limit
        which = "source" if side == "encoder" else "target"
        limit = (getattr(cfg, f"max_{which}_positions"), f"--max-{which}-positions")
    owner.__dict__["_learned_positions_limit"] = limit


def check_learned_positions(owner, positions):
    """A clear error instead of fairseq's index error beyond a learned position table."""
    limit = owner.__dict__.get("_learned_positions_limit")
    if limit is not None and positions.numel() and int(positions.max()) >= limit[0]:
        raise ValueError(f"position {int(positions.max())} is beyond the learned position embeddings of "
                         f"{limit[0]} positions; raise {limit[1]} (it sizes the table) or use sinusoidal ones")


class PosMixEncoder(TransformerEncoderBase):
    """Transformer encoder whose self-attention sublayers are token mixers and whose input gets the
    position module of ``--encoder-position-encoding``."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        plan = MixerPlan(cfg, SharedPositionTables(), PositionContext())
        self.__dict__["_mixer_plan"] = plan  # plain attribute, set before nn.Module.__init__
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.mixer_position_tables = plan.shared_tables.tables
        install_position_encoding(self, cfg, "encoder", plan.position_context)

    def forward_embedding(self, src_tokens, token_embedding=None):
        context = self._mixer_plan.position_context
        context.set(src_tokens, self.padding_idx)
        check_learned_positions(self, context.query_positions)
        return super().forward_embedding(src_tokens, token_embedding)

    def build_encoder_layer(self, cfg):
        layer_idx = self._mixer_plan.next_layer_index()
        return wrap_layer(cfg, PosMixEncoderLayer(cfg, self._mixer_plan, layer_idx, return_fc=self.return_fc))


class PosMixDecoder(TransformerDecoderBase):
    """Transformer decoder whose self- and cross-attention sublayers are token mixers and whose
    input gets the position module of ``--decoder-position-encoding``.

    Before embedding it publishes the padding-aware target positions (from the full
    ``prev_output_tokens``, exact in incremental decoding) to its position module and mixers.
    """

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        plan = MixerPlan(cfg, SharedPositionTables(), PositionContext())
        self.__dict__["_mixer_plan"] = plan
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.mixer_position_tables = plan.shared_tables.tables
        install_position_encoding(self, cfg, "decoder", plan.position_context)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        layer_idx = self._mixer_plan.next_layer_index()
        no_encoder_attn = no_encoder_attn or cross_heads(cfg)[layer_idx] == 0
        return wrap_layer(cfg, PosMixDecoderLayer(cfg, self._mixer_plan, layer_idx, no_encoder_attn))

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None,
                         full_context_alignment=False, alignment_layer=None, alignment_heads=None):
        context = self._mixer_plan.position_context
        context.set(prev_output_tokens, self.padding_idx, incremental_state)
        check_learned_positions(self, context.query_positions)
        return super().extract_features(prev_output_tokens, encoder_out, incremental_state,
                                        full_context_alignment, alignment_layer, alignment_heads)


class PosMixTransformerModel(TransformerModel):
    """Transformer (Vaswani et al. 2017) whose attention sublayers are selectable token mixers."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_posmix_args(parser)

    @classmethod
    def build_model(cls, args, task):
        posmix_base_architecture(args)
        validate_posmix_args(args)
        if args.length_ratio is None and cross_mixer_uses_positions(args):
            args.length_ratio = training_length_ratio(task.cfg.data, task.cfg.source_lang, task.cfg.target_lang)
            logger.info("length ratio gamma = %.6f (mean source / mean target length of the training "
                        "data); stored in the checkpoint as --length-ratio", args.length_ratio)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return PosMixEncoder(side_config(args, "encoder"), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = side_config(args, "decoder")
        return PosMixDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


if "posmix_transformer" not in MODEL_REGISTRY:
    register_model("posmix_transformer")(PosMixTransformerModel)
