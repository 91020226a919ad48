"""``posnet``: PosNet-Attn, positional kernels on the attention values (PosNet, Eqs. 20 and 23).

    head_h(n)     = sum_m softmax_m(q^h_n k^h_m^T / sqrt(d_k)) PosNet(v^h_m; Phi)     (Eq. 20)
    PosNet(v; Phi) = act(v^h_m Phi[p_m, h]) + v^h_m                                    (Eq. 23)

with q, k, v the usual projections and Phi a (D_h x D_h) kernel per key position p_m and head h.
p_m is the key's TRUE position (padding excluded; fairseq left-pads sources). By default one
kernel tensor (P x H x D_h x D_h) is shared by the layers of each sublayer kind
(``--S-posnet-share-kernels``); the encoder and the decoder never share one. The table covers
positions below ``--S-posnet-max-positions`` (default 256); a longer sentence raises a clear error.

Parameters: 4(D^2 + D) per layer, plus P * H * D_h^2 = P * D * D_h per kernel tensor.
"""
from fairseq import utils
from torch import nn

from ..core.position_tables import apply_position_kernels, position_kernels
from .base import MixerSpec, register_mixer
from .mha import ContentEnergy
from .mixing import EnergyMixingAttention
from .values import Values

ON_OFF = ("on", "off")


class PositionKernels(nn.Module):
    def __init__(self, positions: int, groups: int, dim: int):
        super().__init__()
        self.weight = position_kernels(positions, groups, dim)


class PositionKernelValues(Values):
    """PosNet(v; Phi) = act(v^h_m Phi[p_m, h]) + v^h_m (Eq. 23) on the projected values."""

    def __init__(self, projection, embed_dim, num_heads, gated, kernels: PositionKernels, shared: bool,
                 activation: str, max_positions_option: str):
        super().__init__(projection, embed_dim, num_heads, gated)
        if shared:  # plain attribute: the encoder/decoder registers the shared tensor once
            self.__dict__["_shared_kernels"] = kernels
        else:
            self.kernels = kernels
        self.activation_fn = utils.get_activation_fn(activation)
        self.max_positions_option = max_positions_option

    @property
    def kernel_weight(self):
        shared = self.__dict__.get("_shared_kernels")
        return (shared if shared is not None else self.kernels).weight

    def forward(self, value, key_positions, key_padding_mask):
        v = super().forward(value, key_positions, key_padding_mask).transpose(1, 2)  # (B, S, H, Dh)
        kernelled = apply_position_kernels(v, key_positions, key_padding_mask, self.kernel_weight,
                                           self.max_positions_option)
        return (self.activation_fn(kernelled) + v).transpose(1, 2)


@register_mixer("posnet", gated_by_default=False, uses_positions=True,
                description="PosNet-Attn (PosNet Eqs. 20, 23): content attention over values with per-position kernels",
                options={
                    "posnet-max-positions": dict(type=int, default=256, metavar="P",
                                                 help="positions covered by the PosNet kernel table (default 256)"),
                    "posnet-activation": dict(choices=utils.get_available_activation_fns(), default="gelu",
                                              help="act of PosNet (Eqs. 23-24; default gelu)"),
                    "posnet-share-kernels": dict(choices=ON_OFF, default="on",
                                                 help="one PosNet-Attn kernel tensor for all layers of this "
                                                      "sublayer kind (default on) or one per layer"),
                })
def build_posnet(spec: MixerSpec):
    opts = spec.options
    option = spec.flag("posnet-max-positions")
    max_positions = int(opts["posnet-max-positions"])
    if max_positions < 1:
        raise ValueError(f"{option} must be >= 1 (got {max_positions})")
    energy = ContentEnergy(spec)
    head_dim = spec.embed_dim // spec.num_heads
    shared = opts["posnet-share-kernels"] == "on"
    make = lambda: PositionKernels(max_positions, spec.num_heads, head_dim)  # noqa: E731
    kernels = spec.shared_tables.shared(f"posnet_{spec.placement.name}", make) if shared else make()
    values = PositionKernelValues.of_spec(spec, kernels=kernels, shared=shared,
                                          activation=opts["posnet-activation"], max_positions_option=option)
    return EnergyMixingAttention(spec, energy, values)
