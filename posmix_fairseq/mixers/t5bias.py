"""``t5bias``: T5's scalar relative position bias (Raffel et al. 2020) and AT5, its learnable
bucketisation (Wu et al. 2021; the baselines of PosNet Table 1):

    e^h_nm = (W^Q y_n)^h (W^K x_m)^h^T / sqrt(D_h) + b^h[bucket(n - m)]

T5's buckets of d = n - m: in the encoder half of the B buckets serve keys after the query; within
a direction, |d| < B'/2 gets its own bucket (B' the buckets of that direction) and larger distances
share log-spaced buckets up to ``max_distance``, beyond which the bucket is constant, so distances
are clipped there exactly (any length extrapolates). One table b (B x H) is shared by the layers of
a side, as in T5; unlike T5 (which folds 1/sqrt(D_h) into its initialisation) the content term
keeps fairseq's scaling. AT5 (``--S-t5-adaptive on``) is in :mod:`.t5bias_soft_buckets`.

The cumulative variant (the stored legacy reading ``t5-adaptive cumulative`` of old checkpoints; no
command line asks for it) keeps T5's table and learns its bucket boundaries: per direction, the
coordinate of a = |d| is u(a) = min(sum_{k=1..a} max(s_k, 0), B' - 1), s_k initialised to T5's
bucket(k) - bucket(k-1), and the bias is the table linearly interpolated at u (docs/choices.md).
Parameters: B * H per side (+ max_distance per direction, cumulative) on top of 4(D^2 + D) per layer.
"""
import math

import torch
from torch import Tensor, nn

from ..core.placement import ENCODER_SELF
from ..core.position_figures import PositionFigure
from ..core.position_tables import refer_to_shared
from ..core.positions import relative_distance
from .engine import ContentEnergy, EnergyMixingAttention, MixerSpec, register_mixer
from .t5bias_soft_buckets import SoftBucketBias, parse_widths

ADAPTIVE = ("off", "on")
CUMULATIVE = "cumulative"  # the stored legacy reading "t5-adaptive" of checkpoints made before the marker


