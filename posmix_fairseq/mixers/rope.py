"""``rope``: rotary position embedding (RoPE; Su, Lu, Pan, Murtadha, Wen & Liu, "RoFormer: Enhanced Transformer
with Rotary Position Embedding", 2021, https://arxiv.org/abs/2104.09864, Section 3.2, Eqs. 14-16 and 34):

    e^h_nm = (R_n (W^Q y_n)^h)(R_m (W^K x_m)^h)^T / sqrt(D_h) = (W^Q y_n)^h R_{m-n} (W^K x_m)^h^T / sqrt(D_h)

R_p rotates each pair of dimensions (2i, 2i+1) of a head by the angle p θ_i, θ_i = base^(-2i / D_h),
i = 0..D_h/2 - 1 (Eq. 34; base = ``--<sublayer>-rope-base``, 10000 in the paper), p the TRUE position of the
token; the energy depends on the distance m - n only. The keys are rotated by their own positions when they
enter the incremental cache (``key_features``), so a decoding step rotates only its queries and equals the full
forward. No position embeddings, no parameters beyond W^Q, W^K, W^V, W^O; D_h must be even. Query and source
positions are not comparable, so RoPE is defined for self-attention only. Choices: docs/choices.md, "ALiBi and
RoPE".
"""
import torch
from torch import Tensor

from ..core.number_ranges import Number
from ..core.placement import SELF_ATTENTION_PLACEMENTS
from .engine import ContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, register_mixer


def rotate(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """R_p x (RoFormer Eq. 34) of x (B, H, L, D_h) at positions (B, L): the pair (x_2i, x_2i+1) becomes
    (x_2i cos p θ_i - x_2i+1 sin p θ_i, x_2i sin p θ_i + x_2i+1 cos p θ_i), computed in float32."""
    theta = base ** (-torch.arange(0, x.size(-1), 2, device=x.device, dtype=torch.float64) / x.size(-1))
    angle = (positions.double().unsqueeze(-1) * theta).float().unsqueeze(1)  # (B, 1, L, D_h/2)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2).to(x.dtype)


class RotaryEnergy(ContentEnergy):
    """Content energies of rotated queries and keys (Su et al. 2021)."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec)
        head_dim, side = spec.embed_dim // spec.num_heads, spec.placement.owner
        if head_dim % 2:
            raise ValueError(f"{spec.flag('mixer')} rope rotates pairs of dimensions: the head dimension "
                             f"{spec.embed_dim}/{spec.num_heads} = {head_dim} must be even (choose "
                             f"{side.flag('embed-dim')} and {side.flag('attention-heads')} so that it is)")
        self.base = float(spec.options["rope-base"])

    def key_features(self, key, key_positions):
        """The keys rotated by their own positions: what the incremental cache keeps."""
        return rotate(super().key_features(key, key_positions), key_positions, self.base)

    def query_features(self, query, query_positions):
        """The queries rotated by their own positions; the energies are then the content energies."""
        return rotate(super().query_features(query, query_positions), query_positions, self.base)


@register_mixer("rope", placements=SELF_ATTENTION_PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="RoPE (Su, Lu, Pan, Murtadha, Wen & Liu 2021, RoFormer, https://arxiv.org/abs/2104.09864): "
                            "queries and keys rotated by their positions",
                equation="(R_n W^Q y_n)(R_m W^K x_m)^T, R_p: pair i rotated by p·base^(−2i/D_h)",
                parameters="4(D²+D)",
                options={"rope-base": dict(type=Number(float, 1, low_open=True), default=10000.0, metavar="BASE",
                                           help="base of the rotation frequencies theta_i = BASE^(-2i/D_h) (default "
                                                "10000, Su et al. 2021)")})
def build_rope(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, RotaryEnergy(spec))
