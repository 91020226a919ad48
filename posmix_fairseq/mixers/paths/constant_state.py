"""Constant-state decoding as a mixing path: rPosNet decoder self-attention while decoding step by step
keeps the last K values and the sum of the older ones (:func:`~..engine.relative_search.constant_state_step`),
O(K D_h) per step, whatever t, for every self-attention step of incremental decoding; full forwards fall through.
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
        context = constant_state_step(mixer.energy, buffer, frame, values,
                                      mixer._get_decode_constants(call.incremental_state),
                                      mixer.kernel_choice.backend(values.device, "decode"))
        mixer._set_input_buffer(call.incremental_state, buffer)
        return context, None
