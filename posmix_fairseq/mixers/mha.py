"""``mha``: the Transformer's multi-head attention (Vaswani et al. 2017), the baseline.

Ungated, it is fairseq's own ``MultiheadAttention`` (bit-identical to ``--arch transformer``).
Gated (GPA Table 6 "Transformer + gating"), it is content energies
e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h) inside :class:`EnergyMixingAttention` with Eq. 4.
"""
from fairseq.modules import MultiheadAttention

from ..core.placement import PLACEMENTS
from .engine import ContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, register_mixer


@register_mixer("mha", placements=PLACEMENTS, gated_by_default=False, uses_positions=False,
                description="multi-head attention (Vaswani et al. 2017); fairseq's module when ungated",
                equation="(W^Q y_n)(W^K x_m)^T", parameters="4(D²+D)")
def build_mha(spec: MixerSpec, resources: SideResources):
    if spec.gated:
        return EnergyMixingAttention(spec, resources, ContentEnergy(spec))
    return MultiheadAttention(spec.embed_dim, spec.num_heads, kdim=spec.kdim, vdim=spec.kdim,
                              dropout=spec.attention_dropout, self_attention=not spec.placement.cross,
                              encoder_decoder_attention=spec.placement.cross)
