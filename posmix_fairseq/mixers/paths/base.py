"""The mixing-path interface: how one sublayer turns its energy and values into contexts.

An :class:`~posmix_fairseq.mixers.engine.attention.EnergyMixingAttention` holds an ordered list of
paths chosen when the model is built (by the mixer's builder, from its options); for each call
the first path that ``serves`` it computes the contexts, and the engine applies the gate and W^O.
Dense mixing (:class:`~.dense.DenseMixing`) closes every list and serves every call, so a faster
path may decline the calls it cannot reproduce (attention weights asked for, another mask).
A new path is one small class: ``serves(mixer, call)`` and ``mix(mixer, call)``.
"""
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from typing import Optional, Tuple

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
