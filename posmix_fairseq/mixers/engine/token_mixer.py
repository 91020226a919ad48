"""The token-mixer interface.

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
"""
from ...core.incremental import BatchFirstIncrementalState


class TokenMixer(BatchFirstIncrementalState):
    """Base class of the mixers written in this package (fairseq's MHA is used as is)."""

    #: the mixer stands for a removed sublayer (it adds 0): the layer replaces its LayerNorm by the identity
    removes_sublayer = False

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim {embed_dim} is not divisible by the number of attention heads {num_heads}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
