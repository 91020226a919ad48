"""Multi-head attention whose head h is computed from slice h of its input: the first self-attention
layer of RecPE models stored before the defaults version (their legacy reading ``rpe-reading
sliced-legacy``, which only their upgrade sets).

RecPE (Chen et al. 2019) Eqs. 4-5 feed self-attention m_j = [P : R] (RPEHead) or
[p^1 : r^1, ..., p^H : r^H] (MPRHead); here head h projects only its own D/H-dim slice m^h:

    head_h = softmax((m^h W^Q_h)(m^h W^K_h)^T / sqrt(D_h)) (m^h W^V_h),   out = [head_1..head_H] W^O

so with d_r = t D / H exactly t heads see R (RPEHead), or every head its own slice of P and R (MPRHead).
The paper projects all of m_j in every head, as its parameter counts confirm; this reading is kept
so those checkpoints load as trained. Parameters: 3 (D^2 / H + D) + (D^2 + D).
"""
import torch
from torch import Tensor, nn

from ..mixers.engine import ContentEnergy, EnergyMixingAttention, MixerSpec, Values


class HeadSlicedLinear(nn.Module):
    """A block-diagonal linear map: output slice h = input slice h @ W_h + b_h (D/H x D/H blocks)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.weight = nn.Parameter(torch.empty(num_heads, self.head_dim, self.head_dim))
        self.bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        for block in self.weight:
            nn.init.xavier_uniform_(block)

    def forward(self, x: Tensor) -> Tensor:
        sliced = x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)
        out = torch.einsum("...hd,hde->...he", sliced, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        return out.reshape(x.shape)


def build_sliced_attention(spec: MixerSpec):
    """The first self-attention layer of ``spec``'s side under the legacy RecPE reading (ungated)."""
    if spec.kdim != spec.embed_dim:
        raise ValueError(f"the head-sliced first layer of {spec.placement} needs equal key and model dims "
                         f"({spec.kdim} != {spec.embed_dim})")
    sliced = lambda in_dim, out_dim: HeadSlicedLinear(out_dim, spec.num_heads)  # noqa: E731
    return EnergyMixingAttention(spec, ContentEnergy(spec, projection=sliced),
                                 Values.of_spec(spec, projection=HeadSlicedLinear(spec.embed_dim, spec.num_heads)))
