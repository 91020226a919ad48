"""The mixing-path interface: how one sublayer turns its energy and values into contexts (docs/contributing.md,
"One way to mix, several paths"). The first of a mixer's paths that ``serves`` a call computes its contexts;
:class:`DenseMixing` (the reference: a_nm = energy.mixing_weights(...), c_n = sum_m a_nm v_m +
values.relative_term) closes every list and serves every call, so a faster path may decline the calls it
cannot reproduce. A new path is one small class in ``mixers/paths/``.
"""
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...core.positions import PositionFrame


@dataclass
class MixingCall:
    """One call of fairseq's attention signature, with the positions of the running forward."""

    query: Tensor  # (T, B, D)
    key: Optional[Tensor]  # (S, B, kdim)
    value: Optional[Tensor]
    key_padding_mask: Optional[Tensor]  # (B, S), True at padding
    incremental_state: Optional[dict]
    static_kv: bool  # cross-attention while decoding: the source keys/values are cached once
    attn_mask: Optional[Tensor]  # additive (T, S): 0 or -inf
    need_weights: bool
    need_head_weights: bool
    frame: PositionFrame

    @property
    def weights_requested(self) -> bool:
        return self.need_weights or self.need_head_weights

    @property
    def decoding_step(self) -> bool:
        """A self-attention step of incremental decoding (new tokens appended to the cached prefix)."""
        return self.incremental_state is not None and not self.static_kv

    def excluded_keys(self, key_padding_mask: Tensor) -> Tensor:
        """(B, T, S) True at the keys a query may not read: padding, and what fairseq's additive mask
        excludes (0: allowed; -inf or -1e8: excluded)."""
        excluded = key_padding_mask[:, None, :]
        if self.attn_mask is not None:
            excluded = excluded | (self.attn_mask.float() < -1e3)[None]
        return excluded.expand(key_padding_mask.size(0), self.query.size(0), key_padding_mask.size(1))


class MixingPath(nn.Module, metaclass=ABCMeta):
    """A strategy for mixing values. A path holds no parameters (the mixer's energy and values do):
    anything it registers is a non-persistent buffer, so checkpoints do not depend on the paths."""

    name: str = ""

    @abstractmethod
    def serves(self, mixer, call: MixingCall) -> bool:
        """Whether this path computes ``call`` (it may raise a clear error for a call it refuses)."""

    @abstractmethod
    def mix(self, mixer, call: MixingCall) -> Tuple[Tensor, Optional[Tensor]]:
        """(contexts (B, H, T, D_h) before the gate and W^O, attention weights or None)."""

    def extra_repr(self) -> str:
        return self.name


class DenseMixing(MixingPath):
    """The (B, H, T, S) weights of the energy, then their sum over the values: every mixer has it last,
    and it serves every call (attention dropout, attention weights asked for, any mask, the cached keys)."""

    name = "dense"

    def serves(self, mixer, call: MixingCall) -> bool:
        return True

    def mix(self, mixer, call: MixingCall):
        query, query_positions = call.query, call.frame.positions
        values, keys, key_positions, key_pad = mixer.keys_and_values(call)
        weights = mixer.energy.mixing_weights(query, query_positions, keys, key_positions, key_pad,
                                              call.excluded_keys(key_pad)[:, None])
        probs = F.dropout(weights, p=mixer.attention_dropout, training=mixer.training).to(values.dtype)

        context = torch.matmul(probs, values)  # (B, H, T, Dh)
        extra = mixer.values.relative_term(probs, query_positions, key_positions)
        if extra is not None:
            context = context + extra

        attn = None
        if call.weights_requested:
            attn = (weights.transpose(0, 1) if call.need_head_weights else weights.mean(dim=1)).to(query.dtype)
        return context, attn
