"""``none``: the sublayer removed (HC Section 5: BASE/-SA, SH-X/-SA).

The mixer contributes nothing, and the posmix layers replace that sublayer's LayerNorm by the
identity, so ``x + 0`` passes through unchanged: exactly a layer without the sublayer.
"""
import torch

from ..core.placement import SELF_ATTENTION_PLACEMENTS
from .engine import MixerSpec, SideResources, TokenMixer, register_mixer


class NoMixing(TokenMixer):
    removes_sublayer = True

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=True,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        return torch.zeros_like(query), None


@register_mixer("none", placements=SELF_ATTENTION_PLACEMENTS, gated_by_default=False, uses_positions=False,
                description="no self-attention sublayer (the -SA ablations of HC Section 5; cross-attention is removed "
                            "with --decoder-cross-heads 0)",
                equation="the sublayer removed", parameters="0")
def build_none(spec: MixerSpec, resources: SideResources):
    if spec.gated:
        raise ValueError(f"{spec.flag('gating')} on has no effect with {spec.flag('mixer')} none")
    return NoMixing(spec.embed_dim, spec.num_heads)
