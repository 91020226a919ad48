"""Where a part sits: the three attention sublayers (placements) and the two sides.

Small immutable objects instead of strings compared in many files: a placement knows which side
its queries and keys come from, whether it is causal or cross-attention, and its flag prefix.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    """The encoder (source tokens) or the decoder (target tokens, causal)."""

    name: str  # "encoder" | "decoder"
    role: str  # "source" | "target"
    causal: bool

    @property
    def flag_prefix(self) -> str:
        return f"--{self.name}"

    def flag(self, option: str) -> str:
        return f"{self.flag_prefix}-{option}"

    @property
    def max_positions_option(self) -> str:
        return f"--max-{self.role}-positions"

    def __str__(self):
        return self.name


ENCODER = Side("encoder", "source", causal=False)
DECODER = Side("decoder", "target", causal=True)
SIDES = (ENCODER, DECODER)


@dataclass(frozen=True)
class Placement:
    """One attention sublayer: queries from ``query_side``, keys from ``key_side``; the module that
    owns it is ``owner`` (the decoder owns cross-attention)."""

    name: str  # "encoder_self" | "decoder_self" | "decoder_cross"
    owner: Side
    query_side: Side
    key_side: Side
    causal: bool
    cross: bool

    @property
    def flag_prefix(self) -> str:
        return "--" + self.name.replace("_", "-")

    def flag(self, option: str) -> str:
        return f"{self.flag_prefix}-{option}"

    def attr(self, option: str) -> str:
        """The argparse attribute of ``flag(option)``."""
        return f"{self.name}_{option.replace('-', '_')}"

    def __str__(self):
        return self.name


ENCODER_SELF = Placement("encoder_self", ENCODER, ENCODER, ENCODER, causal=False, cross=False)
DECODER_SELF = Placement("decoder_self", DECODER, DECODER, DECODER, causal=True, cross=False)
DECODER_CROSS = Placement("decoder_cross", DECODER, DECODER, ENCODER, causal=False, cross=True)
PLACEMENTS = (ENCODER_SELF, DECODER_SELF, DECODER_CROSS)
PLACEMENT_BY_NAME = {p.name: p for p in PLACEMENTS}
