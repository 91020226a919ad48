"""Embedding-level position modules: the registry, and the stage that runs them.

An encoder or a decoder takes one position encoding (``--encoder-position-encoding``,
``--decoder-position-encoding``). Additive ones (``sinusoidal``, ``learned``) are fairseq's
own position embeddings; ``none`` removes them. The others transform the embedded input
x = embed_scale * E[tokens] (B, T, D) before the first layer, replacing the additive positions:

    x -> encoding(x, context) -> [LayerNorm if --layernorm-embedding] -> dropout -> layer 1

They run in fairseq's ``layernorm_embedding`` slot (the one point where both
``TransformerEncoderBase.forward_embedding`` and the decoder's ``extract_features`` transform
the embedded input), wrapped by :class:`EmbeddingStage`. ``context`` is the
:class:`~posmix_fairseq.mixers.positions.PositionContext` the encoder/decoder sets before
embedding: true positions, padding mask and (decoding) fairseq's incremental state.
"""
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch
from torch import Tensor, nn

SIDES = ("encoder", "decoder")


@dataclass
class PositionEncodingSpec:
    name: str
    side: str  # "encoder" or "decoder"
    embed_dim: int
    num_heads: int
    dropout: float
    options: Dict  # the encoding's own options, by name

    @property
    def option_prefix(self) -> str:
        return f"--{self.side}"

    @property
    def causal(self) -> bool:
        return self.side == "decoder"


@dataclass
class PositionEncodingEntry:
    builder: Optional[Callable[[PositionEncodingSpec], nn.Module]]  # None: fairseq's additive embeddings
    token_positions: Optional[str]  # fairseq's additive embeddings kept: "sinusoidal", "learned" or None
    first_self_mixer: Optional[str]  # the mixer the side's first self-attention layer must use
    description: str
    options: Dict  # option name -> argparse kwargs (with "default"); flags --encoder-<name>, --decoder-<name>


POSITION_ENCODING_REGISTRY: Dict[str, PositionEncodingEntry] = {}


def register_position_encoding(name: str, *, description: str, token_positions: Optional[str] = None,
                               first_self_mixer: Optional[str] = None, options: Optional[Dict] = None):
    """Decorator registering ``builder(spec) -> module`` (or None, see :class:`PositionEncodingEntry`)."""

    def wrap(builder):
        old = POSITION_ENCODING_REGISTRY.get(name)
        if old is not None and getattr(old.builder, "__qualname__", None) != getattr(builder, "__qualname__", None):
            raise ValueError(f"position encoding {name!r} is already registered")
        POSITION_ENCODING_REGISTRY[name] = PositionEncodingEntry(builder, token_positions, first_self_mixer,
                                                                 description, dict(options or {}))
        return builder

    return wrap


def position_encoding_entry(name: str, option: str) -> PositionEncodingEntry:
    if name not in POSITION_ENCODING_REGISTRY:
        raise ValueError(f"{option}: unknown position encoding {name!r}; valid: "
                         f"{', '.join(sorted(POSITION_ENCODING_REGISTRY))}")
    return POSITION_ENCODING_REGISTRY[name]


class EmbeddingStage(nn.Module):
    """Runs a position encoding on the embedded input, then the original embedding LayerNorm."""

    def __init__(self, encoding: nn.Module, context, layer_norm: Optional[nn.Module]):
        super().__init__()
        self.encoding = encoding
        self.layer_norm = layer_norm
        self.__dict__["_context"] = context  # plain attribute, owned by the encoder/decoder

    def forward(self, x: Tensor) -> Tensor:
        x = self.encoding(x, self._context)
        return self.layer_norm(x) if self.layer_norm is not None else x


def reversed_within_length(lengths: Tensor, length: int) -> Tensor:
    """(B, T) index reversing each left-aligned row within its length (padding kept in place)."""
    p = torch.arange(length, device=lengths.device).unsqueeze(0)
    lengths = lengths.unsqueeze(1)
    return torch.where(p < lengths, lengths - 1 - p, p)
