"""Dense mixing: the (B, H, T, S) weights of the energy, then their sum over the values.

    a_nm = energy.mixing_weights(...)     c_n = sum_m a_nm v_m  (+ values.relative_term)

The reference path: every mixer has it last, and it serves every call (training with attention
dropout, attention weights asked for, any mask, incremental decoding with the cached keys).
"""
import torch
import torch.nn.functional as F

from .base import MixingCall, MixingPath


class DenseMixing(MixingPath):
    name = "dense"

    def serves(self, mixer, call: MixingCall) -> bool:
        return True

    def mix(self, mixer, call: MixingCall):
        query, attn_mask = call.query, call.attn_mask
        tgt_len, batch, _ = query.shape
        values, keys, key_positions, key_pad = mixer.keys_and_values(call)
        excluded = key_pad[:, None, None, :]
        if attn_mask is not None:  # fairseq's additive masks: 0 (allowed) or -inf / -1e8 (excluded)
            excluded = excluded | (attn_mask.float() < -1e3)[None, None]
        excluded = excluded.expand(batch, 1, tgt_len, key_pad.size(1))
        query_positions = call.frame.positions
        weights = mixer.energy.mixing_weights(query, query_positions, keys, key_positions, key_pad, excluded)
        probs = F.dropout(weights, p=mixer.attention_dropout, training=mixer.training).to(values.dtype)

        context = torch.matmul(probs, values)  # (B, H, T, Dh)
        extra = mixer.values.relative_term(probs, query_positions, key_positions)
        if extra is not None:
            context = context + extra

        attn = None
        if call.weights_requested:
            attn = weights.transpose(0, 1) if call.need_head_weights else weights.mean(dim=1)
            attn = attn.to(query.dtype)
        return context, attn
