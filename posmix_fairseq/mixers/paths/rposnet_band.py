"""rPosNet's window form as a mixing path (GPA Eqs. 9-10, Section 4.2; docs/search-time.md): the band of 2K+1
keys around each query plus the far-left and far-right sums, O(T (2K+3) D_h), where the sublayer's kernels run
the window form for its ``mixing`` part (declared by mixers/rposnet.py). It declines calls that ask for
attention weights or carry a mask other than the decoder's future mask, and attention dropout in training
where the defaults chose it (an error where the option did). Trained and frozen energies alike.
"""
import torch
from torch import Tensor

from ... import kernels
from ...core.positions import PositionFrame, left_aligned
from ...kernels import common as kernel_common
from ...kernels.choice import Part
from ..engine.mixing import MixingCall, MixingPath
from ..engine.table_energy import RelativeTableEnergy, table_positions


class RPosNetBandMixing(MixingPath):
    """``part``: the mixer's declared mixing part (values ``dense`` and ``window``: kernels/choice.py)."""

    name = "window"

    def __init__(self, part: Part):
        super().__init__()
        self.part = part

    def serves(self, mixer, call: MixingCall) -> bool:
        sublayer = mixer.sublayer_kernels
        if call.weights_requested or sublayer.on(call.query.device).value(self.part) != "window":
            return False
        if call.attn_mask is not None and not (mixer.placement.causal and is_future_mask(call.attn_mask)):
            return False
        if mixer.training and mixer.attention_dropout > 0:
            if not sublayer.option:  # the defaults chose the window form: dense for this call
                return False
            raise ValueError(f"{sublayer.option} applies no attention dropout (--attention-dropout "
                             f"{mixer.attention_dropout}): train with --attention-dropout 0 or "
                             f"{sublayer.flag} dense")
        return True

    def mix(self, mixer, call: MixingCall):
        values, _, _, key_pad = mixer.keys_and_values(call)
        causal = call.attn_mask is not None  # the decoder's future mask (checked by serves)
        return mixer.sublayer_kernels.run(
            values.device, self.part,
            lambda: window_context(mixer.energy, call.frame, values, key_pad, causal, "triton"),
            lambda: window_context(mixer.energy, call.frame, values, key_pad, causal, "torch")), None


def is_future_mask(attn_mask: Tensor) -> bool:
    """True when fairseq's additive (T, T) mask excludes exactly the keys after each query (the decoder's
    ``buffered_future_mask``, the only mask the causal window form reproduces). On a GPU only the shape
    is checked (the values would synchronise): fairseq's decoder passes its self-attention no other."""
    if attn_mask.dim() != 2 or attn_mask.size(0) != attn_mask.size(1):
        return False
    if kernel_common.on_gpu(attn_mask.device):
        return True
    excluded = attn_mask < -1e3
    future = torch.ones(attn_mask.shape, dtype=torch.bool, device=attn_mask.device).triu_(1)
    return bool(torch.equal(excluded, future))


def window_context(energy: RelativeTableEnergy, frame: PositionFrame, values: Tensor, key_padding_mask: Tensor,
                   causal: bool, backend: str) -> Tensor:
    """(B, H, T, D_h) contexts of Eq. 10's softmax over the real keys, by the window form, for the queries
    of ``frame``. ``values`` (B, H, S, D_h) in column order with their padding ``key_padding_mask`` (B, S);
    ``causal`` for decoder self-attention (the dense form's future mask over real tokens); ``backend``:
    torch or triton, as the sublayer's kernels say."""
    query_positions = frame.positions
    table = energy.energy_table(table_positions(energy, query_positions, frame.position_bound))
    # key slot m = key position m (left, right or any padding: positions count the real tokens)
    batch, heads, keys, dim = values.shape
    order, lengths = left_aligned(key_padding_mask, batch, keys, values.device)
    aligned = torch.gather(values, 2, order[:, None, :, None].expand(batch, heads, keys, dim))
    context = kernels.relative_position_mixing(table, query_positions, aligned, lengths, energy.length_ratio,
                                               causal=causal, backend=backend, impl="window")
    if causal:
        context = context.masked_fill(frame.padding_mask[:, None, :, None], 0.0)
    return context
