"""``t5bias``: T5's scalar relative position bias (Raffel et al. 2020) and AT5, its learnable
bucketisation (Wu, Zhang, Mao & Chen 2021, "On scalar embedding of relative positions in attention
models"); the baselines of PosNet Table 1:

    T5:  e^h_nm = (W^Q y_n)^h (W^K x_m)^h^T / sqrt(D_h) + b^h[bucket(n - m)]
    AT5: e^h_nm = (W^Q y_n)^h (W^K x_m)^h^T / sqrt(D_h) + MLP_h(1 - exp(-alpha_h |n - m|))

T5 buckets d = n - m (``t5_bucket``) up to ``max_distance``, beyond which the bucket is constant, so
distances are clipped there exactly (any length extrapolates). Unlike T5 (which folds 1/sqrt(D_h)
into its initialisation) the content term keeps fairseq's scaling. AT5 (``--<sublayer>-t5-adaptive on``)
learns per head and direction the slope of a soft bucket that saturates at 1 (far distances share a
value, as T5's last bucket), with the constants of the authors' TensorFlow code
(BDBC-KG-NLP/AAAI2021-Scalar-Embedding-of-Relative-Positions, thumt/layers/soft_t5_attention.py);
it adds 4,848 parameters at Base: +0.005M (PosNet Table 1: 63.08M). Both are shared by a side's layers.

The cumulative variant (the stored legacy reading ``t5-adaptive cumulative`` of old checkpoints) keeps
T5's table and learns its bucket boundaries (docs/choices.md, "AT5, cumulative variant").
"""
import math
from typing import Protocol, Tuple

import torch
from torch import Tensor, nn

from ..core.number_ranges import Number
from ..core.placement import ENCODER_SELF, SELF_ATTENTION_PLACEMENTS
from ..core.position_tables import PositionFigure, refer_to_shared
from ..core.positions import relative_distance
from .engine import BiasedContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, register_mixer

ADAPTIVE = ("off", "on")
CUMULATIVE = "cumulative"  # the stored legacy reading "t5-adaptive" of checkpoints made before the marker
SLOPE_SCALE = 1.0 / 256  # the released code's A = 1 / max_length (THUMT default max_length 256)
SLOPE_INIT = (1.0, 15.0)  # bucket_slop_min / bucket_slop_max of the translation scripts
INIT_STD, INIT_BIAS = 0.1, 0.1  # create_initializer(0.1), constant_initializer(0.1)


