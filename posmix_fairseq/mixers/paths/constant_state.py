"""Constant-state decoding as a mixing path: rPosNet decoder self-attention while decoding step by
step keeps the last K values, the sum of the older ones and their count, and mixes them with the
query position's energy row (:func:`~posmix_fairseq.mixers.engine.relative_search.constant_state_step`):
O(K D_h) time and memory per step, whatever t; the step runs the decode-weight table or
the Triton decoding step, as the sublayer's choice says (kernels/choice.py).

It serves every self-attention step of incremental decoding (the state replaces the cache of all
past values); full forwards fall through to the next path.
"""
from ..engine.mixing import MixingCall, MixingPath
from ..engine.relative_search import constant_state_step


class ConstantStateDecoding(MixingPath):
    name = "constant-state"

    def serves(self, mixer, call: MixingCall) -> bool:
        return call.decoding_step

    def mix(self, mixer, call: MixingCall):
        if call.need_head_weights:
            raise ValueError(f"{mixer.placement} rPosNet keeps a constant decoding state (the last K values and "
                             "the sum of the older ones): it has no per-key attention weights while decoding step "
                             "by step; ask for them in a full (teacher-forced) forward")
        frame = call.frame
        values = mixer.values(call.value, frame.positions, frame.padding_mask)  # (B, H, T, D_h) of the new tokens
        buffer = mixer._get_input_buffer(call.incremental_state)
        constants = mixer._get_decode_constants(call.incremental_state)  # the decode-weight table of this decode
        choice = mixer.kernel_choice
        context = constant_state_step(mixer.energy, buffer, frame.positions, frame.padding_mask, values,
                                      constants=constants, padded=frame.has_padding,
                                      backend=choice.backend(values.device, "decode"),
                                      position_bound=frame.position_bound)
        mixer._set_input_buffer(call.incremental_state, buffer)
        return context, None
