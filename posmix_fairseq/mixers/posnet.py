"""``posnet``: PosNet-Attn, positional kernels on the attention values (PosNet Eqs. 20 and 23):

    head_h(n)      = sum_m softmax_m(q^h_n k^h_m^T / sqrt(d_k)) PosNet(v^h_m; Phi)     (Eq. 20)
    PosNet(v; Phi) = Dropout(act(v^h_m Phi[p_m])) + v^h_m                              (Eq. 23)

Phi in R^{P x d_k x d_k} (PosNet Section 3.3, "Attention-Level"): one kernel per key position p_m
(the TRUE position), the same for every head, shared by the layers of a sublayer kind by default.
act is ReLU, as PosNet-Embed's ("attention-level PosNet is identical to embedding-level PosNet,
excluding W_1 and W_2", PosNet Figure 5); checkpoints stored with defaults version < 12 keep GeLU.
The dropout (Section 3.3, "Residual Connection and Dropout") has its own rate ("independent from
that of Transformer"; default --dropout). Checkpoints stored without the defaults version read
per-head kernels Phi[p_m, h] (the stored legacy reading ``posnet-kernel head``). The model's max
positions may not exceed P. With P = 128 the encoder's and decoder's kernels add 1.05M (PosNet Table 1: +1.03M).
"""
import torch
from fairseq import utils
from torch import nn

from ..core.number_ranges import DROPOUT, POSITIVE_INT
from ..core.placement import PLACEMENTS
from ..core.position_tables import PositionFigure, apply_position_kernels, position_kernels, refer_to_shared
from .engine import ContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, Values, register_mixer

DEFAULT_MAX_POSITIONS = 128  # P (see the module docstring and PosNet Table 1)
PER_HEAD_KERNELS = "head"  # the stored legacy reading "posnet-kernel" of checkpoints made before the marker


class PositionKernels(nn.Module):
    def __init__(self, positions: int, groups: int, dim: int):
        super().__init__()
        self.weight = position_kernels(positions, groups, dim)


class PositionKernelValues(Values):
    """PosNet(v; Phi) = act(v^h_m Phi[p_m, h]) + v^h_m (Eq. 23) on the projected values."""

    def __init__(self, projection, embed_dim, num_heads, gated, kernels: PositionKernels, shared: bool,
                 activation: str, max_positions_option: str, key_role: str, dropout: float = 0.0):
        super().__init__(projection, embed_dim, num_heads, gated)
        if shared:
            refer_to_shared(self, "kernels", kernels)
        else:
            self.kernels = kernels
        self.activation_fn = utils.get_activation_fn(activation)
        self.max_positions_option, self.key_role = max_positions_option, key_role
        self.dropout = nn.Dropout(dropout)

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The Frobenius norm of the kernel Phi[p] of each position p (G groups by P positions)."""
        weight = self.kernels.weight
        norms = torch.linalg.matrix_norm(weight[:positions].float(), dim=(-2, -1)).t()
        return PositionFigure("posnet_attn", {"norms": norms}, shared=weight)

    def position_limits(self):
        """The kernels are indexed by the key (value) positions (the position-limit protocol)."""
        return [(self.key_role, int(self.kernels.weight.size(0)), self.max_positions_option)]

    def forward(self, value, key_positions, key_padding_mask):
        v = super().forward(value, key_positions, key_padding_mask).transpose(1, 2)  # (B, S, H, Dh)
        weight = self.kernels.weight
        if weight.size(1) == 1 and v.size(2) > 1:  # Phi shared by the heads: the heads as extra rows
            b, s, h, dh = v.shape
            rows = v.transpose(1, 2).reshape(b * h, s, 1, dh)
            mask = key_padding_mask.repeat_interleave(h, 0) if key_padding_mask is not None else None
            kernelled = apply_position_kernels(rows, key_positions.repeat_interleave(h, 0), mask, weight,
                                               self.max_positions_option).view(b, h, s, dh).transpose(1, 2)
        else:
            kernelled = apply_position_kernels(v, key_positions, key_padding_mask, weight, self.max_positions_option)
        return (self.dropout(self.activation_fn(kernelled)) + v).transpose(1, 2)


@register_mixer(
    "posnet", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
    description="PosNet-Attn (PosNet Eqs. 20, 23): content attention over values with per-position kernels",
    equation="(W^Q y_n)(W^K x_m)^T; values PosNet(v_m) = Dropout(act(v^h_m Φ[p_m])) + v^h_m (PosNet Eqs. 20, 23)",
    parameters="4(D²+D), + P·d_k² per kernel tensor (P·H·D_h² with the per-head kernels of old checkpoints)",
    options={
        "posnet-max-positions": dict(type=POSITIVE_INT, default=DEFAULT_MAX_POSITIONS, metavar="P",
                                     help=f"positions covered by the PosNet kernel table (default "
                                          f"{DEFAULT_MAX_POSITIONS}); the model's max positions may not exceed it"),
        "posnet-dropout": dict(type=DROPOUT, default=None, metavar="P",
                               help="dropout on the PosNet output before its residual (default --dropout)"),
        "posnet-activation": dict(choices=utils.get_available_activation_fns(), default="relu",
                                  help="act of PosNet-Attn (Eq. 23; default relu, as PosNet-Embed's)"),
        "posnet-share-kernels": dict(choices=("on", "off"), default="on",
                                     help="one kernel tensor for the layers of this sublayer kind (default on)"),
    })
def build_posnet(spec: MixerSpec, resources: SideResources):
    opts = spec.options
    max_positions, option = spec.position_table_size("posnet-max-positions", "PosNet-Attn kernel table")
    energy = ContentEnergy(spec)  # built before the kernels: the parameters' initialisation order
    shared = opts["posnet-share-kernels"] == "on"
    groups = spec.num_heads if opts.get("posnet-kernel") == PER_HEAD_KERNELS else 1
    dropout = spec.dropout if opts["posnet-dropout"] is None else float(opts["posnet-dropout"])
    make = lambda: PositionKernels(max_positions, groups, spec.embed_dim // spec.num_heads)  # noqa: E731
    kernels = resources.shared_tables.shared(f"posnet_{spec.placement.name}", make) if shared else make()
    if kernels.weight.shape[1:3] != (groups, spec.embed_dim // spec.num_heads):  # a layer of other heads
        raise ValueError(f"{spec.flag('posnet-share-kernels')} on: one kernel table cannot serve layers with different "
                         f"heads (--decoder-cross-heads); pass {spec.flag('posnet-share-kernels')} off")
    values = PositionKernelValues.of_spec(spec, kernels=kernels, shared=shared,
                                          activation=opts["posnet-activation"], max_positions_option=option,
                                          key_role=spec.placement.key_side.role, dropout=dropout)
    return EnergyMixingAttention(spec, resources, energy, values)
