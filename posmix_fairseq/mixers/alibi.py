"""``alibi``: attention with linear biases (ALiBi; Press, Smith & Lewis, "Train Short, Test Long: Attention with
Linear Biases Enables Input Length Extrapolation", ICLR 2022, https://arxiv.org/abs/2108.12409, Section 3):

    e^h_nm = (W^Q y_n)^h (W^K x_m)^h^T / sqrt(D_h) - s_h |n - m|,    s_h = 2^(-b h / H),  h = 1..H

a fixed, per-head penalty linear in the distance between TRUE positions, added to the content energies; no
position embeddings and no parameters beyond W^Q, W^K, W^V, W^O. b (``--<sublayer>-alibi-max-bias``) is 8, the
paper's: with 8 heads the slopes are 1/2, 1/4, ..., 1/256, with 16 heads 1/2^0.5, 1/2, ..., 1/256. The paper
defines ALiBi for a causal decoder, where keys precede their query and |n - m| = n - m; in encoder self-attention
the penalty is symmetric, |n - m|. s_h = 2^(-b h / H) for every H (the paper's code interpolates between powers of
two where H is not one). Distances between the query and the source have no meaning, so ALiBi is defined for
self-attention only. Choices: docs/choices.md, "ALiBi and RoPE".
"""
import torch

from ..core.number_ranges import POSITIVE_FLOAT
from ..core.placement import SELF_ATTENTION_PLACEMENTS
from ..core.positions import relative_distance
from .engine import BiasedContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, register_mixer


def alibi_slopes(num_heads: int, max_bias: float) -> torch.Tensor:
    """(H,) s_h = 2^(-b h / H), h = 1..H (Press et al. 2022, Section 3)."""
    return 2.0 ** (-max_bias * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)


class LinearBiasEnergy(BiasedContentEnergy):
    """Content energies minus s_h |n - m| (Press et al. 2022)."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec)
        self.max_bias = float(spec.options["alibi-max-bias"])

    def position_bias(self, query_positions, key_positions):
        """(1, H, T, S) -s_h |n - m| in float32."""
        slopes = alibi_slopes(self.num_heads, self.max_bias).to(device=query_positions.device, dtype=torch.float32)
        distance = relative_distance(query_positions, key_positions).abs().float()  # (B, T, S)
        return -slopes.view(1, -1, 1, 1) * distance.unsqueeze(1)


@register_mixer("alibi", placements=SELF_ATTENTION_PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="ALiBi (Press, Smith & Lewis, ICLR 2022, https://arxiv.org/abs/2108.12409): content "
                            "attention with a per-head linear penalty on the distance",
                equation="(W^Q y_n)(W^K x_m)^T, minus s_h·|n − m| after the 1/sqrt(D_h) scaling; s_h = 2^(−b h / H)",
                parameters="4(D²+D)",
                options={"alibi-max-bias": dict(type=POSITIVE_FLOAT, default=8.0, metavar="B",
                                                help="b of the head slopes s_h = 2^(-b h / H), h = 1..H (default 8, "
                                                     "Press et al. 2022)")})
def build_alibi(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, LinearBiasEnergy(spec))
