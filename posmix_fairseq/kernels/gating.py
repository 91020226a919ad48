"""The gating epilogue of GPA Eq. 4 (PyTorch reference):

    v_m = LayerNorm(GeLU(W^V x_m))            gelu_layernorm_reference(W^V x, weight, bias, eps)
    c_n * GeLU(W^G y_n)                       gelu_gate_reference(c, W^G y)

GeLU is the exact (erf) form, as ``torch.nn.functional.gelu`` by default
(GPA Section 2.3).
"""
import torch.nn.functional as F
from torch import Tensor


def gelu_layernorm_reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return F.layer_norm(F.gelu(x), (x.size(-1),), weight, bias, eps)


def gelu_gate_reference(context: Tensor, gate_preact: Tensor) -> Tensor:
    return context * F.gelu(gate_preact)
