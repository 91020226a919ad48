"""The token-mixer interface and registry.

A token mixer replaces one attention sublayer of the Transformer (encoder self-attention,
decoder self-attention or decoder cross-attention). It keeps fairseq's ``MultiheadAttention``
call signature, so fairseq's own layers call it unchanged::

    out, attn = mixer(query, key, value, key_padding_mask=..., incremental_state=...,
                      need_weights=..., static_kv=..., attn_mask=..., need_head_weights=...)

with ``query`` of shape (tgt_len, batch, embed_dim), ``key``/``value`` (src_len, batch, kdim),
``key_padding_mask`` (batch, src_len) True at padding, and ``attn_mask`` an additive
(tgt_len, src_len) float mask. It exposes ``num_heads`` and ``head_dim`` (read by fairseq's
decoder layer) and, being an incremental-state module, ``_get_input_buffer``,
``_set_input_buffer`` and ``reorder_incremental_state`` (called by beam search).

Adding a mixer = one small module that calls :func:`register_mixer`.
"""
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch
from torch import Tensor, nn
from fairseq.incremental_decoding_utils import with_incremental_state

PLACEMENTS = ("encoder_self", "decoder_self", "decoder_cross")
POSITION_EMBEDDING_KINDS = ("sinusoidal", "learned")


@dataclass
class MixerSpec:
    """Everything a mixer builder needs to know about the sublayer it fills."""

    name: str
    placement: str  # one of PLACEMENTS
    layer_idx: int
    num_layers: int  # layers of this encoder/decoder (per-layer options are lists over them)
    embed_dim: int
    num_heads: int
    kdim: int
    attention_dropout: float
    gated: bool
    max_relative_position: int  # K: relative distances are clipped to [-K, K]
    position_embedding: str  # one of POSITION_EMBEDDING_KINDS
    length_ratio: float  # gamma; 1.0 for self-attention
    max_query_positions: int
    max_key_positions: int
    query_positions_option: str  # the command-line option that bounds query positions
    key_positions_option: str
    shared_tables: "object" = None  # positions.SharedPositionTables of the encoder/decoder
    position_context: "object" = None  # positions.PositionContext (decoder sublayers)
    options: Dict = None  # the mixer's own options (declared in register_mixer), by name

    @property
    def option_prefix(self) -> str:
        return "--" + self.placement.replace("_", "-")

    @property
    def is_cross(self) -> bool:
        return self.placement == "decoder_cross"


@dataclass
class MixerEntry:
    builder: Callable[[MixerSpec], nn.Module]
    gated_by_default: bool
    uses_positions: bool
    description: str
    default_position_embedding: str
    options: Dict  # option name -> argparse kwargs (with "default"); flag: --<sublayer>-<name>


MIXER_REGISTRY: Dict[str, MixerEntry] = {}


def register_mixer(name: str, *, gated_by_default: bool, uses_positions: bool, description: str,
                   default_position_embedding: str = "learned", options: Optional[Dict] = None):
    """Decorator registering ``builder(spec) -> module`` under ``name``.

    ``options`` declares the mixer's own command-line options, e.g.
    ``{"gaussian-sigma": dict(type=float, default=1.0, help=...)}`` becomes
    ``--encoder-self-gaussian-sigma`` etc.; the builder reads ``spec.options["gaussian-sigma"]``.

    Re-registering the same builder (the package imported twice) is a no-op; registering a
    different builder under a taken name raises.
    """

    def wrap(builder):
        old = MIXER_REGISTRY.get(name)
        if old is not None and old.builder.__qualname__ != builder.__qualname__:
            raise ValueError(f"token mixer {name!r} is already registered")
        MIXER_REGISTRY[name] = MixerEntry(builder, gated_by_default, uses_positions, description,
                                          default_position_embedding, dict(options or {}))
        return builder

    return wrap


def mixer_entry(name: str, option: str) -> MixerEntry:
    if name not in MIXER_REGISTRY:
        raise ValueError(
            f"{option}: unknown token mixer {name!r}; valid mixers: {', '.join(sorted(MIXER_REGISTRY))}"
        )
    return MIXER_REGISTRY[name]


def build_mixer(spec: MixerSpec) -> nn.Module:
    return mixer_entry(spec.name, spec.option_prefix + "-mixer").builder(spec)


@with_incremental_state
class BatchFirstIncrementalState(nn.Module):
    """A module that keeps a dict of tensors in fairseq's incremental state, each with the batch
    as its first dimension; beam search's reordering index-selects every entry."""

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "mix_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "mix_state", buffer)

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        buffer = self._get_input_buffer(incremental_state)
        if buffer:
            for key, value in buffer.items():
                if value is not None:
                    buffer[key] = value.index_select(0, new_order)
            incremental_state = self._set_input_buffer(incremental_state, buffer)
        return incremental_state


class TokenMixer(BatchFirstIncrementalState):
    """Base class of the mixers written in this package (fairseq's MHA is used as is).

    Subclasses implement ``forward`` with the signature documented in this module.
    """

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim {embed_dim} is not divisible by the number of attention heads {num_heads}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
