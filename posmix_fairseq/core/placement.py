"""Where a part sits: the three attention sublayers (placements) and the two sides, as small immutable
objects instead of strings compared in many files, and the one way their options are named and read
(:class:`OptionScope`; docs/contributing.md, Options are read one way).
"""
from dataclasses import dataclass
from typing import Dict


class OptionScope:
    """Options named after a scope (its ``name``, e.g. ``decoder_cross``): ``--<scope>-<option>`` on the
    command line, ``<scope>_<option>`` (dashes as underscores) in fairseq's argument namespace."""

    name: str

    def __str__(self):
        return self.name

    @property
    def flag_prefix(self) -> str:
        return "--" + self.name.replace("_", "-")

    def flag(self, option: str) -> str:
        return f"{self.flag_prefix}-{option}"

    def attr(self, option: str) -> str:
        """The argparse attribute of ``flag(option)``."""
        return f"{self.name}_{option.replace('-', '_')}"

    def read(self, args, option: str, default=None):
        """The value of ``option`` in ``args`` (a namespace or fairseq config), ``default`` when unset (None)."""
        value = getattr(args, self.attr(option), None)
        return default if value is None else value

    def write(self, args, option: str, value):
        setattr(args, self.attr(option), value)

    def stored(self, args, option: str) -> bool:
        """Whether ``args`` has the attribute at all (stored arguments of older checkpoints)."""
        return hasattr(args, self.attr(option))

    def read_declared(self, args, declared: Dict[str, Dict]) -> Dict:
        """option -> value for the options a registry entry declares (unset: the entry's default)."""
        return {option: self.read(args, option, kwargs.get("default")) for option, kwargs in declared.items()}


@dataclass(frozen=True)
class Side(OptionScope):
    """The encoder (source tokens) or the decoder (target tokens, causal)."""

    name: str  # "encoder" | "decoder"
    role: str  # "source" | "target"
    causal: bool

    @property
    def max_positions_option(self) -> str:
        return f"--max-{self.role}-positions"

    @property
    def max_positions_attr(self) -> str:
        return f"max_{self.role}_positions"


ENCODER = Side("encoder", "source", causal=False)
DECODER = Side("decoder", "target", causal=True)
SIDES = (ENCODER, DECODER)


@dataclass(frozen=True)
class Placement(OptionScope):
    """One attention sublayer: queries from ``query_side``, keys from ``key_side``, owned by ``owner`` (the
    decoder owns cross-attention), held by fairseq's layers as ``layer.<module_attr>``."""

    name: str  # "encoder_self" | "decoder_self" | "decoder_cross"
    owner: Side
    query_side: Side
    key_side: Side
    causal: bool
    cross: bool
    module_attr: str  # "self_attn" | "encoder_attn"

    @property
    def sides(self):
        """The sides whose positions this sublayer reads (queries, keys), each once."""
        return (self.query_side,) if self.query_side == self.key_side else (self.query_side, self.key_side)


ENCODER_SELF = Placement("encoder_self", ENCODER, ENCODER, ENCODER, causal=False, cross=False, module_attr="self_attn")
DECODER_SELF = Placement("decoder_self", DECODER, DECODER, DECODER, causal=True, cross=False, module_attr="self_attn")
DECODER_CROSS = Placement("decoder_cross", DECODER, DECODER, ENCODER, causal=False, cross=True,
                          module_attr="encoder_attn")
PLACEMENTS = (ENCODER_SELF, DECODER_SELF, DECODER_CROSS)
PLACEMENT_BY_NAME = {p.name: p for p in PLACEMENTS}
SELF_ATTENTION = {ENCODER: ENCODER_SELF, DECODER: DECODER_SELF}  # side -> its self-attention placement
SELF_ATTENTION_PLACEMENTS = (ENCODER_SELF, DECODER_SELF)  # the placements of a mixer defined for self-attention only