def t5_bucket(distance: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each distance d = query - key position (Raffel et al. 2020, the
    ``_relative_position_bucket`` of the reference implementation). Bidirectional, half the buckets
    serve keys after the query; of a direction's B', |d| < B'/2 get their own, larger |d| log-spaced ones."""
    bucket = torch.zeros_like(distance)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (distance < 0).long() * num_buckets  # keys after the query
        magnitude = distance.abs()
    else:
        magnitude = distance.clamp(min=0)
    max_exact = num_buckets // 2
    ratio = torch.log(magnitude.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(magnitude < max_exact, magnitude, large)


class DistanceBias(Protocol):
    """What a side's table of scalar biases (T5, cumulative, AT5) answers ``posmix-plot``."""
    bidirectional: bool

    def figure_table(self, positions: int) -> Tuple[Tensor, int, str]:
        """(2c + 1, H) biases of the distances -c..c, c (at least ``positions`` where the table extends that
        far), and the variant's name."""


class ScalarRelativeBias(nn.Module):
    """Per-head scalar bias of each clipped distance -max_distance..max_distance: T5's table, or (``cumulative``,
    the legacy reading) T5's table with learned cumulative bucket boundaries."""

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int, bidirectional: bool,
                 cumulative: bool, embed_dim: int):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional, self.cumulative = bidirectional, cumulative
        self.bias = nn.Parameter(torch.randn(num_buckets, num_heads) * embed_dim ** -0.5)  # T5's init
        self.register_buffer("t5_buckets", t5_bucket(torch.arange(-max_distance, max_distance + 1),
                                                     bidirectional, num_buckets, max_distance), persistent=False)
        if cumulative:
            per_direction = t5_bucket(torch.arange(max_distance + 1), False, self.direction_buckets, max_distance)
            increments = (per_direction[1:] - per_direction[:-1]).float()
            self.increments = nn.Parameter(increments.unsqueeze(0).repeat(2 if bidirectional else 1, 1))

    @property
    def direction_buckets(self) -> int:
        return self.num_buckets // 2 if self.bidirectional else self.num_buckets

    def bucket_coordinates(self) -> Tensor:
        """Cumulative: (directions, max_distance + 1) monotone coordinates u(a), a = 0..max_distance."""
        steps = self.increments.clamp(min=0)
        u = torch.cat([steps.new_zeros(steps.size(0), 1), torch.cumsum(steps, dim=1)], dim=1)
        return u.clamp(max=self.direction_buckets - 1)

    def table(self) -> Tensor:
        """(2 max_distance + 1, H): the bias of each distance d = -max_distance..max_distance."""
        if not self.cumulative:
            return self.bias[self.t5_buckets]
        m, half = self.max_distance, self.direction_buckets
        u = self.bucket_coordinates()
        lower = u.detach().floor()
        frac = (u - lower).unsqueeze(-1)
        lower = lower.long()
        upper = (lower + 1).clamp(max=half - 1)
        tables = [self.bias[i * half: (i + 1) * half] for i in range(u.size(0))]  # keys at/before the query, after
        per_direction = [(1 - f) * table[low] + f * table[up] for table, f, low, up in zip(tables, frac, lower, upper)]
        forward = per_direction[0]  # a = 0..m, for d = a
        if self.bidirectional:
            backward = per_direction[1][1:].flip(0)  # d = -m..-1
        else:  # a decoder never sees keys after the query (masked): T5's bucket 0
            backward = self.bias[:1].expand(m, -1)
        return torch.cat([backward, forward], dim=0)

    def figure_table(self, positions: int) -> Tuple[Tensor, int, str]:
        return self.table(), self.max_distance, "AT5 (cumulative)" if self.cumulative else "T5"

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, T, S) biases of every (query, key) pair."""
        d = relative_distance(query_positions, key_positions).clamp(-self.max_distance, self.max_distance)
        return self.table()[d + self.max_distance].permute(0, 3, 1, 2)


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

    def table(self, longest: int) -> Tensor:
        """(2 longest + 1, H): the bias of d = n - m for d = -longest..longest."""
        a = torch.arange(longest + 1, device=self.slopes.device)
        slope = torch.relu(self.slopes) * SLOPE_SCALE
        f = 1.0 - torch.exp(-slope.unsqueeze(-1) * a.to(slope.dtype))  # (dirs, H, A) soft buckets of a = 0..longest
        h1 = self.dropout(torch.relu(f.unsqueeze(-1) * self.w1.unsqueeze(2) + self.b1.unsqueeze(2)))  # (dirs, H, A, l1)
        h2 = torch.relu(torch.einsum("dhal,dhlm->dham", h1, self.w2) + self.b2.unsqueeze(2))  # (dirs, H, A, l2)
        per_direction = (h2 * self.w3.unsqueeze(2)).sum(-1) + self.b3.unsqueeze(-1)  # (dirs, H, A)
        before = per_direction[0].t()  # d = 0..longest (keys at or before the query)
        after = per_direction[1, :, 1:].t().flip(0) if self.bidirectional else before.new_zeros(longest, before.size(1))
        return torch.cat([after, before], dim=0)  # d = -longest..-1, then 0..longest

    def figure_table(self, positions: int) -> Tuple[Tensor, int, str]:
        return self.table(positions), positions, "AT5"

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, T, S) biases of every (query, key) pair (later keys are 0 in the decoder: masked)."""
        d = relative_distance(query_positions, key_positions)
        longest = int(d.abs().max()) if d.numel() else 0
        return self.table(longest)[d + longest].permute(0, 3, 1, 2)


