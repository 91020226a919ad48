"""Search-time (frozen) energies of aPosNet and rPosNet (GPA Sections 4.1-4.2; docs/search-time.md):

* aPosNet (Eq. 8): e_nm = (W^Q n~)(W^K m~)^T / sqrt(D_h) becomes a table E of shape (H, N_q, N_k).
* rPosNet (Eqs. 9-10): e_nm = (W^Q n~) Emb_rel(clip(floor(gamma n) - m, K))^T / sqrt(D_h) becomes a
  table E of shape (H, N_q, 2K+1), indexed by n and j = clip(floor(gamma n) - m, K) + K (gamma applied
  in the index, as in training).

N_q, N_k: the query's and key's side sizes (``--encoder/decoder-frozen-energy-positions``). Every mixing
path runs on these tables (the contract of :mod:`.table_energy`); a position beyond one is an error.
"""
from abc import ABCMeta, abstractmethod
from typing import Dict, NamedTuple, Tuple

import torch
from torch import Tensor, nn

from .registry import MixerSpec, max_relative_position
from .table_energy import AbsoluteTableEnergy, RelativeTableEnergy

FROZEN_OPTION = "frozen-energy-positions"  # per side: --encoder-frozen-energy-positions, --decoder-...
FREEZE_FLAG = "posmix-freeze --max-positions"
TABLES_AS_LIMITS = "frozen_tables_as_max_positions"  # the model's max positions are its tables (posmix-freeze)


class FrozenSide(NamedTuple):
    """A side whose positions index a frozen table."""
    positions: int  # N: the table covers positions 0..N-1
    flag: str  # the flag that set N (--encoder/decoder-frozen-energy-positions)
    trained_limit: int  # the trained model's max positions on this side
    limit_option: str  # the option of that limit (--max-source/target-positions)


class FrozenTable(metaclass=ABCMeta):
    """The frozen table's sizes per side and what the trained model it came from could do beyond them."""

    frozen = True

    @staticmethod
    @abstractmethod
    def table_sides(placement):
        """The sides whose positions index the table (their sizes are needed to build it)."""

    def _setup_frozen(self, spec: MixerSpec, kind: str):
        self._kind, self._placement = kind, spec.placement.name
        self._trained_table = spec.options.get("position-table", "learned")
        limits = {spec.placement.query_side.role: spec.max_query_positions,
                  spec.placement.key_side.role: spec.max_key_positions}
        self._sides: Dict[str, FrozenSide] = {}  # by role
        for side in self.table_sides(spec.placement):
            n = spec.frozen_positions.get(side.role)
            if not isinstance(n, int) or n < 1:
                raise ValueError(f"{side.flag(FROZEN_OPTION)} must be an integer >= 1 for the frozen {kind} energy "
                                 f"table of the {spec.placement} sublayer (got {n!r})")
            self._sides[side.role] = FrozenSide(n, side.flag(FROZEN_OPTION), limits[side.role],
                                                side.max_positions_option)

    def position_limits(self):
        """(role, positions, option) of each side that indexes the table (the position-limit protocol)."""
        return [(role, side.positions, side.flag) for role, side in self._sides.items()]

    def check_positions(self, positions: Tensor, role: str):
        """A clear error for a position >= N (never a silent truncation or an index error), and for
        training: the tables are written by posmix-freeze, never learned (built with zeros and
        ``requires_grad=False``, a search-time model trained from scratch would attend uniformly)."""
        if self.training and torch.is_grad_enabled():
            flags = " ".join(f"{side.flag} {side.positions}" for side in self._sides.values())
            raise ValueError(
                f"{flags}: a search-time model (frozen {self._kind} energy tables, GPA Sections 4.1-4.2) is for "
                f"decoding only: its tables are filled by posmix-freeze from a trained checkpoint and are never "
                f"trained. Train without --encoder/decoder-frozen-energy-positions, then run posmix-freeze")
        if not positions.numel():
            return
        longest = int(positions.max())
        n, flag, limit, limit_option = self._sides[role]  # a FrozenSide
        if longest < n:
            return
        if self._trained_table == "sinusoidal":
            original = ("the original (unfrozen) model would have extrapolated: its position table is sinusoidal "
                        "(defined for any position)")
            fix = f"Freeze the trained checkpoint again with a larger {FREEZE_FLAG}"
        elif longest < limit:
            original = (f"the original (unfrozen) model would have handled it: its learned position table has "
                        f"{limit} positions ({limit_option} {limit})")
            fix = f"Freeze the trained checkpoint again with a larger {FREEZE_FLAG} (at most {limit})"
        else:
            original = (f"the original (unfrozen) model would not have handled it either: its learned position "
                        f"table has {limit} positions ({limit_option} {limit})")
            fix = "Keep the sentences within the table"
        if role == "target":  # fairseq-generate feeds positions 0..max_len (the last step emits EOS)
            within = (f"or bound the outputs within the table (fairseq-generate --max-len-a 0 --max-len-b {n - 1}; "
                      f"the trained model gives the same translations under it)")
        else:
            within = f"or keep {role} sentences within {n} tokens (EOS included)"
        raise ValueError(
            f"{role} position {longest} is beyond the frozen {self._kind} energy table of the {self._placement} "
            f"sublayer, which covers {role} positions 0..{n - 1} ({flag} {n}, set by {FREEZE_FLAG}); {original}. "
            f"{fix}, {within}")


