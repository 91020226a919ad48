"""The shared part of aPosNet and rPosNet (Gated position-based attention, Section 4.1):
queries q_n = W^Q n~ from the absolute position table n~ shared across the layers of a side."""
from torch import Tensor

from .base import MixerSpec
from .energy import SoftmaxEnergy, head_scaling, split_heads, xavier_linear


class PositionQueries(SoftmaxEnergy):
    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        placement, kind = spec.placement, spec.options["position-table"]
        # Shared across layers and registered by their owner (the encoder or decoder): keep
        # plain references so they are not registered (and saved) once per layer.
        self.__dict__["_tables"] = (
            spec.shared_tables.get(placement.query_side.role, kind, spec.embed_dim, spec.max_query_positions,
                                   placement.query_side.max_positions_option),
            spec.shared_tables.get(placement.key_side.role, kind, spec.embed_dim, spec.max_key_positions,
                                   placement.key_side.max_positions_option),
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
