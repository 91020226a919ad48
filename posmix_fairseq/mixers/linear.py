"""``linear``: LinearNet, GPA Eq. 13; gLinearNet = LinearNet + Eq. 4.

    c_n^h = sum_m W^h[n, m] v_m^h,   v_m = W^V x_m,   out_n = W^O c_n

a learnable matrix per head over true (query, key) positions, used as is (no softmax; the future
mask makes it causal in decoder self-attention). It covers positions below
``--<sublayer>-linear-max-positions`` P, 128 by default: GPA Table 2's totals imply H N^2 with N = 128
(docs/choices.md). The model's max positions may not exceed P. Parameters: 2(D^2 + D) + H P^2.
"""
import torch
from torch import nn

from ..core.number_ranges import POSITIVE_INT
from ..core.placement import PLACEMENTS
from ..core.position_tables import PositionFigure
from .engine import DirectWeights, EnergyMixingAttention, MixerSpec, SideResources, register_mixer

DEFAULT_MAX_POSITIONS = 128  # N of GPA Table 2 (see the module docstring)


class LinearSpatialWeights(DirectWeights):
    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.max_positions, self.option = spec.position_table_size("linear-max-positions", "LinearNet mixing matrix")
        self.roles = sorted({side.role for side in spec.placement.sides})
        self.weight = nn.Parameter(torch.empty(spec.num_heads, self.max_positions, self.max_positions))

    def reset_parameters(self):
        nn.init.normal_(self.weight, std=0.02)

    def position_limits(self):
        """The matrix is indexed by query and key positions (the position-limit protocol)."""
        return [(role, self.max_positions, self.option) for role in self.roles]

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The mixing matrices W^h[n, m] of Eq. 13 for the first ``positions`` positions."""
        return PositionFigure("linear", {}, {"weights": self.weight[:, :positions, :positions].float()})

    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        longest = max(int(query_positions.max()), int(key_positions.max())) if query_positions.numel() else 0
        if longest >= self.max_positions:
            raise ValueError(f"position {longest} is beyond the LinearNet mixing matrix of {self.max_positions} "
                             f"positions; raise {self.option}")
        # W^h[n, m] for every (query n, key m) of each sentence, indexed in one step: (H, B, T, S)
        weights = self.weight[:, query_positions.unsqueeze(2), key_positions.unsqueeze(1)]
        return weights.transpose(0, 1).to(query.dtype)


@register_mixer("linear", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="LinearNet (GPA Eq. 13): a learned spatial mixing matrix per head (gLinearNet: + gating)",
                equation="learned a_h(n,m) = W^h[n,m], no softmax (GPA Eq. 13)", parameters="2(D²+D) + H·P²",
                options={"linear-max-positions": dict(type=POSITIVE_INT, default=DEFAULT_MAX_POSITIONS, metavar="P",
                                                      help="positions covered by the LinearNet matrix (default "
                                                           f"{DEFAULT_MAX_POSITIONS}, GPA Table 2's N); the "
                                                           "model's max source/target positions may not exceed it")})
def build_linear(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, LinearSpatialWeights(spec))
