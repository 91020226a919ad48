"""``posmix_transformer``: fairseq's Transformer with a token mixer chosen per attention sublayer and a
position encoding chosen per encoder/decoder, built through fairseq's ``build_*`` hooks. Positions take
one route per forward call (docs/contributing.md, "Positions take one route").
"""
import contextlib
import logging

from fairseq.models import MODEL_REGISTRY, register_model
from fairseq.models.transformer import (TransformerConfig, TransformerDecoderBase, TransformerEncoderBase,
                                        TransformerModel)

from ..core.placement import DECODER, ENCODER
from ..core.positions import PositionFrame
from ..fairseq_bf16 import Bf16Inference
from ..fairseq_patches import EmbeddingStageSlot
from ..binarized_data import training_length_ratio
from ..data_fingerprint import attach_fingerprint, check_state_dict
from ..mixers import MIXER_REGISTRY
from ..mixers.engine.frozen_energy import FROZEN_OPTION, TABLES_AS_LIMITS
from ..position_encodings.base import POSITION_ENCODING_REGISTRY
from ..tasks.translation import check_source_prefix
from .layers import PosMixDecoderLayer, PosMixEncoderLayer, wrap_layer
from .options import DEFAULTS_VERSION_KEY, add_posmix_args, cross_heads, made_by_this_code, validate_posmix_args
from .plan import MixerPlan
from .upgrades import upgrade_stored_parameters

logger = logging.getLogger(__name__)


def side_config(args, side) -> TransformerConfig:
    """The encoder's or decoder's config: fairseq's additive position embeddings on or off and
    learned or sinusoidal as ``--<side>-position-encoding`` says (fairseq's flags are global)."""
    cfg = TransformerConfig.from_namespace(args)
    entry = POSITION_ENCODING_REGISTRY.get(side.read(args, "position-encoding"), side.flag("position-encoding"))
    cfg.no_token_positional_embeddings = entry.token_positions is None
    getattr(cfg, side.name).learned_pos = entry.token_positions == "learned"
    return cfg


class PositionAwareSide(EmbeddingStageSlot):
    """Mixin of the encoder and the decoder: the build plan, the position encoding (with fairseq's
    embedding LayerNorm, in fairseq's slot: :class:`EmbeddingStageSlot`), and a clear error beyond a
    learned table."""

    def _setup_positions(self, cfg, side):
        self.mixer_position_tables = self._mixer_plan.resources.shared_tables.tables
        self.position_encoding = self._mixer_plan.position_encoding(self.take_fairseq_layer_norm())
        self._learned_table = None  # (role, positions, option) of fairseq's learned table, one row per position
        if getattr(cfg, side.name).learned_pos:  # set by side_config
            self._learned_table = (side.role, getattr(cfg, side.max_positions_attr), side.max_positions_option)
        bounded = side.name == "encoder" or getattr(cfg, TABLES_AS_LIMITS, False)
        self._frozen_positions = side.read(cfg, FROZEN_OPTION) if bounded else None
        self._checkpointed_layers = bool(cfg.checkpoint_activations)

    def shared_parameters_of_call(self):
        """Under --checkpoint-activations, the views of the shared tables that checkpointed layers receive."""
        if self._checkpointed_layers:
            return self._mixer_plan.shared_parameters.carrying()
        return contextlib.nullcontext()

    def max_positions(self):
        """fairseq's limit; a search-time model's encoder reports at most its frozen tables (fairseq refuses a
        longer source before decoding). Its decoder keeps the trained limit, which bounds fairseq-generate's
        outputs (a smaller table would silently shorten them; a position beyond it is an error instead),
        unless frozen with --tables-as-max-positions."""
        limit = super().max_positions()
        return limit if self._frozen_positions is None else min(limit, self._frozen_positions)

    @property
    def position_route(self):
        return self._mixer_plan.resources.route

    def position_limits(self):
        """(role, positions, option) of fairseq's learned position table, if the side has one."""
        return [self._learned_table] if self._learned_table else []

    def check_learned_positions(self, positions):
        """A clear error instead of fairseq's index error beyond a learned position table."""
        if self._learned_table and positions.numel() and int(positions.max()) >= self._learned_table[1]:
            _, size, option = self._learned_table
            raise ValueError(f"position {int(positions.max())} is beyond the learned position embeddings of "
                             f"{size} positions; raise {option} (it sizes the table) or use sinusoidal ones")


