"""``sliced_mha``: multi-head attention whose head h is computed from slice h of its input.

RecPE (Chen et al. 2019) Eqs. 4-5: the input of self-attention is
m_j = [P : R] (RPEHead) or [p^1 : r^1, ..., p^H : r^H] (MPRHead), and head h attends with
queries, keys and values projected from its own D/H-dimensional slice of m_j:

    head_h = softmax((m^h W^Q_h)(m^h W^K_h)^T / sqrt(D_h)) (m^h W^V_h),   out = [head_1..head_H] W^O

so with d_r = t D / H, exactly t heads see the recurrent part R (RPEHead), or every head sees its
own slice of P and of R (MPRHead). This is the reading of checkpoints stored without a
defaults version (``--S-rpe-reading sliced-legacy``), kept so they load as trained; the paper's Eqs. 4-5 project
all of m_j in every head (the Transformer's attention), which its parameter counts confirm.
Parameters: 3 (D^2 / H + D) + (D^2 + D).
"""
import torch
from torch import Tensor, nn

from .engine import ContentEnergy, EnergyMixingAttention, MixerSpec, Values, register_mixer


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


@register_mixer("sliced_mha", gated_by_default=False, uses_positions=False,
                description="multi-head attention with head h computed from input slice h (RecPE Eqs. 4-5)")
def build_sliced_mha(spec: MixerSpec):
    if spec.kdim != spec.embed_dim:
        raise ValueError(f"{spec.flag('mixer')} sliced_mha needs equal key and model dims "
                         f"({spec.kdim} != {spec.embed_dim})")
    sliced = lambda in_dim, out_dim: HeadSlicedLinear(out_dim, spec.num_heads)  # noqa: E731
    return EnergyMixingAttention(spec, ContentEnergy(spec, projection=sliced),
                                 Values.of_spec(spec, projection=HeadSlicedLinear(spec.embed_dim, spec.num_heads)))
