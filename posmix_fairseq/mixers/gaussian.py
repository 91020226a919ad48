"""``gaussian``: hard-coded Gaussian attention (HC). Each head h puts a FIXED Gaussian over key
positions, centred at an offset from the query:

    a_h(i, j) = N(j; f_h(i), sigma^2) = exp(-(j - f_h(i))^2 / (2 sigma^2)) / (sigma sqrt(2 pi))
    f_h(i)    = floor(gamma * i + o_h)      (gamma = 1 in self-attention: f_h(i) = i + o_h)

No query/key projections; W^V is kept (``--<sublayer>-gaussian-value-projection off`` drops it, HC footnote 6)
and W^O mixes the heads. The weights are cut at the sentence borders (and, in the decoder, at the
current position) and NOT renormalised (HC footnote 5): the head centred on its query gives
[0.054, 0.24, 0.40, 0.24, 0.054] on its 5-token neighbourhood (HC footnote 1). The default offsets
are HC's best HC-SA (Appendix Table 6) and HC-ALL's cross heads; head h takes offsets[h % len].
``--<sublayer>-gaussian-impl``: ``full`` (the reference), ``window`` (GPA Table 8's K_hat N D: the 2K + 1 keys
around each centre, docs/choices.md), ``conv`` (HC Section 6.3: window 3), ``index`` (copy the centre
value); all from the true positions and the per-call gamma, with no weight cache.
"""
import math
from typing import List

import torch
from torch import Tensor, nn

from ..core.number_ranges import POSITIVE_FLOAT
from ..core.placement import PLACEMENTS
from ..core.position_tables import PositionFigure
from .engine import (CentredEnergy, DirectWeights, EnergyMixingAttention, MixerSpec, SideResources, Values,
                     max_relative_position, max_relative_position_option, register_mixer)
from .paths.gaussian_window import GaussianWindowMixing

DEFAULT_OFFSETS = {"encoder_self": "-1,1", "decoder_self": "-1,0", "decoder_cross": "-1,0,1"}
IMPLEMENTATIONS = ("full", "window", "conv", "index")


def parse_offsets(text: str, num_layers: int, num_heads: int, option: str) -> List[List[float]]:
    """'-1,1' or '-1,1;0,1;...' (one group per layer) -> per layer, per head offsets."""
    groups = str(text).split(";")
    if len(groups) not in (1, num_layers):
        raise ValueError(f"{option}: give one offset list for all layers or one per layer "
                         f"({num_layers} groups separated by ';'); got {len(groups)} groups in {text!r}")
    per_layer = []
    for group in groups:
        try:
            values = [float(v) for v in group.split(",") if v.strip() != ""]
        except ValueError:
            raise ValueError(f"{option}: {group!r} is not a comma list of numbers") from None
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{option}: {group!r}: the offsets must be finite numbers")
        if not values or len(values) > num_heads:
            raise ValueError(f"{option}: each layer needs 1 to {num_heads} (the number of heads) offsets; "
                             f"got {group!r}")
        per_layer.append([values[h % len(values)] for h in range(num_heads)])
    return per_layer * num_layers if len(per_layer) == 1 else per_layer


class GaussianWeights(DirectWeights, CentredEnergy):
    """Fixed per-head weights N(j; floor(gamma i + o_h), sigma^2), cut, not renormalised."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        opts = spec.options
        offsets = parse_offsets(opts["gaussian-offsets"] or DEFAULT_OFFSETS[spec.placement.name],
                                spec.num_layers, spec.num_heads, spec.flag("gaussian-offsets"))[spec.layer_idx]
        self.register_buffer("offsets", torch.tensor(offsets, dtype=torch.float64), persistent=False)
        self.sigma, self.impl = float(opts["gaussian-sigma"]), opts["gaussian-impl"]  # checked by their declarations
        self.length_ratio = spec.length_ratio
        # K: the half-width of the window form, which mixes the 2K + 1 keys around each centre
        self.half_width = max_relative_position(spec) if self.impl == "window" else None

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The heads' weights for a sentence of ``positions`` tokens."""
        return PositionFigure("gaussian", {"gamma": self.length_ratio, "sigma": self.sigma, "impl": self.impl},
                              {"offsets": self.offsets, "weights": weights()})

    def window_centres(self, query_positions: Tensor) -> Tensor:
        """(B, H, T) integer centres floor(gamma * i + o_h)."""
        return torch.floor(query_positions.double().unsqueeze(1) * self.length_ratio + self.offsets.view(1, -1, 1))

    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        distance = key_positions.double().view(key_positions.size(0), 1, 1, -1) - self.window_centres(
            query_positions).unsqueeze(-1)  # (B, H, T, S)
        if self.impl == "index":
            return (distance == 0).to(query.dtype)
        weights = torch.exp(-0.5 * (distance / self.sigma) ** 2) / (self.sigma * math.sqrt(2 * math.pi))
        if self.impl in ("conv", "window"):
            weights = weights.masked_fill(distance.abs() > (1 if self.impl == "conv" else self.half_width), 0.0)
        return weights.to(query.dtype)


@register_mixer(
    "gaussian", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
    description="hard-coded Gaussian heads (You et al. 2020): fixed N(floor(gamma i + o_h), sigma^2) weights",
    equation="fixed a_h(i,j) = N(j; floor(γi + o_h), σ²), cut at the borders, not renormalised (no softmax)",
    parameters="2(D²+D); D²+D without W^V",
    read_when={"max-relative-position": ("gaussian-impl", "window")},  # K cuts the window form only
    options={
        "gaussian-offsets": dict(type=str, default=None, metavar="OFFSETS",
                                 help="per-head centre offsets: '-1,1' for all layers or '-1,1;0,1;...' per layer "
                                      "(default: encoder -1,1; decoder -1,0; cross -1,0,1)"),
        "gaussian-sigma": dict(type=POSITIVE_FLOAT, default=1.0, help="standard deviation of the hard-coded heads (default 1)"),
        "gaussian-impl": dict(choices=IMPLEMENTATIONS, default="full",
                              help="full: whole sentence (default); window: the 2K+1 keys around each centre (K = "
                                   "--<sublayer>-max-relative-position; GPA Table 8); conv: window 3; index: the centre value"),
        **max_relative_position_option(),
        "gaussian-value-projection": dict(choices=("on", "off"), default="on",
                                 help="keep W^V (on) or use the inputs as values (off, footnote 6)"),
    })
def build_gaussian(spec: MixerSpec, resources: SideResources):
    weights = GaussianWeights(spec)
    paths = [GaussianWindowMixing(weights.half_width, weights.sigma)] if weights.impl == "window" else []
    if spec.options["gaussian-value-projection"] == "on":
        return EnergyMixingAttention(spec, resources, weights, paths=paths)
    if spec.kdim != spec.embed_dim:
        raise ValueError(f"{spec.flag('gaussian-value-projection')} off needs equal key and model dims "
                         f"({spec.kdim} != {spec.embed_dim})")
    return EnergyMixingAttention(spec, resources, weights, Values.of_spec(spec, projection=nn.Identity()), paths=paths)