class T5BiasEnergy(BiasedContentEnergy):
    def __init__(self, spec: MixerSpec, resources: SideResources):
        super().__init__(spec)
        prefix, opts = spec.placement.flag_prefix, spec.options
        num_buckets, max_distance = int(opts["t5-buckets"]), int(opts["t5-max-distance"])
        bidirectional = spec.placement == ENCODER_SELF
        direction_buckets = num_buckets // 2 if bidirectional else num_buckets
        if direction_buckets < 2:
            raise ValueError(f"{prefix}-t5-buckets must be >= {4 if bidirectional else 2} (got {num_buckets})")
        if max_distance <= direction_buckets // 2:
            raise ValueError(f"{prefix}-t5-max-distance must be > {direction_buckets // 2} (half the buckets of "
                             f"a direction; got {max_distance})")
        adaptive = opts["t5-adaptive"]  # on, off (its choices) or the legacy reading cumulative
        if adaptive == "on":  # Wu et al. (2021): soft buckets and a per-head MLP
            try:
                widths = [int(v) for v in str(opts["at5-hidden"]).split(",")]
            except ValueError:
                widths = []
            if len(widths) != 2 or min(widths) < 1:
                raise ValueError(f"{prefix}-at5-hidden: give the two hidden widths l1,l2 of the AT5 MLP as positive "
                                 f"integers, e.g. 32,4 (got {opts['at5-hidden']!r})")
            name, make = "at5soft", lambda: SoftBucketBias(spec.num_heads, bidirectional, widths,
                                                           spec.attention_dropout)
        else:
            cumulative = adaptive == CUMULATIVE
            name = "t5cumulative" if cumulative else "t5"
            make = lambda: ScalarRelativeBias(spec.num_heads, num_buckets, max_distance, bidirectional,  # noqa: E731
                                              cumulative, spec.embed_dim)
        # one table per encoder/decoder (T5 shares it across layers)
        bias = resources.shared_tables.shared(f"t5bias_{spec.placement.name}_{name}", make)
        refer_to_shared(self, "relative_bias", bias)

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The scalar bias per head of every distance n - m within +-``positions`` (one table per side)."""
        bias: DistanceBias = self.relative_bias
        table, centre, name = bias.figure_table(positions)  # T5's: -M..M, cut here at +-P
        span = min(positions, centre)
        return PositionFigure("t5", {"name": name, "bidirectional": bool(bias.bidirectional),
                                     "distances": list(range(-span, span + 1)),
                                     "bias": table[centre - span: centre + span + 1].t().float()}, shared=bias)

    def position_bias(self, query_positions, key_positions):
        return self.relative_bias(query_positions, key_positions)


@register_mixer("t5bias", placements=SELF_ATTENTION_PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="T5 scalar relative position bias (Raffel et al. 2020); AT5 (Wu et al. 2021) with "
                            "--<sublayer>-t5-adaptive on",
                equation="(W^Q y_n)(W^K x_m)^T + b_h[bucket(n − m)]; AT5: + MLP_h(1 − exp(−α_h |n − m|))",
                parameters="4(D²+D), + B·H per encoder/decoder (T5); AT5: directions·H·(2l₁ + l₁l₂ + 2l₂ + 2) per "
                           "encoder/decoder",
                options={
                    "t5-buckets": dict(type=Number(int, 2), default=32, metavar="B", help="T5 relative buckets (default 32)"),
                    "t5-max-distance": dict(type=Number(int, 2), default=128, metavar="M",
                                            help="distance from which all share the last bucket (default 128)"),
                    "t5-adaptive": dict(choices=ADAPTIVE, default="off",
                                        help="on: AT5, Wu et al. (2021)'s soft buckets and MLP; off: T5 (default)"),
                    "at5-hidden": dict(type=str, default="32,4", metavar="L1,L2",
                                       help="AT5 (--<sublayer>-t5-adaptive on): hidden widths of the MLP (default 32,4)"),
                })
def build_t5bias(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, T5BiasEnergy(spec, resources))
