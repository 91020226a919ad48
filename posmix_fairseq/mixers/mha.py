"""``mha``: the Transformer's multi-head attention (Vaswani et al. 2017), the baseline.

Ungated, it is fairseq's own ``MultiheadAttention`` (bit-identical to ``--arch transformer``).
Gated (Gated position-based attention, Table 6 "Transformer + gating"), it is content energies
e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h) inside :class:`EnergyMixingAttention` with Eq. 4.
"""
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from .base import MixerSpec, register_mixer
from .energy import SoftmaxEnergy, head_scaling, split_heads, xavier_linear
from .mixing import EnergyMixingAttention


class ContentEnergy(SoftmaxEnergy):
    """e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h), per head. Parameters: 2(D^2 + D).

    ``projection(in_dim, out_dim)`` builds W^Q and W^K (a full linear map by default)."""

    def __init__(self, spec: MixerSpec, projection=xavier_linear):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.q_proj: nn.Module = projection(spec.embed_dim, spec.embed_dim)
        self.k_proj: nn.Module = projection(spec.kdim, spec.embed_dim)

    def key_features(self, key: Tensor, key_positions: Tensor) -> Tensor:
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
        self_attention=not spec.placement.cross,
        encoder_decoder_attention=spec.placement.cross,
    )
