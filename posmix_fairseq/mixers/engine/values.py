"""The values of the mixing step and the output gate, the two halves of GPA Eq. 4:

    v_m = W^V x_m  ungated,  v_m = LayerNorm(GeLU(W^V x_m))  gated;   o_n = W^O ( c_n * GeLU(W^G y_n) )  gated

``projection`` is W^V by default, or another map (light convolution's GLU, RecPE's head-sliced map, the
identity of Gaussian heads without a value projection). Subclasses may make values depend on the keys'
positions (PosNet-Attn, Eq. 23) and add a relative term sum_m a_nm r_nm to each context (Shaw et al. Eq. 3).
"""
from typing import Optional

import torch.nn.functional as F
from torch import Tensor, nn

from ... import kernels
from ...kernels.choice import GATING
from .energy import split_heads, xavier_linear


def gated(module: nn.Module, device, triton_call, torch_call):
    """``module``'s gating by its sublayer's kernels (kernels/choice.py: the ``gating`` part), set by the mixer
    that holds it; PyTorch before that."""
    sublayer = module.sublayer_kernels
    return torch_call() if sublayer is None else sublayer.run(device, GATING, triton_call, torch_call)


def by_torch(module: nn.Module) -> bool:
    """Whether ``module``'s gating runs by PyTorch on every device: then it calls PyTorch directly (a decoding
    step makes these calls in every layer, at every step: no closures and no dispatch by device)."""
    sublayer = module.sublayer_kernels
    return sublayer is None or sublayer.by_torch(GATING)


class Values(nn.Module):
    def __init__(self, projection: nn.Module, embed_dim: int, num_heads: int, gated: bool):
        super().__init__()
        self.num_heads = num_heads
        self.projection = projection
        self.norm = nn.LayerNorm(embed_dim) if gated else None
        self.sublayer_kernels = None

    @classmethod
    def of_spec(cls, spec, projection: Optional[nn.Module] = None, **kwargs) -> "Values":
        """Values of the sublayer ``spec`` with W^V (``projection`` None) or the given map."""
        projection = xavier_linear(spec.kdim, spec.embed_dim) if projection is None else projection
        return cls(projection, spec.embed_dim, spec.num_heads, spec.gated, **kwargs)

    def forward(self, value: Tensor, key_positions: Tensor, key_padding_mask: Tensor) -> Tensor:
        """(B, H, S, D_h) projected (and, gated, normalised) values of the new keys (their positions and
        padding are (B, S))."""
        v = self.projection(value)
        norm = self.norm
        if norm is not None:
            if by_torch(self):
                v = norm(F.gelu(v))
            else:
                v = gated(self, v.device, lambda: kernels.gelu_layernorm(v, norm.weight, norm.bias, norm.eps,
                                                                         "triton"), lambda: norm(F.gelu(v)))
        return split_heads(v, self.num_heads)

    def relative_term(self, weights: Tensor, query_positions: Tensor, key_positions: Tensor) -> Optional[Tensor]:
        """(B, H, T, D_h) added to the context, or None."""
        return None


class ContextGate(nn.Module):
    """c_n * GeLU(W^G y_n). Parameters: W^G (D^2 + D)."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.gate_proj = xavier_linear(embed_dim, embed_dim)
        self.sublayer_kernels = None

    def forward(self, context: Tensor, query: Tensor) -> Tensor:
        """(T, B, D) gated contexts of the (T, B, H, D_h) heads' ``context``, a view in any layout: PyTorch's
        product reads it in place (no copy into (T, B, D) first)."""
        gate = self.gate_proj(query)
        if by_torch(self):
            return (F.gelu(gate).view(context.shape) * context).flatten(2)
        return gated(self, context.device, lambda: kernels.gelu_gate(context.flatten(2), gate, "triton"),
                     lambda: (F.gelu(gate).view(context.shape) * context).flatten(2))
