"""The shared part of aPosNet and rPosNet (Gated position-based attention, Section 4.1):
queries q_n = W^Q n~ from the absolute position table n~ shared across the layers of a side.

Because q_n depends on the position n only, each energy can be tabulated over positions
(:meth:`PositionQueries.position_query_table`, and the energies' ``energy_table``): the mixing
kernels, the window form of rPosNet and the frozen search-time energies all start from that table.
"""
import torch
from torch import Tensor

from .registry import MixerSpec
from .energy import SoftmaxEnergy, head_scaling, split_heads, xavier_linear


def shared_table(spec: MixerSpec, side):
    """The absolute position table n~ (or m~) of ``side``, shared across the layers of its owner."""
    return spec.shared_tables.get(side.role, spec.options["position-table"], spec.embed_dim,
                                  spec.max_query_positions if side == spec.placement.query_side
                                  else spec.max_key_positions, side.max_positions_option)


class PositionQueries(SoftmaxEnergy):
    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        # Shared across layers and registered by their owner (the encoder or decoder): keep a
        # plain reference so it is not registered (and saved) once per layer. Only the query
        # side's table is built here: rPosNet never reads the key side's (a cross-attention
        # rPosNet would otherwise build an unused source table in the decoder).
        self.__dict__["_query_table"] = shared_table(spec, spec.placement.query_side)
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)

    @property
    def query_table(self):
        return self.__dict__["_query_table"]

    def position_queries(self, query: Tensor, query_positions: Tensor) -> Tensor:
        """(B, H, T, D_h) scaled W^Q n~; ``query`` (any tensor) supplies only the dtype."""
        n = self.query_table(query_positions).to(query.dtype)  # (B, T, D)
        return split_heads(self.q_proj(n).transpose(0, 1) * self.scaling, self.num_heads)

    def position_query_table(self, num_positions: int) -> Tensor:
        """(H, P, D_h) scaled W^Q n~ for the positions 0 .. P-1 (float32)."""
        positions = torch.arange(num_positions, device=self.q_proj.weight.device)
        n = self.query_table(positions).to(self.q_proj.weight.dtype)  # (P, D)
        return split_heads(self.q_proj(n).unsqueeze(1) * self.scaling, self.num_heads)[0]
