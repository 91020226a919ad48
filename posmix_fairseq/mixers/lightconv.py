"""``lightconv``: light convolution (Wu et al. 2019) as a token mixer, GPA Eq. 14 and the ablation
chain of GPA Appendix E (Table 7; its flag sets: docs/architectures.md):

    c_n^h = sum_{|n - m| <= K} softmax(w^h)[n - m] v_m^h,    v = GLU(W^{2D} x)   (GLU on the inputs)
    out_n = W^O c_n

One kernel of 2K+1 taps per head, shared across the head's features; causal in decoder
self-attention (K+1 taps over distances 0..K). Distances are n - m (floor(gamma n) - m in
cross-attention) over true positions. With global context the outermost taps w[+K], w[-K] are
spread evenly over all keys at distance >= K (resp. <= -K), so the kernel reaches the whole
sentence and the weights of an interior query still sum to 1.
"""
import torch
from torch import nn

from .engine import (DirectWeights, EnergyMixingAttention, MixerSpec, SideResources, Values, max_relative_position,
                     max_relative_position_option, register_mixer, xavier_linear)
from ..core.placement import PLACEMENTS
from ..core.positions import relative_distance


class LightConvWeights(DirectWeights):
    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.k, self.length_ratio = max_relative_position(spec), spec.length_ratio
        self.causal = spec.placement.causal
        self.global_context = spec.options["lightconv-global-context"] == "on"
        taps = self.k + 1 if self.causal else 2 * self.k + 1
        self.kernel = nn.Parameter(torch.empty(spec.num_heads, taps))

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.kernel)

    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        k = self.k
        distance = relative_distance(query_positions, key_positions, self.length_ratio)  # floor(gamma n) - m
        index = distance.clamp(-k, k) + k  # (B, T, S) tap index in 0..2K
        taps = torch.softmax(self.kernel.float(), dim=-1)
        if self.causal:  # distances 0..K -> taps 0..K; negative distances are future keys (masked)
            taps = torch.cat([taps.new_zeros(taps.size(0), k), taps], dim=-1)
        b, t, s = index.shape
        weights = taps[:, index.reshape(-1)].view(-1, b, t, s).transpose(0, 1)  # (B, H, T, S)
        valid = ~key_padding_mask.unsqueeze(1)
        if self.global_context:
            for side in (distance >= k, distance <= -k):
                share = (side & valid).sum(dim=-1, keepdim=True).clamp(min=1)  # keys sharing the outer tap
                weights = torch.where(side.unsqueeze(1), weights / share.unsqueeze(1), weights)
        else:
            weights = weights.masked_fill((distance.abs() > k).unsqueeze(1), 0.0)
        return weights.to(query.dtype)


@register_mixer(
    "lightconv", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
    description="light convolution (Wu et al. 2019; GPA Eq. 14): softmax kernel of 2K+1 taps per head; GLU / gating / "
                "global context",
    equation="a_h(n,m) = softmax(w^h)[n−m] for |n−m| ≤ K (GPA Eq. 14); values GLU(W^{2D} x)",
    parameters="3(D²+D) + H(2K+1); 2(D²+D) + H(2K+1) without GLU; H(K+1) taps in the causal decoder",
    options={
        **max_relative_position_option(),
        "lightconv-glu": dict(choices=("on", "off"), default="on", help="GLU on the inputs (default on)"),
        "lightconv-global-context": dict(choices=("on", "off"), default="off",
                                         help="spread the outermost taps over the whole sentence (default off)"),
    })
def build_lightconv(spec: MixerSpec, resources: SideResources):
    glu = spec.options["lightconv-glu"] == "on"
    if glu and spec.gated:
        raise ValueError(f"{spec.flag('gating')} on replaces the GLU (Appendix E): also pass "
                         f"{spec.flag('lightconv-glu')} off")
    weights = LightConvWeights(spec)
    if not glu:
        return EnergyMixingAttention(spec, resources, weights)
    projection = nn.Sequential(xavier_linear(spec.kdim, 2 * spec.embed_dim), nn.GLU(dim=-1))
    return EnergyMixingAttention(spec, resources, weights, Values.of_spec(spec, projection=projection))
