"""The output gate of GPA Eq. 4 (the value half is in values.py):

    o_n = W^O ( c_n * GeLU(W^G y_n) )        (c_n the mixed context of query n)
"""
import torch.nn.functional as F
from torch import Tensor, nn

from ... import kernels


class ContextGate(nn.Module):
    """c_n * GeLU(W^G y_n). Parameters: W^G (D^2 + D)."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.gate_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.gate_proj.weight)
        nn.init.zeros_(self.gate_proj.bias)
        self.kernel_choice = None  # the sublayer's (kernels/choice.py), set by the mixer that holds this gate

    def forward(self, context: Tensor, query: Tensor) -> Tensor:
        gate = self.gate_proj(query)
        backend = "torch" if self.kernel_choice is None else self.kernel_choice.backend(context.device, "gating")
        if backend != "torch":  # the fused kernel, where the sublayer's choice says so
            return kernels.gelu_gate(context, gate, backend=backend)
        return context * F.gelu(gate)