def t5_bucket(distance: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each distance d = query - key position (Raffel et al. 2020, the
    ``_relative_position_bucket`` of the reference implementation)."""
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


class ScalarRelativeBias(nn.Module):
    """Per-head scalar bias of each clipped distance -max_distance..max_distance, T5 or AT5."""

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int, bidirectional: bool,
                 adaptive: bool, embed_dim: int):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional, self.adaptive = bidirectional, adaptive
        self.bias = nn.Parameter(torch.randn(num_buckets, num_heads) * embed_dim ** -0.5)  # T5's init
        self.register_buffer("t5_buckets", t5_bucket(torch.arange(-max_distance, max_distance + 1),
                                                     bidirectional, num_buckets, max_distance), persistent=False)
        if adaptive:
            per_direction = t5_bucket(torch.arange(max_distance + 1), False, self.direction_buckets, max_distance)
            increments = (per_direction[1:] - per_direction[:-1]).float()
            directions = 2 if bidirectional else 1
            self.increments = nn.Parameter(increments.unsqueeze(0).repeat(directions, 1))

    @property
    def direction_buckets(self) -> int:
        return self.num_buckets // 2 if self.bidirectional else self.num_buckets

    def bucket_coordinates(self) -> Tensor:
        """AT5: (directions, max_distance + 1) monotone coordinates u(a), a = 0..max_distance."""
        steps = self.increments.clamp(min=0)
        u = torch.cat([steps.new_zeros(steps.size(0), 1), torch.cumsum(steps, dim=1)], dim=1)
        return u.clamp(max=self.direction_buckets - 1)

    def table(self) -> Tensor:
        """(2 max_distance + 1, H): the bias of each distance d = -max_distance..max_distance."""
        if not self.adaptive:
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

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, T, S) biases of every (query, key) pair."""
        d = relative_distance(query_positions, key_positions, 1.0).clamp(-self.max_distance, self.max_distance)
        return self.table()[d + self.max_distance].permute(0, 3, 1, 2)


class T5BiasEnergy(ContentEnergy):
    def __init__(self, spec: MixerSpec):
        super().__init__(spec)
        if spec.placement.cross:
            raise ValueError("--decoder-cross-mixer t5bias: T5's scalar relative bias is defined for "
                             "self-attention only; use it for --encoder-self-mixer/--decoder-self-mixer")
        prefix, opts = spec.placement.flag_prefix, spec.options
        num_buckets, max_distance = int(opts["t5-buckets"]), int(opts["t5-max-distance"])
        bidirectional = spec.placement == ENCODER_SELF
        direction_buckets = num_buckets // 2 if bidirectional else num_buckets
        if direction_buckets < 2:
            raise ValueError(f"{prefix}-t5-buckets must be >= {4 if bidirectional else 2} (got {num_buckets})")
        if max_distance <= direction_buckets // 2:
            raise ValueError(f"{prefix}-t5-max-distance must be > {direction_buckets // 2} (half the buckets of "
                             f"a direction; got {max_distance})")
        adaptive = opts["t5-adaptive"]
        if adaptive not in ADAPTIVE + (CUMULATIVE,):
            raise ValueError(f"{prefix}-t5-adaptive: {adaptive!r} is not one of {', '.join(ADAPTIVE)}")
        if adaptive == "on":  # Wu et al. (2021): soft buckets and a per-head MLP
            widths = parse_widths(opts["at5-hidden"], f"{prefix}-at5-hidden")
            name, make = "at5soft", lambda: SoftBucketBias(spec.num_heads, bidirectional, widths,
                                                           spec.attention_dropout)
        else:
            cumulative = adaptive == CUMULATIVE
            name = "t5cumulative" if cumulative else "t5"
            make = lambda: ScalarRelativeBias(spec.num_heads, num_buckets, max_distance, bidirectional,  # noqa: E731
                                              cumulative, spec.embed_dim)
        # one table per encoder/decoder (T5 shares it across layers)
        refer_to_shared(self, "_relative_bias", spec.shared_tables.shared(f"t5bias_{spec.placement.name}_{name}", make))

    @property
    def relative_bias(self):
        return self._relative_bias

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The scalar bias per head of every distance n - m within +-``positions`` (one table per side)."""
        bias = self.relative_bias
        if hasattr(bias, "max_distance"):  # T5 (or the cumulative AT5): the table of -M..M, cut at +-P
            table, centre, name = bias.table(), bias.max_distance, "AT5 (cumulative)" if bias.adaptive else "T5"
        else:  # AT5, Wu et al. (2021)
            table, centre, name = bias.table(positions), positions, "AT5"
        span = min(positions, centre)
        return PositionFigure("t5", {"name": name, "bidirectional": bool(bias.bidirectional),
                                     "distances": list(range(-span, span + 1)),
                                     "bias": table[centre - span: centre + span + 1].t().float()}, shared=bias)

    def logits(self, query, query_positions, keys, key_positions):
        content = super().logits(query, query_positions, keys, key_positions)
        return content + self.relative_bias(query_positions, key_positions).to(content.dtype)


@register_mixer("t5bias", gated_by_default=False, uses_positions=True,
                description="T5 scalar relative position bias (Raffel et al. 2020); AT5 (Wu et al. 2021) with "
                            "--S-t5-adaptive on",
                options={
                    "t5-buckets": dict(type=int, default=32, metavar="B", help="T5 relative buckets (default 32)"),
                    "t5-max-distance": dict(type=int, default=128, metavar="M",
                                            help="distance from which all share the last bucket (default 128)"),
                    "t5-adaptive": dict(choices=ADAPTIVE, default="off",
                                        help="on: AT5, Wu et al. (2021)'s soft buckets and MLP; off: T5 (default)"),
                    "at5-hidden": dict(type=str, default="32,4", metavar="L1,L2",
                                       help="AT5 (--S-t5-adaptive on): hidden widths of the MLP (default 32,4)"),
                })
def build_t5bias(spec: MixerSpec):
    return EnergyMixingAttention(spec, T5BiasEnergy(spec))
