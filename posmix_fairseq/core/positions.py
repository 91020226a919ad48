"""Padding-aware positions, relative distances, and the route that hands a forward call's positions
to the parts that need them (docs/contributing.md, Positions take one route).

Positions always come from the padding mask, never from tensor indices: fairseq left-pads sources
by default, and a sentence must get the same positions alone or in a padded batch. Positions are
0-based; padding slots get position 0 (their attention weights are masked).
"""
import contextlib
import functools
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor

from ..kernels import common as kernel_common


def positions_from_padding(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tensor:
    """(batch, length) 0-based positions of the non-padding tokens; 0 at padding."""
    if padding_mask is None:
        return torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
    not_pad = (~padding_mask).long()
    return ((torch.cumsum(not_pad, dim=1) - 1) * not_pad).clamp_(min=0)


def relative_distance(query_positions: Tensor, key_positions: Tensor, length_ratio: float = 1.0) -> Tensor:
    """(B, T, S) distances floor(gamma * n) - m; gamma = ``length_ratio``, 1 (the default) in self-attention."""
    scaled = query_positions if length_ratio == 1.0 else torch.floor(query_positions.double() * length_ratio).long()
    return scaled.unsqueeze(2) - key_positions.unsqueeze(1)


def clipped_relative_index(query_positions: Tensor, key_positions: Tensor, length_ratio: float, k: int) -> Tensor:
    """(B, T, S) index in [0, 2K] of the clipped distance clip(floor(gamma n) - m, K) + K (GPA Eq. 10,
    rPosNet: d_nm = Emb_rel(clip(floor(gamma n) - m, K)), gamma = 1 in self-attention; the same convention,
    query minus key, for Shaw et al. (2018)) of (B, T) query and (B, S) key positions."""
    return relative_distance(query_positions, key_positions, length_ratio).clamp(-k, k) + k


def left_aligned(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tuple[Tensor, Tensor]:
    """(order, lengths): ``order[b, p]`` is the column of row b's p-th real token (padding columns
    after them), ``lengths`` the real tokens per row; gather with ``order`` to move every sentence
    to the start of its row, and back with the true positions."""
    if padding_mask is None:
        return positions_from_padding(None, batch, length, device), torch.full((batch,), length, device=device)
    order = torch.argsort(padding_mask.to(torch.int8), dim=1, stable=True)
    return order, (~padding_mask).sum(dim=1)


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x (B, T, D), index (B, T) -> x[b, index[b, t]]."""
    return torch.gather(x, 1, index.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def reversed_within_length(lengths: Tensor, length: int) -> Tensor:
    """(B, T) index reversing each left-aligned row within its length (padding kept in place)."""
    p, lengths = torch.arange(length, device=lengths.device).unsqueeze(0), lengths.unsqueeze(1)
    return torch.where(p < lengths, lengths - 1 - p, p)


@dataclass(frozen=True)
class PositionFrame:
    """The positions of one forward call of an encoder or a decoder: ``positions`` and ``padding_mask``
    (B, T) of the tokens this call processes (in incremental decoding the last step only, counted over
    the whole prefix), ``source_positions`` (B, S) of the encoder output the decoder attends to (None in
    the encoder), and fairseq's ``incremental_state`` while decoding step by step."""

    positions: Tensor
    padding_mask: Tensor
    source_positions: Optional[Tensor] = None
    incremental_state: Any = None
    #: a host-known bound on every position (the width of the tokens counted): sizes tables without a device read
    position_bound: Optional[int] = None

    @functools.cached_property
    def has_padding(self) -> bool:
        """Whether any token of this call is padding, asked once per call, not once per layer. True on
        a GPU, where asking would cost a device synchronisation: the masked route is exact either way."""
        return kernel_common.on_gpu(self.padding_mask.device) or bool(self.padding_mask.any())

    @classmethod
    def of_tokens(cls, tokens: Tensor, padding_idx: int, source_positions: Optional[Tensor] = None,
                  incremental_state=None) -> "PositionFrame":
        padding_mask = tokens.eq(padding_idx)
        positions = positions_from_padding(padding_mask, *tokens.shape, tokens.device)
        if incremental_state is not None:
            positions, padding_mask = positions[:, -1:], padding_mask[:, -1:]
        return cls(positions, padding_mask, source_positions, incremental_state, position_bound=tokens.size(1))

    @classmethod
    def of_padding(cls, padding_mask: Optional[Tensor], batch: int, length: int, device=None,
                   source_positions: Optional[Tensor] = None) -> "PositionFrame":
        """Positions of a (B, T) batch from its padding mask (None: no padding)."""
        if padding_mask is None:
            padding_mask = torch.zeros(batch, length, dtype=torch.bool, device=device)
        return cls(positions_from_padding(padding_mask, batch, length, padding_mask.device), padding_mask,
                   source_positions, position_bound=length)


class PositionRoute:
    """Carries the :class:`PositionFrame` of the running forward call of one encoder or decoder: the
    owner opens ``with route.carrying(frame):`` around its forward, the parts inside read ``route.frame``,
    and outside a call reading it is an error."""

    def __init__(self, side: str):
        self.side = side
        self._frames: List[PositionFrame] = []

    @contextlib.contextmanager
    def carrying(self, frame: PositionFrame):
        self._frames.append(frame)
        try:
            yield frame
        finally:
            self._frames.pop()

    @property
    def frame(self) -> PositionFrame:
        if not self._frames:
            raise RuntimeError(f"a position-aware part of the {self.side} was called outside its {self.side}'s "
                               "forward; call the encoder/decoder, or pass positions=PositionFrame(...) explicitly")
        return self._frames[-1]

    @property
    def active(self) -> bool:
        return bool(self._frames)
