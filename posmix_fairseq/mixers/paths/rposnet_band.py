"""rPosNet's band form as a mixing path (``--S-rposnet-impl window``, ``triton``, or ``auto`` where the
GPU defaults say so): the band of 2K+1 keys plus the far-left and far-right sums, O(T (2K+3) D_h)
(:func:`~..engine.relative_search.window_context`). It declines calls that ask for attention weights
or carry a mask other than the decoder's future mask (docs/search-time.md); attention dropout in
training is an error where the user asked for the window form, and runs dense where the defaults chose it.
"""
from ..engine.mixing import MixingCall, MixingPath
from ..engine.relative_search import is_future_mask, window_context


class RPosNetBandMixing(MixingPath):
    name = "window"

    def __init__(self, impl_flag: str):
        super().__init__()
        self.impl_flag = impl_flag  # e.g. --encoder-self-rposnet-impl, for the error message

    def serves(self, mixer, call: MixingCall) -> bool:
        choice = mixer.kernel_choice
        if call.weights_requested or choice.on(call.query.device).mixing != "window":
            return False
        if call.attn_mask is not None and not (mixer.placement.causal and is_future_mask(call.attn_mask)):
            return False
        if mixer.training and mixer.attention_dropout > 0:
            if choice.cpu.mixing == "dense":  # auto: the defaults chose the window form on a GPU, dense here
                return False
            raise ValueError(f"{self.impl_flag} window applies no attention dropout (--attention-dropout "
                             f"{mixer.attention_dropout}): train with --attention-dropout 0 or {self.impl_flag} dense")
        return True

    def mix(self, mixer, call: MixingCall):
        values, _, _, key_pad = mixer.keys_and_values(call)
        causal = call.attn_mask is not None  # the decoder's future mask (checked by serves)
        return window_context(mixer.energy, call.frame, values, key_pad, causal=causal,
                              backend=mixer.kernel_choice.backend(values.device, "kernels")), None
