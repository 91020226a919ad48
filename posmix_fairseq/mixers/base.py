"""The token-mixer interface and registry.

A token mixer replaces one attention sublayer of the Transformer (encoder self-attention,
decoder self-attention or decoder cross-attention). It keeps fairseq's ``MultiheadAttention``
call signature, so fairseq's own layers call it unchanged::

    out, attn = mixer(query, key, value, key_padding_mask=..., incremental_state=...,
                      need_weights=..., static_kv=..., attn_mask=..., need_head_weights=...)

with ``query`` of shape (tgt_len, batch, embed_dim), ``key``/``value`` (src_len, batch, kdim),
``key_padding_mask`` (batch, src_len) True at padding, and ``attn_mask`` an additive
(tgt_len, src_len) float mask (0 or -inf). It exposes ``num_heads`` and ``head_dim`` (read by
fairseq's decoder layer) and, being an incremental-state module, ``_get_input_buffer``,
``_set_input_buffer`` and ``reorder_incremental_state`` (called by beam search). Positions come
from the :class:`~posmix_fairseq.core.positions.PositionFrame` of the running forward call.

Adding a mixer = one small module named like the mixer that calls :func:`register_mixer`.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional

from torch import nn

from ..core.incremental import BatchFirstIncrementalState
from ..core.placement import Placement
from ..core.position_tables import (RELATIVE_EMBEDDING_HEADS, RELATIVE_SINUSOIDS, RelativePositionTable,
                                    SharedPositionTables)
from ..core.positions import PositionRoute
from ..core.registry import Entry, Registry

POSITION_TABLE_KINDS = ("sinusoidal", "learned")
DEFAULT_MAX_RELATIVE_POSITION = 16


@dataclass
class MixerSpec:
    """Everything a mixer builder needs to know about the sublayer it fills."""

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
    shared_tables: SharedPositionTables = None  # tables shared by the layers of the owning side
    route: PositionRoute = None  # the owning side's positions route
    options: Dict = field(default_factory=dict)  # the mixer's own options (declared in register_mixer)
    dropout: float = 0.0  # the model's --dropout (PosNet-Attn's default rate)

    def flag(self, option: str) -> str:
        return self.placement.flag(option)


@dataclass
class MixerEntry(Entry):
    gated_by_default: bool = False
    uses_positions: bool = False  # the mixer gives its sublayer a position signal


MIXER_REGISTRY: Registry[MixerEntry] = Registry("token mixer")


def register_mixer(name: str, *, gated_by_default: bool, uses_positions: bool, description: str,
                   options: Optional[Dict] = None):
    """Decorator registering ``builder(spec) -> module`` under ``name``.

    ``options`` declares the mixer's own command-line options, e.g.
    ``{"gaussian-sigma": dict(type=float, default=1.0, help=...)}`` becomes
    ``--encoder-self-gaussian-sigma`` etc.; the builder reads ``spec.options["gaussian-sigma"]``.
    A flag given for a sublayer whose mixer does not declare it is an error.
    """

    def wrap(builder):
        MIXER_REGISTRY.register(name, MixerEntry(builder, description, dict(options or {}), gated_by_default,
                                                 uses_positions))
        return builder

    return wrap


def build_mixer(spec: MixerSpec) -> nn.Module:
    return MIXER_REGISTRY.get(spec.name, spec.flag("mixer")).builder(spec)


def max_relative_position_option():
    """K, the clipping distance of relative positions (declared by the mixers that read it)."""
    return {"max-relative-position": dict(type=int, default=DEFAULT_MAX_RELATIVE_POSITION, metavar="K",
                                          help=f"clip relative distances to [-K, K] (default "
                                               f"{DEFAULT_MAX_RELATIVE_POSITION}; 8 in *_big)")}


def position_table_option(default: str):
    """The kind of the mixer's own position table (absolute n~, m~ or relative a^K, a^V)."""
    return {"position-table": dict(choices=POSITION_TABLE_KINDS, default=default,
                                   help="position table of this position-aware mixer: sinusoidal or learned "
                                        "(default: aposnet sinusoidal, the others learned; GPA Section 5.2)")}


def relative_embeddings_options(default: str, sinusoids: bool = False):
    """How the heads of a layer use its relative-distance embeddings (sliced: one D-vector per
    distance, head h uses slice h, as Gated position-based attention counts them in Table 8;
    shared: one D_h-vector per distance for all heads, as Shaw et al. 2018), and, for the mixers
    that offer sinusoidal relative tables, which sinusoids (see
    :class:`~posmix_fairseq.core.position_tables.RelativePositionTable`)."""
    options = {"relative-embedding-heads": dict(
        choices=RELATIVE_EMBEDDING_HEADS, default=default,
        help="relative-distance embeddings of a layer: sliced (one D-dim vector per distance, head h uses "
             "slice h; GPA Table 8) or shared (one D_h-dim vector for all heads; Shaw et al. 2018). Default: "
             "the paper of the mixer/arch (README, Choices, issue 11)")}
    if sinusoids:
        options["relative-sinusoids"] = dict(
            choices=RELATIVE_SINUSOIDS, default=None,
            help="sinusoidal relative tables: d-model (the first D_h dims of the D-dim encoding, Analysis of "
                 "positional encodings Eqs. 8-9; default) or head (a D_h-dim encoding over all frequencies: "
                 "only for checkpoints made before issue 11)")
    return options


def relative_position_table(spec: MixerSpec, k: int, kind: str):
    """The relative-distance table of ``spec``'s mixer, laid out by its own options."""
    sinusoids = spec.options.get("relative-sinusoids")
    if sinusoids is not None and kind != "sinusoidal":
        raise ValueError(f"{spec.flag('relative-sinusoids')} {sinusoids} applies to sinusoidal relative tables only; "
                         f"{spec.flag('position-table')} is {kind}: drop the flag or make the table sinusoidal")
    return RelativePositionTable(k, spec.embed_dim, spec.num_heads, kind, spec.options["relative-embedding-heads"],
                                 sinusoids or "d-model")


def max_relative_position(spec: MixerSpec) -> int:
    k = spec.options["max-relative-position"]
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"{spec.flag('max-relative-position')} must be an integer >= 1 (got {k!r})")
    return k


class TokenMixer(BatchFirstIncrementalState):
    """Base class of the mixers written in this package (fairseq's MHA is used as is)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim {embed_dim} is not divisible by the number of attention heads {num_heads}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
