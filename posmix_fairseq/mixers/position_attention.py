"""Position-based attention of "Gated position-based attention for NMT": aPosNet and rPosNet.

The energies depend on positions only, never on token content:

aPosNet (Eq. 8):  e_nm = (W^Q n~)(W^K m~)^T / sqrt(D_h)
rPosNet (Eqs. 9-10): e_nm = (W^Q n~)(d~_nm)^T / sqrt(D_h),
                     d~_nm = Emb_rel(clip(floor(gamma n) - m, K))

n~, m~ are absolute position embeddings shared across the layers of the encoder (or decoder);
sinusoidal by default for aPosNet, learned for rPosNet (paper Section 5.2). W^Q, W^K and
Emb_rel (one (2K+1) x D_h table shared across heads) are per layer. gamma = 1 in self-attention
and the training-set length ratio in cross-attention (Section 4.2). Gating (Eq. 4) is on by
default. Training-time parameters per layer (gated):
aPosNet 5(D^2 + D) + 2D;  rPosNet 4(D^2 + D) + 2D + (2K + 1) D_h.
"""
from torch import Tensor

from .base import MixerSpec, register_mixer
from .energy_attention import Energy, EnergyMixingAttention, head_scaling, split_heads, xavier_linear
from .positions import RelativePositionTable, clipped_relative_index
from .relative_attention import gather_relative


def _roles(spec: MixerSpec):
    if spec.placement == "encoder_self":
        return "source", "source"
    if spec.placement == "decoder_self":
        return "target", "target"
    return "target", "source"


class PositionQueries(Energy):
    """Shared part of aPosNet/rPosNet: q_n = W^Q n~ from the shared absolute table."""

    def __init__(self, spec: MixerSpec, kind: str):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        query_role, key_role = _roles(spec)
        # Shared across layers and registered by their owner (the encoder or decoder): keep
        # plain references so they are not registered (and saved) once per layer.
        self.__dict__["_tables"] = (
            spec.shared_tables.get(query_role, kind, spec.embed_dim, spec.max_query_positions,
                                   spec.query_positions_option),
            spec.shared_tables.get(key_role, kind, spec.embed_dim, spec.max_key_positions,
                                   spec.key_positions_option),
        )
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)

    @property
    def query_table(self):
        return self.__dict__["_tables"][0]

    @property
    def key_table(self):
        return self.__dict__["_tables"][1]

    def position_queries(self, query: Tensor, query_positions: Tensor) -> Tensor:
        """(B, H, T, D_h) scaled W^Q n~; query supplies only dtype."""
        n = self.query_table(query_positions).to(query.dtype)  # (B, T, D)
        return split_heads(self.q_proj(n).transpose(0, 1) * self.scaling, self.num_heads)


class AbsolutePositionEnergy(PositionQueries):
    """aPosNet, Eq. 8."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec, spec.position_embedding)
        self.k_proj = xavier_linear(spec.embed_dim, spec.embed_dim)

    def project_keys(self, key: Tensor, key_positions: Tensor) -> Tensor:
        m = self.key_table(key_positions).to(self.k_proj.weight.dtype)  # (B, S, D)
        return split_heads(self.k_proj(m).transpose(0, 1), self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        return self.position_queries(query, query_positions) @ keys.to(query.dtype).transpose(-1, -2)


class RelativePositionEnergy(PositionQueries):
    """rPosNet, Eqs. 9-10."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec, spec.position_embedding)
        self.k, self.length_ratio = spec.max_relative_position, spec.length_ratio
        self.relative_embeddings = RelativePositionTable(self.k, spec.embed_dim // spec.num_heads, "learned")

    def logits(self, query, query_positions, keys, key_positions):
        q = self.position_queries(query, query_positions)
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(q @ self.relative_embeddings().to(q.dtype).t(), index)


@register_mixer("aposnet", gated_by_default=True, uses_positions=True, default_position_embedding="sinusoidal",
                description="aPosNet: energies from absolute position embeddings only (Eq. 8)")
def build_aposnet(spec: MixerSpec):
    return EnergyMixingAttention(spec, AbsolutePositionEnergy(spec))


@register_mixer("rposnet", gated_by_default=True, uses_positions=True, default_position_embedding="learned",
                description="rPosNet: energies from query positions and clipped relative distances (Eqs. 9-10)")
def build_rposnet(spec: MixerSpec):
    return EnergyMixingAttention(spec, RelativePositionEnergy(spec))
