"""Position-only energies as tables: the contract shared by trained and frozen aPosNet / rPosNet.

GPA Sections 4.1-4.2: the energies of aPosNet (Eq. 8) and rPosNet (Eqs. 9-10) depend on positions only,
so everything that mixes with them (dense softmax, window form, constant-state decoding, kernels, frozen
tables) goes through ``energy_rows`` / ``energy_table``, computed from W^Q n~ (training) or stored (frozen).

A constant-state decoding step's weights (Eq. 10, gamma = 1) depend on its position only: search reads them
from a table built from ``energy_table`` once per decode (mixers/paths/constant_state.py).
"""
import abc
from typing import Optional

import torch
from torch import Tensor

from ...core.position_tables import PositionFigure
from ...core.positions import clipped_relative_index
from .energy import SoftmaxEnergy


def gather_relative(scores_per_distance: Tensor, index: Tensor) -> Tensor:
    """(B, H, T, 2K+1) scores per clipped distance, (B, T, S) indices -> (B, H, T, S)."""
    b, h, t, _ = scores_per_distance.shape
    return torch.gather(scores_per_distance, -1, index.unsqueeze(1).expand(b, h, t, index.size(-1)))


def relative_scores(queries: Tensor, table: Tensor) -> Tensor:
    """(B, H, T, 2K+1) q_n . a_j of queries (B, H, T, D_h) and a table (H, 2K+1, D_h) by one product per head (a
    broadcast one copies the table per sentence), on contiguous operands as that one has them: the same rounding."""
    batch, heads, steps, dim = queries.shape
    rows = queries.transpose(0, 1).reshape(heads, batch * steps, dim)
    scores = torch.bmm(rows, table.to(queries.dtype).transpose(1, 2).contiguous())  # (H, B T, 2K+1)
    return scores.view(heads, batch, steps, -1).transpose(0, 1)


def bucket_probabilities(probs: Tensor, index: Tensor, num_buckets: int) -> Tensor:
    """sum of a_nm over the keys m in each clipped-distance bucket: (B, H, T, 2K+1)."""
    b, h, t, s = probs.shape
    out = probs.new_zeros(b, h, t, num_buckets)
    return out.scatter_add_(-1, index.unsqueeze(1).expand(b, h, t, s), probs)


def table_positions(energy: "RelativeTableEnergy", query_positions: Tensor,
                    position_bound: Optional[int] = None) -> int:
    """How many query positions a table must cover: up to the last query position (not T: a decoding
    step has T = 1 at position t). From ``position_bound``, the frame's host-known bound, where known
    (no device synchronisation; capped at the energy's limit: positions beyond it are the position
    table's error), else read from the positions."""
    if position_bound is not None:
        limit = energy.decode_weight_limit()
        return max(1, position_bound if limit is None else min(position_bound, limit))
    return int(query_positions.max()) + 1 if query_positions.numel() else 1


class RelativeTableEnergy(SoftmaxEnergy):
    """Energies per query position and clipped distance (rPosNet, Eq. 10).

    Subclasses set ``k`` (the clipping distance K), ``length_ratio`` (gamma) and ``num_heads`` and
    implement :meth:`energy_rows` and :meth:`energy_table`.
    """

    k: int
    length_ratio: float
    num_heads: int
    frozen = False  # a search-time table (frozen_energy.py)

    @abc.abstractmethod
    def energy_rows(self, query_positions: Tensor) -> Tensor:
        """(B, H, T, 2K+1) float energies of the queries at ``query_positions`` (B, T), one per
        clipped distance index j = clip(floor(gamma n) - m, K) + K."""

    @abc.abstractmethod
    def energy_table(self, num_query_positions: int) -> Tensor:
        """(H, Pq, 2K+1) energies for the query positions 0 .. Pq-1."""

    def decode_weight_limit(self) -> Optional[int]:
        """The most query positions :meth:`energy_table` covers (None: any): the decode-weight table's cap."""
        return None

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The energy table E[h, n, j] of Eq. 10 and the weight profiles of a few query positions."""
        return PositionFigure("rposnet", {"k": self.k, "gamma": self.length_ratio, "frozen": self.frozen},
                              {"energy": self.energy_table(positions).float(),
                               "profiles": weights()[:, query_positions]})

    def logits(self, query, query_positions, keys, key_positions):
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(self.energy_rows(query_positions).to(query.dtype), index)

    def table_logits(self, query_positions: Tensor, key_positions: Tensor, num_query_positions: int,
                     num_key_positions: int) -> Tensor:
        """(B, H, T, S) energies e_nm of Eq. 10 read from ``energy_table(num_query_positions)``: W^Q n~ once
        per position, not once per token."""
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return self.energy_table(num_query_positions)[:, query_positions[:, :, None], index].transpose(0, 1)


class AbsoluteTableEnergy(SoftmaxEnergy):
    """Energies per (query position, key position) (aPosNet, Eq. 8)."""

    num_heads: int
    frozen = False  # a search-time table (frozen_energy.py)

    @abc.abstractmethod
    def energy_table(self, num_query_positions: int, num_key_positions: int) -> Tensor:
        """(H, Pq, Pk) energies for query positions < Pq and key positions < Pk."""

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The energies e_nm of Eq. 8, query by key position."""
        return PositionFigure("aposnet", {"frozen": self.frozen},
                              {"energy": self.energy_table(positions, positions).float()})
