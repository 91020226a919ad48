"""Position-only energies as tables: the contract shared by trained and frozen aPosNet / rPosNet.

GPA Sections 4.1-4.2: the energies of
aPosNet (Eq. 8) and rPosNet (Eqs. 9-10) depend on positions only, so they are functions of the
query position (and the key position or the clipped distance). Everything that mixes with them
(the dense softmax, the window form of rPosNet, constant-state decoding, the kernels, the frozen
search-time tables) goes through the two methods below, whether the energy computes its table
from W^Q n~ (training) or stores it (frozen).
"""
import abc
from typing import Dict, Optional

import torch
from torch import Tensor

from ...core.position_figures import PositionFigure
from ...core.positions import clipped_relative_index
from ...kernels.decode_step import position_decode_weights
from .decode_weights import decode_weight_rows
from .energy import SoftmaxEnergy
from .relative_scores import gather_relative


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

    def decode_weights(self, query_positions: Tensor, constants: Optional[Dict[str, Tensor]] = None,
                       position_bound: Optional[int] = None) -> Tensor:
        """(B, H, T, K+1) weights of constant-state decoding in decoder self-attention for queries at
        ``query_positions`` (B, T): window slots 0..K-1, then one far key
        (``kernels.decode_step.position_decode_weights`` of the rows of :meth:`energy_rows`). Without
        gradients and with ``constants`` (the running decode's entries in fairseq's incremental
        state) they are read from a table of every position built once per decode
        (:mod:`.decode_weights`; ``position_bound``, the frame's host-known bound on the positions,
        sizes it without reading them); otherwise computed from the step's own energy rows."""
        if constants is None or torch.is_grad_enabled():
            return position_decode_weights(self.energy_rows(query_positions), query_positions[:, None, :])
        return decode_weight_rows(self, query_positions, constants, position_bound)

    def decode_weight_limit(self) -> Optional[int]:
        """The most query positions :meth:`energy_table` covers (None: any)."""
        return None

    def position_figure(self, positions: int, query_positions, weights) -> PositionFigure:
        """The energy table E[h, n, j] of Eq. 10 and the weight profiles of a few query positions."""
        return PositionFigure("rposnet", {"k": self.k, "gamma": self.length_ratio, "frozen": self.frozen},
                              {"energy": self.energy_table(positions).float(),
                               "profiles": weights()[:, query_positions]})

    def logits(self, query, query_positions, keys, key_positions):
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(self.energy_rows(query_positions).to(query.dtype), index)


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
