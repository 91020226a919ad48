"""The token-mixer registry (:func:`register_mixer`), the spec a mixer is built from, what its side lends it, and
the options several mixers declare (K, the kind of a mixer's own position table, relative embeddings)."""
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Tuple

from torch import nn

from ...core.number_ranges import DROPOUT, POSITIVE_INT  # noqa: F401  (the ranges mixers declare most)
from ...core.placement import Placement
from ...core.position_tables import RELATIVE_EMBEDDING_HEADS, RelativePositionTable, SharedPositionTables
from ...core.positions import PositionRoute
from ...core.registry import Entry, Registry


@dataclass(frozen=True)
class MixerSpec:
    """The configuration of the sublayer a mixer builder fills (plain data; what the owning encoder or
    decoder lends its sublayers is a :class:`SideResources`)."""

    name: str
    placement: Placement
    layer_idx: int
    num_layers: int  # layers of this encoder/decoder (per-layer options are lists over them)
    embed_dim: int
    num_heads: int
    kdim: int
    attention_dropout: float
    gated: bool
    length_ratio: float  # gamma; 1.0 for self-attention
    max_query_positions: int
    max_key_positions: int
    options: Dict = field(default_factory=dict)  # the mixer's own options (declared in register_mixer)
    dropout: float = 0.0  # the model's --dropout (PosNet-Attn's default rate)
    # search-time model: each side's table size {"source": N_s, "target": N_t}; None: a trained model
    frozen_positions: Optional[Dict[str, int]] = None

    def flag(self, option: str) -> str:
        return self.placement.flag(option)

    def position_table_size(self, option: str, table: str) -> Tuple[int, str]:
        """(P, its flag): the positions (own option ``option``) of the mixer's position-indexed ``table``. The model's
        max positions may not exceed P (checked here, at build time), so fairseq's size filter handles
        longer sentences."""
        size, flag = int(self.options[option]), self.flag(option)  # >= 1: its declared range
        for side, limit in ((self.placement.query_side, self.max_query_positions),
                            (self.placement.key_side, self.max_key_positions)):
            if limit is not None and limit > size:
                raise ValueError(
                    f"{side.max_positions_option} {limit} exceeds the {table} of {size} positions ({flag}): set "
                    f"{side.max_positions_option} {size} (fairseq then drops longer training sentences, rejects "
                    f"longer test sentences and stops decoding there; --skip-invalid-size-inputs-valid-test skips "
                    f"them) or raise {flag}")
        return size, flag

    def energy(self, trained: Callable[..., nn.Module], resources: "SideResources") -> nn.Module:
        """The sublayer's energy: ``trained(spec, resources)``, or in a search-time model the frozen table
        that the mixer's registry entry declares (its trained parameters are then never built)."""
        if self.frozen_positions is None:
            return trained(self, resources)
        return MIXER_REGISTRY.get(self.name, self.flag("mixer")).frozen_energy(self)


@dataclass(frozen=True)
class SideResources:
    """What the encoder or decoder that owns a sublayer lends the mixers it builds: live objects, not
    configuration. ``shared_tables``: the tables its layers share; ``route``: the positions of its forward call."""

    shared_tables: SharedPositionTables
    route: PositionRoute


@dataclass
class MixerEntry(Entry):
    placements: Tuple[Placement, ...] = ()  # the sublayers the mixer is defined for
    gated_by_default: bool = False
    uses_positions: bool = False  # the mixer gives its sublayer a position signal
    equation: str = ""  # its energy e_nm or weights a_nm, one line (the docs' mixer table)
    parameters: str = ""  # its parameters per layer at training time (the docs' mixer table)
    # frozen_energy(spec): the search-time table of a position-only energy (GPA Sections 4.1-4.2)
    frozen_energy: Optional[Callable] = None
    # option -> (other option, value): an own option read only when the other one has that value
    read_when: Dict[str, Tuple[str, str]] = field(default_factory=dict)

    def unread_condition(self, option: str, options: Dict) -> Optional[Tuple[str, str]]:
        """(other option, value) when the mixer declares ``option`` but does not read it under its
        ``options`` (option -> value, unset ones at their defaults); None when it reads it."""
        condition = self.read_when.get(option)
        if condition is None or options.get(condition[0]) == condition[1]:
            return None
        return condition

    def available_at(self, scope) -> bool:
        return scope in self.placements

    def where(self, option: str) -> str:
        return ", ".join(placement.flag(option) for placement in self.placements)


