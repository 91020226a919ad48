"""``fourier``: FourierNet, GPA Eq. 11 (after FNet, Lee-Thorp et al. 2021).

    c_n = Re( sum_m exp(-2 pi i n m / L) v_m ) = sum_m cos(2 pi n m / L) v_m,   v_m = W^V x_m
    out_n = W^O c_n

the real part of the unnormalised DFT over each sentence's TRUE length L (positions from the
padding mask). It needs the whole sentence, so it is for encoder self-attention only.
"""
import math

import torch

from .engine import DirectWeights, EnergyMixingAttention, MixerSpec, SideResources, register_mixer
from ..core.placement import ENCODER_SELF  # the one sublayer FourierNet is defined for


class FourierWeights(DirectWeights):
    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        lengths = (~key_padding_mask).sum(dim=1).clamp(min=1).double()  # (B,)
        phase = (2 * math.pi) * query_positions.double().unsqueeze(2) * key_positions.double().unsqueeze(1)
        weights = torch.cos(phase / lengths.view(-1, 1, 1))  # (B, T, S), the same for every head
        return weights.unsqueeze(1).to(query.dtype)


@register_mixer("fourier", placements=(ENCODER_SELF,), gated_by_default=False, uses_positions=True,
                description="FourierNet (GPA Eq. 11): real part of the DFT along each sentence (encoder only)",
                equation="fixed a(n,m) = cos(2πnm/L), L the sentence's true length (GPA Eq. 11)",
                parameters="2(D²+D)")
def build_fourier(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, FourierWeights())
