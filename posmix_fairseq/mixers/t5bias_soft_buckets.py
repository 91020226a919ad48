"""AT5's soft, learnable bucketing (Wu, Zhang, Mao & Chen 2021, "On scalar embedding of relative
positions in attention models"; the AT5 baseline of PosNet Table 1), per head h and direction:

    f_h(a) = 1 - exp(-alpha_h a),   a = |n - m| >= 0        (beta_h for the other direction)
    b_h(a) = MLP_h(f_h(a)):  1 -> l_1 -> l_2 -> 1, ReLU after the two hidden layers
    e^h_nm = (W^Q y_n)^h (W^K x_m)^h^T / sqrt(D_h) + b_h(|n - m|)

f saturates at 1 (far distances share a value, as T5's last bucket) and its slope is learned, so
each head learns where its "buckets" lie. Shared by the layers of a side, as T5; the decoder has
only the "at or before" direction (later keys are masked). Written from the paper and the structure
of the authors' TensorFlow code (BDBC-KG-NLP/AAAI2021-Scalar-Embedding-of-Relative-Positions,
thumt/layers/soft_t5_attention.py), whose constants these are (docs/choices.md). Parameters per
side: directions * H * (2 l_1 + l_1 l_2 + 2 l_2 + 2); Base: 4,848, +0.005M (PosNet Table 1: 63.08M).
"""
import torch
from torch import Tensor, nn

from ..core.positions import relative_distance

SLOPE_SCALE = 1.0 / 256  # the released code's A = 1 / max_length (THUMT default max_length 256)
SLOPE_INIT = (1.0, 15.0)  # bucket_slop_min / bucket_slop_max of the translation scripts
INIT_STD, INIT_BIAS = 0.1, 0.1  # create_initializer(0.1), constant_initializer(0.1)


def parse_widths(text, option: str):
    try:
        widths = [int(v) for v in str(text).split(",")]
    except ValueError:
        widths = []
    if len(widths) != 2 or min(widths) < 1:
        raise ValueError(f"{option}: give the two hidden widths l1,l2 of the AT5 MLP as positive integers, e.g. "
                         f"32,4 (got {text!r})")
    return widths


class SoftBucketBias(nn.Module):
    """Per-head scalar bias b_h(|n - m|) = MLP_h(1 - exp(-slope_h |n - m|)), per direction."""

    def __init__(self, num_heads: int, bidirectional: bool, widths=(32, 4), dropout: float = 0.0):
        super().__init__()
        l1, l2 = widths
        dirs = 2 if bidirectional else 1  # direction 0: keys at or before the query; 1: after it
        self.bidirectional = bidirectional
        self.slopes = nn.Parameter(torch.empty(dirs, num_heads).uniform_(*SLOPE_INIT))
        self.w1 = nn.Parameter(self._init(dirs, num_heads, l1))
        self.b1 = nn.Parameter(torch.full((dirs, num_heads, l1), INIT_BIAS))
        self.w2 = nn.Parameter(self._init(dirs, num_heads, l1, l2))
        self.b2 = nn.Parameter(torch.full((dirs, num_heads, l2), INIT_BIAS))
        self.w3 = nn.Parameter(self._init(dirs, num_heads, l2))
        self.b3 = nn.Parameter(torch.full((dirs, num_heads), INIT_BIAS))
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _init(*shape):
        return nn.init.trunc_normal_(torch.empty(*shape), std=INIT_STD, a=-2 * INIT_STD, b=2 * INIT_STD)

    def soft_buckets(self, a: Tensor) -> Tensor:
        """(dirs, H, A) soft buckets f(a) = 1 - exp(-slope a) of the distances a (A,) >= 0."""
        slope = torch.relu(self.slopes) * SLOPE_SCALE
        return 1.0 - torch.exp(-slope.unsqueeze(-1) * a.to(slope.dtype))

    def mlp(self, f: Tensor) -> Tensor:
        """(dirs, H, A) biases of the soft buckets f (dirs, H, A): the per-head MLP 1 -> l1 -> l2 -> 1."""
        h1 = torch.relu(f.unsqueeze(-1) * self.w1.unsqueeze(2) + self.b1.unsqueeze(2))  # (dirs, H, A, l1)
        h1 = self.dropout(h1)
        h2 = torch.relu(torch.einsum("dhal,dhlm->dham", h1, self.w2) + self.b2.unsqueeze(2))
        return (h2 * self.w3.unsqueeze(2)).sum(-1) + self.b3.unsqueeze(-1)

    def table(self, longest: int) -> Tensor:
        """(2 longest + 1, H): the bias of d = n - m for d = -longest..longest."""
        a = torch.arange(longest + 1, device=self.slopes.device)
        per_direction = self.mlp(self.soft_buckets(a))  # (dirs, H, longest + 1)
        before = per_direction[0].t()  # d = 0..longest (keys at or before the query)
        after = per_direction[1, :, 1:].t().flip(0) if self.bidirectional else before.new_zeros(longest, before.size(1))
        return torch.cat([after, before], dim=0)  # d = -longest..-1, then 0..longest

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, T, S) biases of every (query, key) pair (later keys are 0 in the decoder: masked)."""
        d = relative_distance(query_positions, key_positions, 1.0)
        longest = int(d.abs().max()) if d.numel() else 0
        return self.table(longest)[d + longest].permute(0, 3, 1, 2)
