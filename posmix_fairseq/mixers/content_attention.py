"""``mha``: the Transformer's multi-head attention (Vaswani et al. 2017), the baseline.

Ungated, it is fairseq's own ``MultiheadAttention`` (bit-identical to ``--arch transformer``).
Gated (Gated position-based attention, Table 6 "Transformer + gating"), it is content energies
e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h) inside :class:`EnergyMixingAttention` with Eq. 4.
"""
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .base import MixerSpec, register_mixer
from .energy_attention import Energy, EnergyMixingAttention, head_scaling, split_heads, xavier_linear


class ContentEnergy(Energy):
    """e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h), per head. Parameters: 2(D^2 + D)."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.k_proj = xavier_linear(spec.kdim, spec.embed_dim)

    def project_keys(self, key: Tensor, key_positions: Tensor) -> Tensor:
        return split_heads(self.k_proj(key), self.num_heads)

    def queries(self, query: Tensor) -> Tensor:
        return split_heads(self.q_proj(query) * self.scaling, self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        return self.queries(query) @ keys.transpose(-1, -2)


@register_mixer("mha", gated_by_default=False, uses_positions=False,
                description="multi-head attention (Vaswani et al. 2017); fairseq's module when ungated")
def build_mha(spec: MixerSpec):
    if spec.gated:
        return EnergyMixingAttention(spec, ContentEnergy(spec))
    return MultiheadAttention(
        spec.embed_dim,
        spec.num_heads,
        kdim=spec.kdim,
        vdim=spec.kdim,
        dropout=spec.attention_dropout,
        self_attention=not spec.is_cross,
        encoder_decoder_attention=spec.is_cross,
    )
