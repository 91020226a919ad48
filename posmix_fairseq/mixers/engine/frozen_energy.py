"""Search-time (frozen) energies of aPosNet and rPosNet: the trained energy replaced by its table.

GPA Sections 4.1-4.2: after training the
energies depend on nothing but positions, so they can be precomputed.

* aPosNet (Eq. 8): e_nm = (W^Q n~)(W^K m~)^T / sqrt(D_h) becomes a table E of shape (H, N_q, N_k);
  one layer keeps H N^2 + 3 D^2 parameters (gated) instead of 5 D^2 (Table 8).
* rPosNet (Eqs. 9-10): e_nm = (W^Q n~) Emb_rel(clip(floor(gamma n) - m, K))^T / sqrt(D_h) becomes
  a table E of shape (H, N_q, K^) with K^ = 2K + 1, indexed by the query position n and the clipped
  distance index j = clip(floor(gamma n) - m, K) + K (gamma applied in the index, as in training);
  one layer keeps H K^ N + 3 D^2 parameters instead of K^ D + 4 D^2 (Table 8).

N_q and N_k are the table sizes of the query's and the key's side: ``--encoder-frozen-energy-positions``
(source positions) and ``--decoder-frozen-energy-positions`` (target positions), set by
``posmix-freeze``. The mixer registry declares these classes as the frozen energies of ``aposnet``
and ``rposnet``; a search-time model builds them instead of the trained energies (W^Q, W^K, the
n~ / m~ tables and Emb_rel are not built). They implement the table contract of
:mod:`.table_energy` (``energy_rows`` / ``energy_table``, dense ``logits``), so every mixing path of
the trained ones (dense softmax, window form, constant-state decoding, kernels) runs on them
unchanged. A position beyond a table raises a ValueError that names the table, its option,
whether the original (unfrozen) model would have handled it (sinusoidal n~ / m~ are defined for
any position, a learned table stops at ``--max-source/target-positions``) and the fix; it is never
clipped. A search-time decoder reports the trained model's max target positions
(fairseq-generate's output bound; the encoder reports its source table), so an output that outgrows the target table meets this error, not a silent stop, unless
it was frozen with ``posmix-freeze --tables-as-max-positions`` (``--frozen-tables-as-max-positions``).
"""
from abc import ABCMeta, abstractmethod
from typing import Dict, Tuple

import torch
from torch import Tensor, nn

from .registry import MixerSpec
from .shared_options import max_relative_position
from .table_energy import AbsoluteTableEnergy, RelativeTableEnergy

FROZEN_OPTION = "frozen-energy-positions"  # per side: --encoder-frozen-energy-positions, --decoder-...
FREEZE_FLAG = "posmix-freeze --max-positions"
TABLES_AS_LIMITS = "frozen_tables_as_max_positions"  # the model's max positions are its tables (posmix-freeze)


class FrozenTable(metaclass=ABCMeta):
    """The frozen table's sizes per side and what the trained model it came from could do beyond them."""

    frozen = True

    @staticmethod
    @abstractmethod
    def table_sides(placement):
        """The sides whose positions index the table (their sizes are needed to build it)."""

    def _setup_frozen(self, spec: MixerSpec, kind: str):
        sizes: Dict[str, int] = spec.frozen_positions
        self._sizes: Dict[str, int] = {}
        self._info = dict(kind=kind, placement=spec.placement.name,
                                      table=spec.options.get("position-table", "learned"), sides={})
        limits = {spec.placement.query_side.role: spec.max_query_positions,
                  spec.placement.key_side.role: spec.max_key_positions}
        for side in self.table_sides(spec.placement):
            n = sizes.get(side.role)
            if not isinstance(n, int) or n < 1:
                raise ValueError(f"{side.flag(FROZEN_OPTION)} must be an integer >= 1 for the frozen {kind} energy "
                                 f"table of the {spec.placement} sublayer (got {n!r})")
            self._sizes[side.role] = n
            self._info["sides"][side.role] = (side.flag(FROZEN_OPTION), limits[side.role],
                                                          side.max_positions_option)

    def positions_of(self, role: str) -> int:
        """N of the ``role`` ("source" / "target") side."""
        return self._sizes[role]

    def option_of(self, role: str) -> str:
        """The flag that sized the ``role`` side of the table (``--encoder-frozen-energy-positions`` ...)."""
        return self._info["sides"][role][0]

    def position_limits(self):
        """(role, positions, option) of each side that indexes the table (the position-limit protocol)."""
        return [(role, n, self.option_of(role)) for role, n in self._sizes.items()]

    def check_positions(self, positions: Tensor, role: str):
        """A clear error for a position >= N (never a silent truncation or an index error), and for
        training: the tables are written by posmix-freeze, never learned (built with zeros and
        ``requires_grad=False``, a search-time model trained from scratch would attend uniformly)."""
        if self.training and torch.is_grad_enabled():
            info = self.__dict__["_info"]
            flags = " ".join(f"{flag} {self.positions_of(r)}" for r, (flag, _, _) in info["sides"].items())
            raise ValueError(
                f"{flags}: a search-time model (frozen {info['kind']} energy tables, GPA Sections 4.1-4.2) is for "
                f"decoding only: its tables are filled by posmix-freeze from a trained checkpoint and are never "
                f"trained. Train without --encoder/decoder-frozen-energy-positions, then run posmix-freeze")
        if not positions.numel():
            return
        longest, n = int(positions.max()), self.positions_of(role)
        if longest < n:
            return
        info = self._info
        flag, limit, limit_option = info["sides"][role]
        if info["table"] == "sinusoidal":
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
            f"{role} position {longest} is beyond the frozen {info['kind']} energy table of the {info['placement']} "
            f"sublayer, which covers {role} positions 0..{n - 1} ({flag} {n}, set by {FREEZE_FLAG}); {original}. "
            f"{fix}, {within}")


class FrozenRelativeEnergy(FrozenTable, RelativeTableEnergy):
    """rPosNet at search time: the (H, N_q, 2K+1) table of Eq. 10's energies (Section 4.2)."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self._setup_frozen(spec, "rPosNet")
        self._query_role = spec.placement.query_side.role
        self.k, self.length_ratio, self.num_heads = max_relative_position(spec), spec.length_ratio, spec.num_heads
        rows = self.positions_of(self._query_role)
        self.table = nn.Parameter(torch.zeros(spec.num_heads, rows, 2 * self.k + 1), requires_grad=False)

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
        return self.positions_of(self._query_role)


class FrozenAbsoluteEnergy(FrozenTable, AbsoluteTableEnergy):
    """aPosNet at search time: the (H, N_q, N_k) table of Eq. 8's energies (Section 4.1)."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self._setup_frozen(spec, "aPosNet")
        self._roles = (spec.placement.query_side.role, spec.placement.key_side.role)
        self.num_heads = spec.num_heads
        rows, columns = (self.positions_of(role) for role in self._roles)
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
