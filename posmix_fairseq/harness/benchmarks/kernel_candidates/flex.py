"""rPosNet and aPosNet mixing written for FlexAttention (``torch.nn.attention.flex_attention``): what
a user would write instead of this package's kernels, measured against them by posmix-bench-gpu.

FlexAttention computes softmax(score_mod(q.k / sqrt(d))) V over the keys a block mask allows. The
position energies of GPA do not depend on token content, so the
``score_mod`` ignores the q.k score and returns the table entry (the queries and keys handed to
FlexAttention are zeros of the smallest head size it accepts, 16, so that the unused q.k costs
least):

- rPosNet (Eqs. 9-10): ``table[h, p_bq, clamp(floor(gamma p_bq) - kv, -K, K) + K]``;
- aPosNet (Eq. 8): ``table[h, p_bq, kv]``;

with p_bq the true position of query q of row b. The ``mask_mod`` allows key kv when kv <
key_lengths[b] and, when causal, kv <= p_bq. Same conventions as the other primitives
(:mod:`posmix_fairseq.kernels`): left-aligned values (B, H, S, Dh), a query without any allowed
key gets 0. FlexAttention's softmax is fp32 and its output has the dtype of the values.

On a GPU FlexAttention runs compiled (``compiled=True``: ``torch.compile(flex_attention)``, a
Triton kernel generated from the two functions); on the CPU the eager form materialises the
scores, which is how the tests check these functions against the dense references.
"""
import functools

import torch
from torch import Tensor

from posmix_fairseq.kernels.common import centres, check_mixing_inputs

#: The head size of the dummy queries and keys (FlexAttention's smallest).
DUMMY_HEAD_DIM = 16


def _flex():
    # optional: FlexAttention exists in torch 2.5 and later; only the flex candidate needs it
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    return flex_attention, create_block_mask


@functools.lru_cache(maxsize=None)
def _compiled_flex():
    flex_attention, _ = _flex()
    return torch.compile(flex_attention, dynamic=False)


def relative_score_mod(table: Tensor, query_positions: Tensor, centre: Tensor):
    """score_mod of rPosNet: the energy of query q (position p, centre floor(gamma p)) and key kv."""
    k = (table.size(-1) - 1) // 2

    def score_mod(score, b, h, q_idx, kv_idx):
        index = torch.clamp(centre[b, q_idx] - kv_idx, -k, k) + k
        return table[h, query_positions[b, q_idx], index].to(score.dtype)
    return score_mod


def absolute_score_mod(table: Tensor, query_positions: Tensor):
    """score_mod of aPosNet: the energy of query q (position p) and key position kv."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return table[h, query_positions[b, q_idx], kv_idx].to(score.dtype)
    return score_mod


def key_mask_mod(query_positions: Tensor, key_lengths: Tensor, causal: bool):
    """mask_mod: a real key (kv < length) and, when causal, kv <= p."""
    def mask_mod(b, h, q_idx, kv_idx):
        allowed = kv_idx < key_lengths[b]
        if causal:
            allowed = allowed & (kv_idx <= query_positions[b, q_idx])
        return allowed
    return mask_mod


def _mix(score_mod, query_positions: Tensor, values: Tensor, key_lengths: Tensor, causal: bool,
         compiled: bool) -> Tensor:
    flex_attention, create_block_mask = _flex()
    batch, heads, keys, _ = values.shape
    steps = query_positions.size(1)
    block_mask = create_block_mask(key_mask_mod(query_positions, key_lengths, causal), batch, None, steps, keys,
                                   device=values.device, _compile=compiled)
    dummy_q = values.new_zeros(batch, heads, steps, DUMMY_HEAD_DIM)
    dummy_k = values.new_zeros(batch, heads, keys, DUMMY_HEAD_DIM)
    fn = _compiled_flex() if compiled else flex_attention
    out = fn(dummy_q, dummy_k, values, score_mod=score_mod, block_mask=block_mask)
    # a row without keys (length 0; causal rows always have key 0 otherwise) gets 0, as everywhere
    return out.masked_fill((key_lengths == 0)[:, None, None, None], 0.0)


def relative_mixing_flex(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                         length_ratio: float = 1.0, causal: bool = False, compiled: bool = False) -> Tensor:
    """rPosNet mixing (Eqs. 9-10) through FlexAttention; (B, H, T, Dh). See the module docstring."""
    check_mixing_inputs("relative_mixing_flex", table, query_positions, values, key_lengths)
    score_mod = relative_score_mod(table, query_positions, centres(query_positions, length_ratio))
    return _mix(score_mod, query_positions, values, key_lengths, causal, compiled)


def absolute_mixing_flex(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                         causal: bool = False, compiled: bool = False) -> Tensor:
    """aPosNet mixing (Eq. 8) through FlexAttention; (B, H, T, Dh). The table's key axis must cover
    the value slots (Pk >= S)."""
    check_mixing_inputs("absolute_mixing_flex", table, query_positions, values, key_lengths,
                        table_keys=table.size(2))
    if table.size(2) < values.size(2):
        raise ValueError(f"absolute_mixing_flex: the table's key axis ({table.size(2)}) must cover the "
                         f"{values.size(2)} value slots")
    return _mix(absolute_score_mod(table, query_positions), query_positions, values, key_lengths, causal, compiled)
