"""The small protocols of a model's modules (docs/contributing.md, "Small protocols"): code that walks a model
asks ``isinstance(module, <protocol>)``, never for a concrete mixer class, and a module answers by having the
method."""
from typing import Protocol, Sequence, Tuple, runtime_checkable

from .position_tables import PositionFigure


@runtime_checkable
class PositionLimits(Protocol):
    """A module with position-indexed tables (learned tables, PosNet kernels, LinearNet's matrix, frozen
    tables, fairseq's learned embeddings through the encoder/decoder)."""

    def position_limits(self) -> Sequence[Tuple[str, int, str]]:
        """(role, positions, option) of each table: a position >= positions is an error naming option."""


@runtime_checkable
class PositionFigures(Protocol):
    """A module whose position tables ``posmix-plot`` draws: a layer's energy or values
    (``position_figure(positions, query_positions, weights)``), or a side's position encoding
    (``position_figure(positions)``)."""

    def position_figure(self, positions: int, *rest) -> PositionFigure:
        """What the figure shows for sentences of ``positions`` tokens."""


@runtime_checkable
class Table8Parameters(Protocol):
    """A frozen energy's GPA Table 8 formula (``posmix-freeze``'s report)."""

    def table8_parameters(self, gated: bool, d: int, n_query: int, n_key: int) -> Tuple[int, int]:
        """(training, search) weights of one layer (no biases or LayerNorm)."""
