"""Embedding-level position modules: the registry, fairseq's own additive embeddings, and the stage
that runs the others on the embedded input x = embed_scale * E[tokens] before the first layer:

    x -> encoding(x, frame) -> [LayerNorm if --layernorm-embedding] -> dropout -> layer 1

Why the stage sits in fairseq's ``layernorm_embedding`` slot: docs/choices.md; the flags: docs/position-encodings.md.
"""
from dataclasses import dataclass
from typing import Callable, Dict, Optional

from torch import Tensor, nn

from ..core.placement import Side
from ..core.positions import PositionRoute
from ..core.registry import Entry, Registry


@dataclass
class PositionEncodingSpec:
    name: str
    side: Side
    embed_dim: int
    num_heads: int
    dropout: float
    options: Dict  # the encoding's own options, by name
    embed_scale: float = 1.0  # the factor of the word embeddings (sqrt(D) unless --no-scale-embedding)
    # the absolute table n~ of the side's self-attention mixer (built on first call; an error if it has none)
    mixer_table: Optional[Callable[[], nn.Module]] = None


@dataclass
class PositionEncodingEntry(Entry):
    token_positions: Optional[str] = None  # fairseq's additive embeddings kept (the builder gives None): their kind


POSITION_ENCODING_REGISTRY: Registry[PositionEncodingEntry] = Registry("position encoding")


def register_position_encoding(name: str, *, description: str, token_positions: Optional[str] = None,
                               options: Optional[Dict] = None):
    """Decorator registering ``builder(spec) -> module`` (or None, see :class:`PositionEncodingEntry`)."""

    def wrap(builder: Callable):
        POSITION_ENCODING_REGISTRY.register(name, PositionEncodingEntry(builder, description, dict(options or {}),
                                                                        token_positions))
        return builder

    return wrap


@register_position_encoding("sinusoidal", token_positions="sinusoidal",
                            description="sinusoidal absolute position embeddings (Vaswani et al. 2017)")
@register_position_encoding("learned", token_positions="learned",
                            description="learned absolute position embeddings (one vector per position)")
@register_position_encoding("none", description="no position embeddings")
def fairseq_positions(spec):
    """No module: fairseq's own embeddings (beyond a learned table, a clear error names the option
    that sizes it), or none, switched per side by ``token_positions``."""
    return None


class EmbeddingStage(nn.Module):
    """A position encoding on the embedded input (if any), then fairseq's embedding LayerNorm (if any)."""

    def __init__(self, encoding: Optional[nn.Module], route: PositionRoute, layer_norm: Optional[nn.Module]):
        super().__init__()
        self.encoding = encoding
        self.layer_norm = layer_norm
        self._route = route  # not a module: the encoder/decoder owns it

    def forward(self, x: Tensor) -> Tensor:
        if self.encoding is not None:
            x = self.encoding(x, self._route.frame)
        return self.layer_norm(x) if self.layer_norm is not None else x