MIXER_REGISTRY: Registry[MixerEntry] = Registry("token mixer")


def register_mixer(name: str, *, placements: Tuple[Placement, ...], gated_by_default: bool, uses_positions: bool,
                   description: str, equation: str = "", parameters: str = "", options: Optional[Dict] = None,
                   frozen_energy: Optional[Callable] = None, read_when: Optional[Dict[str, Tuple[str, str]]] = None):
    """Decorator registering ``builder(spec, resources) -> module`` (a :class:`MixerSpec`, the owning
    side's :class:`SideResources`) under ``name``.

    ``placements`` are the sublayers the mixer is defined for (``PLACEMENTS``, ``SELF_ATTENTION_PLACEMENTS``,
    ``(ENCODER_SELF,)``): ``--<sublayer>-mixer`` offers it there only, and its options get flags only there.
    ``description`` (with its paper), ``equation`` and ``parameters`` are what the docs' tables show.
    ``options`` declares the mixer's own options (``{"gaussian-sigma": dict(type=POSITIVE_FLOAT, ...)}``
    becomes ``--encoder-self-gaussian-sigma`` etc., read as ``spec.options["gaussian-sigma"]``; a number
    declares its range, core/number_ranges.py); a flag given for a sublayer whose mixer does not declare it is
    an error, and so is one that ``read_when`` says is unread (``{"max-relative-position": ("gaussian-impl",
    "window")}``). ``frozen_energy`` (a class taking the spec, with ``table_sides(placement)`` and
    ``table_from(trained_energy)``) makes the mixer freezable by ``posmix-freeze``; its builder then gets its
    energy from :meth:`MixerSpec.energy`.
    """
    if not placements:
        raise ValueError(f"token mixer {name!r}: declare the sublayers it is defined for (placements=...)")

    def wrap(builder):
        MIXER_REGISTRY.register(name, MixerEntry(builder, description, dict(options or {}), tuple(placements),
                                                 gated_by_default, uses_positions, equation, parameters,
                                                 frozen_energy, dict(read_when or {})))
        return builder

    return wrap


def frozen_mixers():
    """The names of the mixers whose energies ``posmix-freeze`` can freeze."""
    return [name for name, entry in MIXER_REGISTRY.items() if entry.frozen_energy is not None]


def build_mixer(spec: MixerSpec, resources: SideResources) -> nn.Module:
    """The mixer of ``spec``: a clear error where its placement is not one the mixer is defined for. (The
    values of its options were checked where they were read: :meth:`MixerEntry.check_options`.)"""
    return MIXER_REGISTRY.get_at(spec.name, spec.placement, "mixer").builder(spec, resources)


def max_relative_position_option():
    """K, the clipping distance of relative positions (declared by the mixers that read it)."""
    return {"max-relative-position": dict(type=POSITIVE_INT, default=16, metavar="K",
                                          help="clip relative distances to [-K, K] (default 16; 8 in *_big)")}


def position_table_option(default: str):
    """The kind of the mixer's own position table (absolute n~, m~ or relative a^K, a^V)."""
    return {"position-table": dict(choices=("sinusoidal", "learned"), default=default,
                                   help="position table of this position-aware mixer: sinusoidal or learned "
                                        "(default: aposnet sinusoidal, the others learned; GPA Section 5.2)")}


def relative_embeddings_options(default: str):
    """How the heads of a layer use its relative-distance embeddings (GPA Table 8 or Shaw et al. 2018)."""
    return {"relative-embedding-heads": dict(
        choices=RELATIVE_EMBEDDING_HEADS, default=default,
        help="relative-distance embeddings of a layer: sliced (one D-dim vector per distance, head h uses "
             "slice h; GPA Table 8) or shared (one D_h-dim vector for all heads; Shaw et al. 2018). Default: "
             "the paper of the mixer/arch (docs/choices.md)")}


def relative_position_table(spec: MixerSpec, k: int, kind: str):
    """The relative-distance table of ``spec``'s mixer, laid out by its own options and, for checkpoints
    stored without the defaults version, their stored legacy reading ``relative-sinusoids head``."""
    return RelativePositionTable(k, spec.embed_dim, spec.num_heads, kind, spec.options["relative-embedding-heads"],
                                 spec.options.get("relative-sinusoids") or "d-model")


def max_relative_position(spec: MixerSpec) -> int:
    """K of ``spec`` (its range is checked with the other options, by :func:`build_mixer`)."""
    return int(spec.options["max-relative-position"])
