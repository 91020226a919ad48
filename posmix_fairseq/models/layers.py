"""The posmix encoder and decoder layers: fairseq's layers whose attention sublayers come from the
build plan, removable sublayers (-SA, -FF ablations), and activation-checkpoint wrapping that keeps
each layer's positions and its views of the side's shared parameters with its inputs; and one iterator
over the attention sublayers of a posmix (or fairseq) transformer (:func:`sublayers`)."""
import functools
from typing import Iterator, NamedTuple

from torch import nn
from fairseq.distributed import fsdp_wrap
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from ..core.placement import DECODER_CROSS, DECODER_SELF, ENCODER_SELF, PLACEMENTS, Placement
from .plan import MixerPlan


def _forward_with_frame(plan: MixerPlan, checkpointed_forward, *args, **kwargs):
    return checkpointed_forward(*args, positions=plan.resources.route.frame, **plan.shared_parameters.as_arguments(),
                                **kwargs)


def wrap_layer(cfg, layer, plan: MixerPlan):
    """Activation checkpointing and FSDP wrapping, as fairseq's own build_*_layer hooks do.

    Under checkpointing the layer gets the running frame and the side's views of its shared parameters
    as explicit arguments, kept by the checkpoint with its inputs: the backward recomputation sees the
    positions of the forward it repeats, and the shared parameters get their gradient once per backward
    (as DistributedDataParallel requires; docs/multi-gpu.md).
    """
    checkpoint = cfg.checkpoint_activations
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        layer.forward = functools.partial(_forward_with_frame, plan, layer.forward)
    return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap if not checkpoint else 0)


class ZeroSublayer(nn.Module):
    """Stands in for a removed feed-forward projection: outputs zeros of ``out_dim`` features."""

    def __init__(self, out_dim: int):
        super().__init__()
        self.out_dim = out_dim

    def forward(self, x):
        return x.new_zeros(*x.shape[:-1], self.out_dim)


class PosMixLayer:
    """Mixin of the posmix layers. A removed sublayer (mixer ``none``, ``--no-*-ffn``) adds 0 to the
    residual and its LayerNorm is the identity, so the layer equals one without it. ``forward(...,
    positions=frame, **views)`` (checkpointing only) runs inside that frame, on those views."""

    def build_fc1(self, input_dim, output_dim, *quant_noise):
        return ZeroSublayer(output_dim) if self._ffn_removed else super().build_fc1(input_dim, output_dim, *quant_noise)

    def build_fc2(self, input_dim, output_dim, *quant_noise):
        return ZeroSublayer(output_dim) if self._ffn_removed else super().build_fc2(input_dim, output_dim, *quant_noise)

    def drop_norms_of_removed_sublayers(self):
        if getattr(self.self_attn, "removes_sublayer", False):  # fairseq's MHA has no such attribute
            self.self_attn_layer_norm = nn.Identity()
        if self._ffn_removed:
            self.final_layer_norm = nn.Identity()

    def forward(self, *args, positions=None, **kwargs):
        if positions is None:
            return super().forward(*args, **kwargs)
        shared = self._mixer_plan.shared_parameters
        with self._mixer_plan.resources.route.carrying(positions):
            return shared.run_substituted(shared.take_arguments(kwargs), super().forward, *args, **kwargs)


class PosMixEncoderLayer(PosMixLayer, TransformerEncoderLayerBase):
    def __init__(self, cfg, plan: MixerPlan, layer_idx: int, return_fc=False):
        # read by the build_* hooks during fairseq's __init__ (no modules: plain attributes)
        self._mixer_plan, self.layer_idx, self._ffn_removed = plan, layer_idx, bool(cfg.no_encoder_ffn)
        super().__init__(cfg, return_fc=return_fc)
        self.drop_norms_of_removed_sublayers()

    def build_self_attention(self, embed_dim, cfg):
        return self._mixer_plan.build(ENCODER_SELF, self.layer_idx)


class PosMixDecoderLayer(PosMixLayer, TransformerDecoderLayerBase):
    def __init__(self, cfg, plan: MixerPlan, layer_idx: int, no_encoder_attn=False):
        self._mixer_plan, self.layer_idx, self._ffn_removed = plan, layer_idx, bool(cfg.no_decoder_ffn)
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)
        self.drop_norms_of_removed_sublayers()

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):  # both False here
        if cfg.cross_self_attention:  # keys [encoder; target]: fairseq's module (options.py: only ungated mha)
            return super().build_self_attention(embed_dim, cfg, add_bias_kv, add_zero_attn)
        return self._mixer_plan.build(DECODER_SELF, self.layer_idx)

    def build_encoder_attention(self, embed_dim, cfg):
        return self._mixer_plan.build(DECODER_CROSS, self.layer_idx)


class Sublayer(NamedTuple):
    placement: Placement
    layer: int  # 0-based index in its encoder / decoder
    module: nn.Module  # the token mixer (or fairseq's MultiheadAttention)
    path: str  # its state-dict prefix, e.g. "decoder.layers.2.encoder_attn"


def sublayers(model) -> Iterator[Sublayer]:
    """Every attention sublayer, placement by placement (encoder self, decoder self, decoder cross)
    and layer by layer; a layer without the sublayer (``--decoder-cross-heads`` 0) is skipped."""
    for placement in PLACEMENTS:
        owner = placement.owner.name
        for index, layer in enumerate(getattr(model, owner).layers):
            module = getattr(layer, placement.module_attr, None)
            if module is not None:
                yield Sublayer(placement, index, module, f"{owner}.layers.{index}.{placement.module_attr}")