class FrozenRelativeEnergy(FrozenTable, RelativeTableEnergy):
    """rPosNet at search time: the (H, N_q, 2K+1) table of Eq. 10's energies (Section 4.2)."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self._setup_frozen(spec, "rPosNet")
        self._query_role = spec.placement.query_side.role
        self.k, self.length_ratio, self.num_heads = max_relative_position(spec), spec.length_ratio, spec.num_heads
        self.table = nn.Parameter(torch.zeros(spec.num_heads, self._sides[self._query_role].positions, 2 * self.k + 1),
                                  requires_grad=False)

    @staticmethod
    def table_sides(placement):
        return (placement.query_side,)  # Eq. 10: query positions and clipped distances

    def table8_parameters(self, gated: bool, d: int, n_query: int, n_key: int) -> Tuple[int, int]:
        """(training, search) weights of one rPosNet layer by GPA Table 8 (no biases or LayerNorm):
        K^ D + (3 + g) D^2 -> H K^ N_q + (2 + g) D^2, K^ = 2K + 1."""
        kh, g = 2 * self.k + 1, int(gated)
        return kh * d + (3 + g) * d * d, self.num_heads * kh * n_query + (2 + g) * d * d

    def table_from(self, trained: RelativeTableEnergy) -> Tensor:
        """This table's values from the trained rPosNet energy (``posmix-freeze``)."""
        return trained.energy_table(self.table.size(1))

    def energy_rows(self, query_positions: Tensor) -> Tensor:
        self.check_positions(query_positions, self._query_role)
        return self.table[:, query_positions].transpose(0, 1)  # (B, H, T, 2K+1)

    def energy_table(self, num_query_positions: int) -> Tensor:
        self.check_positions(torch.tensor([num_query_positions - 1]), self._query_role)
        return self.table[:, :num_query_positions]

    def decode_weight_limit(self) -> int:
        return self.table.size(1)


class FrozenAbsoluteEnergy(FrozenTable, AbsoluteTableEnergy):
    """aPosNet at search time: the (H, N_q, N_k) table of Eq. 8's energies (Section 4.1)."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self._setup_frozen(spec, "aPosNet")
        self._roles = (spec.placement.query_side.role, spec.placement.key_side.role)
        self.num_heads = spec.num_heads
        rows, columns = (self._sides[role].positions for role in self._roles)
        self.table = nn.Parameter(torch.zeros(spec.num_heads, rows, columns), requires_grad=False)

    @staticmethod
    def table_sides(placement):
        return placement.sides  # Eq. 8: query and key positions

    def table8_parameters(self, gated: bool, d: int, n_query: int, n_key: int) -> Tuple[int, int]:
        """(training, search) weights of one aPosNet layer by GPA Table 8 (no biases or LayerNorm):
        (4 + g) D^2 -> H N_q N_k + (2 + g) D^2."""
        g = int(gated)
        return (4 + g) * d * d, self.num_heads * n_query * n_key + (2 + g) * d * d

    def table_from(self, trained: AbsoluteTableEnergy) -> Tensor:
        """This table's values from the trained aPosNet energy (``posmix-freeze``)."""
        return trained.energy_table(self.table.size(1), self.table.size(2))

    def logits(self, query, query_positions, keys, key_positions):
        query_role, key_role = self._roles
        self.check_positions(query_positions, query_role)
        self.check_positions(key_positions, key_role)
        rows = self.table[:, query_positions[:, :, None], key_positions[:, None, :]]  # (H, B, T, S)
        return rows.transpose(0, 1).to(query.dtype)

    def energy_table(self, num_query_positions: int, num_key_positions: int) -> Tensor:
        query_role, key_role = self._roles
        self.check_positions(torch.tensor([num_query_positions - 1]), query_role)
        self.check_positions(torch.tensor([num_key_positions - 1]), key_role)
        return self.table[:, :num_query_positions, :num_key_positions]

    def decoding_row(self, position: int, keys: int) -> Tensor:
        """(H, keys) energies E[h, position, m] of the keys m < ``keys``: a decoding step's row, read without a
        device read (``position`` and ``keys`` are host-known); the errors of :meth:`check_positions`."""
        query_role, key_role = self._roles
        if (self.training and torch.is_grad_enabled()) or position >= self.table.size(1) or keys > self.table.size(2):
            self.check_positions(torch.tensor([position]), query_role)
            self.check_positions(torch.tensor([keys - 1]), key_role)
        return self.table[:, position, :keys]
