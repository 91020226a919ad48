"""``rposnet``: rPosNet of Gated position-based attention (000_56daf9cf6f59e3ab.txt), Eqs. 9-10.
The energies depend on positions only, never on token content:

    e_nm = (W^Q n~)(d~_nm)^T / sqrt(D_h),    d~_nm = Emb_rel(clip(floor(gamma n) - m, K))

n~ is the absolute query-position table shared across the layers of a side (learned by default,
Section 5.2); W^Q and Emb_rel ((2K+1) x D, head h uses slice h: Table 8) are per layer.
gamma = 1 in self-attention and the training-set length ratio in cross-attention (Section 4.2).
Gating (Eq. 4) is on by default. Training-time parameters per layer (gated):
4(D^2 + D) + 2D + (2K + 1) D (``--S-relative-embedding-heads shared``: (2K + 1) D_h).
"""
from ..core.positions import clipped_relative_index
from .base import (MixerSpec, max_relative_position, max_relative_position_option, position_table_option,
                   register_mixer, relative_embeddings_options, relative_position_table)
from .mixing import EnergyMixingAttention
from .position_queries import PositionQueries
from .relative_scores import gather_relative


class RelativePositionEnergy(PositionQueries):
    """rPosNet, Eqs. 9-10."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec)
        self.k, self.length_ratio = max_relative_position(spec), spec.length_ratio
        self.relative_embeddings = relative_position_table(spec, self.k, "learned")

    def logits(self, query, query_positions, keys, key_positions):
        q = self.position_queries(query, query_positions)
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(q @ self.relative_embeddings().to(q.dtype).transpose(-1, -2), index)


@register_mixer("rposnet", gated_by_default=True, uses_positions=True,
                description="rPosNet: energies from query positions and clipped relative distances (Eqs. 9-10)",
                options={**max_relative_position_option(), **position_table_option("learned"),
                         **relative_embeddings_options("sliced")})
def build_rposnet(spec: MixerSpec):
    return EnergyMixingAttention(spec, RelativePositionEnergy(spec))