class PosMixEncoder(PositionAwareSide, TransformerEncoderBase):
    """Transformer encoder with token-mixer self-attention and ``--encoder-position-encoding``."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        self._mixer_plan = MixerPlan(cfg, ENCODER)  # not a module: may be set before nn.Module.__init__
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self._setup_positions(cfg, ENCODER)

    def build_encoder_layer(self, cfg):
        plan = self._mixer_plan
        return wrap_layer(cfg, PosMixEncoderLayer(cfg, plan, next(plan.layer_indices), return_fc=self.return_fc), plan)

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False, token_embeddings=None):
        frame = PositionFrame.of_tokens(src_tokens, self.padding_idx)
        self.check_learned_positions(frame.positions)
        with self.position_route.carrying(frame), self.shared_parameters_of_call():
            encoder_out = super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        encoder_out["encoder_positions"] = [frame.positions]  # the decoder's cross-attention reuses them
        return encoder_out

    def reorder_encoder_out(self, encoder_out, new_order):
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        if encoder_out.get("encoder_positions"):
            reordered["encoder_positions"] = [p.index_select(0, new_order) for p in encoder_out["encoder_positions"]]
        return reordered


class PosMixDecoder(PositionAwareSide, TransformerDecoderBase):
    """Transformer decoder with token-mixer self- and cross-attention and ``--decoder-position-encoding``."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self._mixer_plan = MixerPlan(cfg, DECODER)
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self._setup_positions(cfg, DECODER)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        plan = self._mixer_plan
        layer_idx = next(plan.layer_indices)
        no_encoder_attn = no_encoder_attn or cross_heads(cfg)[layer_idx] == 0
        return wrap_layer(cfg, PosMixDecoderLayer(cfg, plan, layer_idx, no_encoder_attn), plan)

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None,
                         full_context_alignment=False, alignment_layer=None, alignment_heads=None):
        source = encoder_out.get("encoder_positions") if encoder_out is not None else None
        frame = PositionFrame.of_tokens(prev_output_tokens, self.padding_idx, source[0] if source else None,
                                        incremental_state)
        self.check_learned_positions(frame.positions)
        with self.position_route.carrying(frame), self.shared_parameters_of_call():
            return super().extract_features(prev_output_tokens, encoder_out, incremental_state,
                                            full_context_alignment, alignment_layer, alignment_heads)


class PosMixTransformerModel(Bf16Inference, TransformerModel):
    """Transformer (Vaswani et al. 2017) whose attention sublayers are selectable token mixers; ``--bf16``
    decodes in bfloat16 (:class:`Bf16Inference`)."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_posmix_args(parser)

    @classmethod
    def build_model(cls, args, task):
        """Builds from arguments the arch function has completed (and upgraded, if stored by older code)."""
        if not made_by_this_code(args):
            raise ValueError(f"model arguments without the current defaults version ({DEFAULTS_VERSION_KEY}): "
                             "arguments stored by older code are upgraded by the arch function; build them "
                             "through fairseq (fairseq.models.build_model / task.build_model), not "
                             "PosMixTransformerModel.build_model")
        validate_posmix_args(args)
        check_source_prefix(task, args)  # the task makes the sources the model was trained on
        if args.length_ratio is None and MIXER_REGISTRY.get(args.decoder_cross_mixer,
                                                             "--decoder-cross-mixer").uses_positions:
            args.length_ratio = training_length_ratio(task.cfg.data, task.cfg.source_lang, task.cfg.target_lang)
            logger.info("length ratio gamma = %.6f (mean source / mean target length of the training "
                        "data); stored in the checkpoint as --length-ratio", args.length_ratio)
        return attach_fingerprint(super().build_model(args, task), task)

    def upgrade_state_dict_named(self, state_dict, name):
        """Parameters stored by older code are renamed (:mod:`.upgrades`), the stored dictionaries' fingerprint
        is checked (:mod:`posmix_fairseq.data_fingerprint`), then fairseq's upgrades run."""
        upgrade_stored_parameters(self, state_dict, name)
        check_state_dict(self, state_dict, name + "." if name else "")
        super().upgrade_state_dict_named(state_dict, name)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return PosMixEncoder(side_config(args, ENCODER), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = side_config(args, DECODER)
        return PosMixDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


if "posmix_transformer" not in MODEL_REGISTRY:
    register_model("posmix_transformer")(PosMixTransformerModel)
