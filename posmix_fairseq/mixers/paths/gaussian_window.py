"""Hard-coded Gaussian heads over a window as a mixing path (``--<sublayer>-gaussian-impl window``; docs/choices.md,
"Hard-coded Gaussian, windowed"). GPA Table 8 counts K_hat N D operations for GaussianNet, K_hat = 2K + 1:
each query mixes the values of the K_hat keys around its head's centre f_h(i) = floor(gamma i + o_h):

    c^h_i = sum_{k=-K..K} N(k; 0, sigma^2) v^h_{f_h(i) + k}     (keys outside the sentence, padding
                                                                and future keys contribute 0)

It cuts the Gaussian mass beyond K of the centre, erfc((K + 1/2) / (sigma sqrt 2)): nothing in float32
for sigma = 1 (K = 8: 2e-17), real for a large sigma (the user's choice). Keys are found by their true
positions (padding-aware), so padding, batching and incremental decoding give one full call's result.
A call that asks for attention weights runs dense mixing (the same window-cut weights, formed in full).
"""
import math

import torch
import torch.nn.functional as F

from ..engine.mixing import MixingCall, MixingPath


class GaussianWindowMixing(MixingPath):
    """Hard-coded Gaussian heads over a window of 2K + 1 keys around each head's centre (the centres
    come from the mixer's energy, a ``CentredEnergy``: ``window_centres``)."""

    name = "gaussian-window"

    def __init__(self, half_width: int, sigma: float):
        super().__init__()
        self.half_width = half_width  # K
        taps = torch.arange(-half_width, half_width + 1, dtype=torch.float64)
        self.register_buffer("taps", (torch.exp(-0.5 * (taps / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))),
                             persistent=False)

    def serves(self, mixer, call: MixingCall) -> bool:
        return not call.weights_requested  # the weights themselves: dense mixing (window-cut)

    def mix(self, mixer, call: MixingCall):
        tgt_len, batch, _ = call.query.shape
        values, _, key_positions, key_pad = mixer.keys_and_values(call)
        heads, src_len = values.size(1), values.size(2)
        # column of each (sentence, key position); src_len = a zero value (outside the sentence, padding)
        longest = int(key_positions.max()) + 1 if key_positions.numel() else 1
        column = torch.full((batch, longest + 1), src_len, dtype=torch.long, device=values.device)
        real = ~key_pad
        column.scatter_(1, torch.where(real, key_positions, longest), torch.arange(src_len, device=values.device)
                        .expand(batch, src_len).where(real, src_len))
        centres = mixer.energy.window_centres(call.frame.positions).long()  # (B, H, T)
        offsets = torch.arange(-self.half_width, self.half_width + 1, device=values.device)
        wanted = centres.unsqueeze(-1) + offsets  # (B, H, T, K_hat) key positions
        inside = (wanted >= 0) & (wanted < longest)
        cols = column.gather(1, torch.where(inside, wanted, longest).view(batch, -1)).view(wanted.shape)
        # excluded keys (future keys of decoder self-attention, padding) by (query, column)
        excluded = torch.cat([call.excluded_keys(key_pad), key_pad.new_ones(batch, tgt_len, 1)], dim=2)
        cut = excluded.unsqueeze(1).expand(batch, heads, tgt_len, src_len + 1).gather(3, cols)
        weights = self.taps.to(torch.float32).expand_as(cols).masked_fill(cut, 0.0)
        weights = F.dropout(weights, p=mixer.attention_dropout, training=mixer.training).to(values.dtype)

        padded = torch.cat([values, values.new_zeros(batch, heads, 1, values.size(-1))], dim=2)
        index = cols.reshape(batch, heads, -1, 1).expand(-1, -1, -1, values.size(-1))
        gathered = padded.gather(2, index).view(batch, heads, tgt_len, offsets.numel(), -1)
        return (weights.unsqueeze(-1) * gathered).sum(3), None  # (B, H, T, D_h)
