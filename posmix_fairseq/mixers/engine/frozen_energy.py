"""Search-time (frozen) energies of aPosNet and rPosNet: the trained energy replaced by its table.

Gated position-based attention (000_56daf9cf6f59e3ab.txt), Sections 4.1-4.2: after training the
energies depend on nothing but positions, so they can be precomputed.

* aPosNet (Eq. 8): e_nm = (W^Q n~)(W^K m~)^T / sqrt(D_h) becomes a table E of shape (H, N, N);
  one layer keeps H N^2 + 3 D^2 parameters (gated) instead of 5 D^2 (Table 8).
* rPosNet (Eqs. 9-10): e_nm = (W^Q n~) Emb_rel(clip(floor(gamma n) - m, K))^T / sqrt(D_h) becomes
  a table E of shape (H, N, K^) with K^ = 2K + 1, indexed by the query position n and the clipped
  distance index j = clip(floor(gamma n) - m, K) + K (gamma applied in the index, as in training);
  one layer keeps H K^ N + 3 D^2 parameters instead of K^ D + 4 D^2 (Table 8).

The frozen energies implement the table contract of :mod:`.table_energy` (``energy_rows`` /
``energy_table``, dense ``logits``), so every mixing path of the trained ones (dense softmax,
window form, constant-state decoding, kernels) runs on them unchanged. W^Q, W^K, the n~ / m~
tables and Emb_rel are not built. The table has N positions (``--frozen-energy-positions N``,
set by ``posmix-freeze --max-positions N``); a position >= N raises a ValueError that names both
and says whether the original (unfrozen) model would have extrapolated: sinusoidal n~ / m~ are
defined for any position, a learned table stops at ``--max-source/target-positions``.
"""
import torch
from torch import Tensor, nn

from .registry import MixerSpec
from .shared_options import max_relative_position
from .table_energy import AbsoluteTableEnergy, RelativeTableEnergy

FROZEN_OPTION = "--frozen-energy-positions"
FREEZE_FLAG = "posmix-freeze --max-positions"


class FrozenTable:
    """The frozen table's size and what the trained model it came from could do beyond it."""

    def _setup_frozen(self, spec: MixerSpec, num_positions: int, kind: str):
        if not isinstance(num_positions, int) or num_positions < 1:
            raise ValueError(f"{FROZEN_OPTION} must be an integer >= 1 (got {num_positions!r})")
        self.num_positions = num_positions
        self.__dict__["_roles"] = (spec.placement.query_side.role, spec.placement.key_side.role)
        self.__dict__["_frozen_description"] = dict(
            kind=kind, placement=spec.placement.name,
            table=spec.options.get("position-table", "learned"),
            limits={spec.placement.query_side.role: (spec.max_query_positions, spec.placement.query_side.max_positions_option),
                    spec.placement.key_side.role: (spec.max_key_positions, spec.placement.key_side.max_positions_option)})

    def check_positions(self, positions: Tensor, role: str):
        """A clear error for a position >= N (never a silent truncation or an index error)."""
        if not positions.numel():
            return
        longest = int(positions.max())
        if longest < self.num_positions:
            return
        info = self.__dict__["_frozen_description"]
        limit, limit_option = info["limits"][role]
        if info["table"] == "sinusoidal":
            original = ("the original (unfrozen) model would have extrapolated: its position table is sinusoidal "
                        "(defined for any position)")
        elif longest < limit:
            original = (f"the original (unfrozen) model would have handled it: its learned position table has "
                        f"{limit} positions ({limit_option} {limit})")
        else:
            original = (f"the original (unfrozen) model would not have extrapolated either: its learned position "
                        f"table has {limit} positions ({limit_option} {limit})")
        raise ValueError(
            f"{role} position {longest} is beyond the frozen {info['kind']} energy table of the {info['placement']} "
            f"sublayer, which covers positions 0..{self.num_positions - 1} ({FROZEN_OPTION} {self.num_positions}, "
            f"set by {FREEZE_FLAG}); {original}. Freeze the trained checkpoint again with a larger "
            f"{FREEZE_FLAG}, or keep sentences (and outputs: fairseq-generate --max-len-a/b) shorter")


class FrozenRelativeEnergy(FrozenTable, RelativeTableEnergy):
    """rPosNet at search time: the (H, N, 2K+1) table of Eq. 10's energies (Section 4.2)."""

    def __init__(self, spec: MixerSpec, num_positions: int):
        super().__init__()
        self._setup_frozen(spec, num_positions, "rPosNet")
        self.k, self.length_ratio, self.num_heads = max_relative_position(spec), spec.length_ratio, spec.num_heads
        self.table = nn.Parameter(torch.zeros(spec.num_heads, num_positions, 2 * self.k + 1), requires_grad=False)

    @staticmethod
    def table_of(trained: RelativeTableEnergy, num_positions: int) -> Tensor:
        """The (H, N, 2K+1) table of a trained rPosNet energy (``posmix-freeze``)."""
        return trained.energy_table(num_positions)

    def energy_rows(self, query_positions: Tensor) -> Tensor:
        self.check_positions(query_positions, self.__dict__["_roles"][0])
        return self.table[:, query_positions].transpose(0, 1)  # (B, H, T, 2K+1)

    def energy_table(self, num_query_positions: int) -> Tensor:
        self.check_positions(torch.tensor([num_query_positions - 1]), self.__dict__["_roles"][0])
        return self.table[:, :num_query_positions]

    def decode_weight_sources(self):
        return [self.table]

    def decode_weight_limit(self) -> int:
        return self.num_positions


class FrozenAbsoluteEnergy(FrozenTable, AbsoluteTableEnergy):
    """aPosNet at search time: the (H, N, N) table of Eq. 8's energies (Section 4.1)."""

    def __init__(self, spec: MixerSpec, num_positions: int):
        super().__init__()
        self._setup_frozen(spec, num_positions, "aPosNet")
        self.num_heads = spec.num_heads
        self.table = nn.Parameter(torch.zeros(spec.num_heads, num_positions, num_positions), requires_grad=False)

    @staticmethod
    def table_of(trained: AbsoluteTableEnergy, num_positions: int) -> Tensor:
        """The (H, N, N) table of a trained aPosNet energy (``posmix-freeze``)."""
        return trained.energy_table(num_positions, num_positions)

    def logits(self, query, query_positions, keys, key_positions):
        query_role, key_role = self.__dict__["_roles"]
        self.check_positions(query_positions, query_role)
        self.check_positions(key_positions, key_role)
        rows = self.table[:, query_positions[:, :, None], key_positions[:, None, :]]  # (H, B, T, S)
        return rows.transpose(0, 1).to(query.dtype)

    def energy_table(self, num_query_positions: int, num_key_positions: int) -> Tensor:
        query_role, key_role = self.__dict__["_roles"]
        self.check_positions(torch.tensor([num_query_positions - 1]), query_role)
        self.check_positions(torch.tensor([num_key_positions - 1]), key_role)
        return self.table[:, :num_query_positions, :num_key_positions]
