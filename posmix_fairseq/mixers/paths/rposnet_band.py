"""rPosNet's band form as a mixing path (``--S-rposnet-impl window``): the band of 2K+1 keys
plus the far-left and far-right sums, O(T (2K+3) D_h)
(:func:`~posmix_fairseq.mixers.engine.relative_search.window_context`).

It serves a call when no attention weights are asked for (it never forms them) and the only mask
is none or the decoder's future mask; attention dropout in training is an error (it has none).
Other calls fall through to dense mixing. For ``--S-rposnet-impl auto`` it serves only calls on CUDA
tensors where posmix_fairseq/kernels/gpu_defaults.py chooses ``window``, and never a training call
with attention dropout (auto then chooses dense).
"""
import torch

from ...kernels.gpu_defaults import gpu_default
from ..engine.mixing import MixingCall, MixingPath
from ..engine.relative_search import is_future_mask, window_context


class RPosNetBandMixing(MixingPath):
    name = "window"

    def extra_repr(self) -> str:
        return "window (auto: on CUDA where kernels/gpu_defaults.py says so)" if self.auto else self.name

    def __init__(self, impl_flag: str, auto: bool = False):
        super().__init__()
        self.impl_flag = impl_flag  # e.g. --encoder-self-rposnet-impl, for the error message
        self.auto = auto  # --S-rposnet-impl auto: the GPU default decides, for CUDA tensors only

    def chosen(self, mixer, device: torch.device) -> bool:
        """Whether this path is the sublayer's implementation for tensors on ``device``."""
        if not self.auto:
            return True
        if device.type != "cuda" or (mixer.training and mixer.attention_dropout > 0):
            return False
        return gpu_default("rposnet_impl") == "window"

    def serves(self, mixer, call: MixingCall) -> bool:
        if call.weights_requested or not self.chosen(mixer, call.query.device):
            return False
        if call.attn_mask is not None and not (mixer.placement.causal and is_future_mask(call.attn_mask)):
            return False
        if mixer.training and mixer.attention_dropout > 0:
            raise ValueError(f"{self.impl_flag} window applies no attention dropout (--attention-dropout "
                             f"{mixer.attention_dropout}): train with --attention-dropout 0 or {self.impl_flag} dense")
        return True

    def mix(self, mixer, call: MixingCall):
        values, _, _, key_pad = mixer.keys_and_values(call)
        causal = call.attn_mask is not None  # the decoder's future mask (checked by serves)
        context = window_context(mixer.energy, call.frame.positions, call.frame.padding_mask if causal else None,
                                 values, key_pad, causal=causal)
        return context, None
