"""``aposnet``: aPosNet of GPA Eq. 8. The energies depend on positions only, never on token content:

    e_nm = (W^Q n~)(W^K m~)^T / sqrt(D_h)

n~, m~ are absolute position embeddings shared across the layers of the encoder (or decoder);
sinusoidal by default (Section 5.2). W^Q, W^K are per layer. Gating (Eq. 4) is on by default.
Training-time parameters per layer (gated): 5(D^2 + D) + 2D.
"""
import torch
from torch import Tensor

from ..core.placement import PLACEMENTS
from ..core.position_tables import refer_to_shared
from .engine import (AbsoluteTableEnergy, EnergyMixingAttention, FrozenAbsoluteEnergy, MixerSpec, PositionQueries,
                     SideResources, absolute_table_options, register_mixer, shared_table, split_heads, table_norm,
                     xavier_linear)
from .paths.absolute_table_decoding import AbsoluteTableDecoding
from .paths.position_table import PositionTableMixing


class AbsolutePositionEnergy(PositionQueries, AbsoluteTableEnergy):
    """aPosNet, Eq. 8."""

    def __init__(self, spec: MixerSpec, resources: SideResources):
        super().__init__(spec, resources)
        refer_to_shared(self, "_key_table", shared_table(spec, resources, spec.placement.key_side))  # m~
        refer_to_shared(self, "_key_norm", table_norm(spec, resources, spec.placement.key_side))
        self.k_proj = xavier_linear(spec.embed_dim, spec.embed_dim)

    def key_features(self, key: Tensor, key_positions: Tensor) -> Tensor:
        m = self.table_rows(self._key_table, self._key_norm, key_positions, self.k_proj.weight.dtype)
        return split_heads(self.k_proj(m).transpose(0, 1), self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        return self.position_queries(query, query_positions) @ keys.to(query.dtype).transpose(-1, -2)

    def energy_table(self, num_query_positions: int, num_key_positions: int) -> Tensor:
        """(H, Pq, Pk) energies e_nm of Eq. 8 for query positions n < Pq and key positions m < Pk."""
        positions = torch.arange(max(num_query_positions, num_key_positions), device=self.k_proj.weight.device)
        return self.table_logits(positions[None, :num_query_positions], positions[None, :num_key_positions],
                                 num_query_positions, num_key_positions)[0]

    def table_logits(self, query_positions, key_positions, num_query_positions, num_key_positions):
        """(B, H, T, S) energies of Eq. 8 from W^Q n~ and W^K m~ computed once per position (as (H, P, D_h)),
        multiplied row by row as :meth:`logits` multiplies them (contiguous operands: the same rounding)."""
        keys = self.key_features(None, torch.arange(num_key_positions, device=self.k_proj.weight.device)[None])[0]
        q = self.position_query_table(num_query_positions)[:, query_positions].transpose(0, 1)
        return q.contiguous() @ keys[:, key_positions].permute(1, 0, 3, 2).contiguous()


@register_mixer("aposnet", placements=PLACEMENTS, gated_by_default=True, uses_positions=True, frozen_energy=FrozenAbsoluteEnergy,
                description="aPosNet (GPA Eq. 8): energies from absolute position embeddings only",
                equation="(W^Q n~)(W^K m~)^T (GPA Eq. 8)", parameters="4(D²+D)",
                options=absolute_table_options("sinusoidal"))
def build_aposnet(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, spec.energy(AbsolutePositionEnergy, resources),
                                 paths=[AbsoluteTableDecoding(), PositionTableMixing()])
