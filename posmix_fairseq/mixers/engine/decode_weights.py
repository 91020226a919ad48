"""The weights of a constant-state decoding step for every query position, computed once per table.

GPA Eq. 10 with gamma = 1: a decoding step
of rPosNet decoder self-attention at position t weighs the last K values and the sum of the older
ones with the softmax of the table row E[t], and which of them exist follows from t too
(``kernels.decode_step.position_decode_weights``). So the weights are a function of t alone, the
same for every sentence and hypothesis. At search (no gradient) a sublayer keeps them as a table
of (P, H, 1, K+1) rows and a step reads its row with one ``index_select``: the softmax, the masks
and, for a trained rPosNet, W^Q n~ (a D x D product per step) are no longer computed every step.

The table is computed from the energy's ``energy_table(P)`` and again only when a tensor it comes
from changes (weights loaded or updated in place, the model moved or converted: a new storage or a
new version) or a position beyond P arrives (P doubles, up to the energy's limit: the frozen table's
N, a learned n~ table's size; a position beyond the limit gets the energy's own clear error).
"""
from typing import List, Optional

import torch
from torch import Tensor

from ...kernels.decode_step import position_decode_weights

#: the smallest table computed (positions 0..63 cover most sentences in one go)
MIN_POSITIONS = 64


def tensor_key(tensors: List[Tensor]) -> tuple:
    """Identity of the tensors' contents: storage and in-place version (inference tensors, which
    cannot be changed in place outside inference mode, count by storage alone)."""
    return tuple((t.data_ptr(), None if t.is_inference() else t._version) for t in tensors)


class DecodeWeightTable:
    """The (P, H, 1, K+1) decode weights of positions 0..P-1 of one energy."""

    def __init__(self):
        self.key: Optional[tuple] = None
        self.table: Optional[Tensor] = None

    def rows(self, energy, query_positions: Tensor) -> Tensor:
        """(B, H, T, K+1) weights of the queries at ``query_positions`` (B, T)."""
        key = tensor_key(energy.decode_weight_sources())
        if self.table is None or key != self.key:
            self.build(energy, key, max(self.needed(query_positions), self.size))
        elif query_positions.device.type != "cpu" and self.needed(query_positions) > self.size:
            self.build(energy, key, self.needed(query_positions))  # off the CPU, index_select cannot raise
        batch, steps = query_positions.shape
        flat = query_positions.view(-1) if steps == 1 else query_positions.reshape(-1)
        try:  # on the CPU a position >= P makes index_select raise: no bound check on every step
            rows = self.table.index_select(0, flat)
        except IndexError:
            self.build(energy, key, self.needed(query_positions))
            rows = self.table.index_select(0, flat)
        return rows if steps == 1 else rows.view(batch, steps, *self.table.shape[1:]).squeeze(3).transpose(1, 2)

    @property
    def size(self) -> int:
        return 0 if self.table is None else self.table.size(0)

    @staticmethod
    def needed(query_positions: Tensor) -> int:
        return int(query_positions.max()) + 1 if query_positions.numel() else 1

    def build(self, energy, key: tuple, needed: int):
        """The table for at least ``needed`` positions: twice the current size when it grows."""
        size = max(needed, MIN_POSITIONS, 2 * self.size if needed > self.size else self.size)
        limit = energy.decode_weight_limit()
        if limit is not None:  # needed > limit: energy_table(needed) raises the energy's error for that position
            size = min(size, max(limit, needed))
        with torch.inference_mode(False), torch.no_grad():
            table = energy.energy_table(size)  # (H, P, 2K+1); a position beyond the limit raises here
            positions = torch.arange(size, device=table.device)
            self.table = position_decode_weights(table.transpose(0, 1), positions[:, None]).unsqueeze(2)
        self.key = key
