"""The longest source and target a model takes, read from its position-indexed tables.

A model extrapolates on a side when no table is indexed by that side's positions (sinusoidal
embeddings, clipped relative embeddings, T5 buckets, recurrent encodings, Gaussian or convolution
kernels): its ``--max-source-positions`` / ``--max-target-positions`` can then be raised at
generation. A side with a table stops at the table's size: fairseq's learned position embeddings
(as many rows as the max positions), the learned n~ / m~ tables of aPosNet and rPosNet
(:class:`~posmix_fairseq.core.position_tables.LearnedPositionTable`), PosNet-Embed's kernels
(``--<side>-posnet-embed-max-positions``), PosNet-Attn's kernels, LinearNet's mixing matrix and the frozen
search-time energy tables. Each of these raises a ValueError naming its option beyond its size
(README, "Length generalisation"); this module reads the same sizes off the modules, so it works on
a model built on torch's meta device (no weights needed). Lengths count tokens with the EOS, as
fairseq's size filter does.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from torch import nn

from ...core.placement import SIDES
from ...core.protocols import PositionLimits

ROLES = tuple(side.role for side in SIDES)  # "source", "target"


@dataclass(frozen=True)
class Limit:
    tokens: int      # the longest sentence (tokens, EOS included) the side takes
    option: str      # the option that sizes the table
    module: str      # where the table is

    def describe(self, side: str) -> str:
        return f"{self.tokens} {side} tokens ({self.option}, {self.module})"


def _tables(model: nn.Module) -> List[Tuple[str, int, str, str]]:
    """(side, size, option, module name) of every position-indexed table of ``model``: each module
    with such tables tells them itself (``position_limits()``: (side, positions, option) each)."""
    return [(role, int(size), option, name) for name, module in model.named_modules()
            for role, size, option in (module.position_limits() if isinstance(module, PositionLimits) else ())]


def position_limits(model: nn.Module) -> Dict[str, Optional[Limit]]:
    """{"source": Limit or None, "target": Limit or None}; None: the side extrapolates."""
    limits: Dict[str, Optional[Limit]] = {role: None for role in ROLES}
    for side, size, option, name in _tables(model):
        if limits[side] is None or size < limits[side].tokens:
            limits[side] = Limit(size, option, name)
    return limits


def configured_limits(model: nn.Module) -> Dict[str, int]:
    """The model's own --max-source-positions / --max-target-positions."""
    src, tgt = model.max_positions()
    return {"source": int(src), "target": int(tgt)}
