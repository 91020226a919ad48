"""GeLU gating of Gated position-based attention, Eq. 4.

    v_m = LayerNorm(GeLU(W^V x_m))           (values)
    o_n = W^O ( c_n * GeLU(W^G y_n) )        (c_n the mixed context of query n)
"""
import torch.nn.functional as F
from torch import Tensor, nn


class ValueGate(nn.Module):
    """The gated path of Eq. 4: LayerNorm(GeLU(.)) on the projected values, a GeLU gate
    W^G y_n on the context. Parameters: W^G (D^2 + D) and the LayerNorm (2D)."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.value_norm = nn.LayerNorm(embed_dim)
        self.gate_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.gate_proj.weight)
        nn.init.zeros_(self.gate_proj.bias)

    def values(self, projected_values: Tensor) -> Tensor:
        return self.value_norm(F.gelu(projected_values))

    def gate(self, context: Tensor, query: Tensor) -> Tensor:
        return context * F.gelu(self.gate_proj(query))
