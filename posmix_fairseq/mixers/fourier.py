"""``fourier``: FourierNet, GPA Eq. 11 (after FNet, Lee-Thorp et al. 2021).

    c_n = Re( sum_m exp(-2 pi i n m / L) v_m ) = sum_m cos(2 pi n m / L) v_m,   v_m = W^V x_m
    out_n = W^O c_n

the real part of the unnormalised DFT over each sentence's TRUE length L (positions from the
padding mask). It needs the whole sentence, so it is for encoder self-attention only.
"""
import math

import torch

from .engine import DirectWeights, EnergyMixingAttention, MixerSpec, SideResources, register_mixer
from ..core.placement import ENCODER_SELF


class FourierWeights(DirectWeights):
    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        lengths = (~key_padding_mask).sum(dim=1).clamp(min=1).double()  # (B,)
        phase = (2 * math.pi) * query_positions.double().unsqueeze(2) * key_positions.double().unsqueeze(1)
        weights = torch.cos(phase / lengths.view(-1, 1, 1))  # (B, T, S), the same for every head
        return weights.unsqueeze(1).to(query.dtype)


@register_mixer("fourier", gated_by_default=False, uses_positions=True,
                description="FourierNet (Eq. 11): real part of the DFT along each sentence (encoder only)")
def build_fourier(spec: MixerSpec, resources: SideResources):
    if spec.placement != ENCODER_SELF:
        raise ValueError(f"{spec.flag('mixer')} fourier: FourierNet transforms the whole sentence, so it is "
                         "not causal and has no target-source form; use it as --encoder-self-mixer only")
    return EnergyMixingAttention(spec, resources, FourierWeights())
