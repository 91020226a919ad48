"""One decoding step of rPosNet decoder self-attention with a constant-size state.

Gated position-based attention (/work/shared/papers/000_56daf9cf6f59e3ab.txt), Eq. 10 with
gamma = 1 and causal keys: the query at position t sees key t - i at distance i. Distances
0..K-1 have their own energies (index K + i of the table row of position t); every key at
distance >= K shares index 2K. So a step needs only the last K values, the sum of the older ones
and their count (design note "A fact worth building on later"): O(K Dh) time and memory per step,
whatever t.

    out = [ sum_{i<K, valid} exp(E[K+i]) v_i + exp(E[2K]) far_sum ] / Z,
    Z   = sum_{i<K, valid} exp(E[K+i]) + far_count exp(E[2K])
"""
from typing import Optional

import torch
from torch import Tensor

from .common import compute_dtype


def check_decode_inputs(energy_rows: Tensor, window_values: Tensor, window_valid: Tensor, far_sum: Tensor,
                        far_count: Tensor) -> int:
    """Validate shapes; returns K."""
    if window_values.dim() != 4:
        raise ValueError(f"relative_decode_step: window_values must be (B, H, K, Dh), got {tuple(window_values.shape)}")
    batch, heads, k, dim = window_values.shape
    if energy_rows.shape != (batch, heads, 2 * k + 1):
        raise ValueError(f"relative_decode_step: energy_rows must be (B, H, 2K+1) = {(batch, heads, 2 * k + 1)} "
                         f"for a window of K={k}, got {tuple(energy_rows.shape)}")
    if window_valid.shape != (batch, k) or window_valid.dtype != torch.bool:
        raise ValueError(f"relative_decode_step: window_valid must be a bool tensor (B, K) = {(batch, k)}, "
                         f"got {tuple(window_valid.shape)} {window_valid.dtype}")
    if far_sum.shape != (batch, heads, dim):
        raise ValueError(f"relative_decode_step: far_sum must be (B, H, Dh) = {(batch, heads, dim)}, "
                         f"got {tuple(far_sum.shape)}")
    if far_count.shape != (batch,) or far_count.is_floating_point():
        raise ValueError(f"relative_decode_step: far_count must be an integer tensor (B,) = ({batch},), "
                         f"got {tuple(far_count.shape)} {far_count.dtype}")
    return k


def relative_decode_reference(energy_rows: Tensor, window_values: Tensor, window_valid: Tensor, far_sum: Tensor,
                              far_count: Tensor) -> Tensor:
    """(B, H, Dh) context of the current query, fp32 softmax; 0 when it has no key."""
    k = window_values.size(2)
    dtype = compute_dtype(window_values)
    rows = energy_rows.to(dtype)
    near = rows[..., k:2 * k].masked_fill(~window_valid[:, None, :], float("-inf"))  # (B, H, K)
    count = far_count.to(dtype)
    far = (rows[..., 2 * k] + torch.log(count.clamp(min=1))[:, None]).masked_fill((far_count == 0)[:, None],
                                                                                   float("-inf"))
    logits = torch.cat([near, far[..., None]], dim=-1)
    dead = torch.isneginf(logits).all(dim=-1, keepdim=True)
    probs = torch.softmax(logits.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    far_mean = far_sum.to(dtype) / count.clamp(min=1)[:, None, None]
    out = torch.einsum("bhk,bhkd->bhd", probs[..., :k], window_values.to(dtype)) + probs[..., k, None] * far_mean
    return out.to(window_values.dtype)


class RelativeDecodeState:
    """The constant-size self-attention state of one rPosNet decoder layer during search.

    ``window_values`` (B, H, K, Dh): slot i holds the value at distance i from the newest token
    (slot 0 = the newest); ``window_valid`` (B, K) bool; ``far_sum`` (B, H, Dh) float32 (float64
    for float64 values) sum of the values at distance >= K, ``far_count`` (B,) their number. Its
    size does not depend on t. Usage per step: ``state.push(v_t)`` (the current token is its own
    key at distance 0), then ``relative_decode_step(table[:, t_b].transpose(0, 1), *state.tensors())``
    with ``t_b`` (B,) the current position of each hypothesis.
    """

    def __init__(self, window_values: Tensor, window_valid: Tensor, far_sum: Tensor, far_count: Tensor):
        check_decode_inputs(window_values.new_zeros(window_values.size(0), window_values.size(1),
                                                    2 * window_values.size(2) + 1),
                            window_values, window_valid, far_sum, far_count)
        self.window_values, self.window_valid = window_values, window_valid
        self.far_sum, self.far_count = far_sum, far_count

    @classmethod
    def empty(cls, batch: int, heads: int, k: int, head_dim: int, dtype=torch.float32, device=None):
        if k < 1:
            raise ValueError(f"RelativeDecodeState: K (max relative position) must be >= 1, got {k}")
        return cls(torch.zeros(batch, heads, k, head_dim, dtype=dtype, device=device),
                   torch.zeros(batch, k, dtype=torch.bool, device=device),
                   torch.zeros(batch, heads, head_dim, dtype=torch.float64 if dtype == torch.float64 else torch.float32,
                               device=device),
                   torch.zeros(batch, dtype=torch.long, device=device))

    @property
    def k(self) -> int:
        return self.window_values.size(2)

    def tensors(self):
        """(window_values, window_valid, far_sum, far_count), the arguments of relative_decode_step."""
        return self.window_values, self.window_valid, self.far_sum, self.far_count

    def push(self, value: Tensor, valid: Optional[Tensor] = None) -> "RelativeDecodeState":
        """Add the new token's value (B, H, Dh): the oldest window value moves into the far sum.
        Rows where ``valid`` (B,) is False (a padding token) keep their state unchanged."""
        if value.shape != (self.window_values.size(0), self.window_values.size(1), self.window_values.size(3)):
            raise ValueError(f"RelativeDecodeState.push: value must be (B, H, Dh) = "
                             f"{tuple(self.window_values[:, :, 0].shape)}, got {tuple(value.shape)}")
        oldest, oldest_valid = self.window_values[:, :, -1].to(self.far_sum.dtype), self.window_valid[:, -1]
        far_sum = self.far_sum + oldest * oldest_valid[:, None, None]
        far_count = self.far_count + oldest_valid.long()
        window_values = torch.cat([value.to(self.window_values.dtype)[:, :, None], self.window_values[:, :, :-1]], 2)
        window_valid = torch.cat([torch.ones_like(self.window_valid[:, :1]), self.window_valid[:, :-1]], 1)
        if valid is not None:
            keep = ~valid.to(torch.bool)
            window_values = torch.where(keep[:, None, None, None], self.window_values, window_values)
            window_valid = torch.where(keep[:, None], self.window_valid, window_valid)
            far_sum = torch.where(keep[:, None, None], self.far_sum, far_sum)
            far_count = torch.where(keep, self.far_count, far_count)
        self.window_values, self.window_valid, self.far_sum, self.far_count = (
            window_values, window_valid, far_sum, far_count)
        return self

    def reorder(self, new_order: Tensor) -> "RelativeDecodeState":
        """Select the hypotheses of beam search (``new_order`` (B',) indices into the batch)."""
        self.window_values = self.window_values.index_select(0, new_order)
        self.window_valid = self.window_valid.index_select(0, new_order)
        self.far_sum = self.far_sum.index_select(0, new_order)
        self.far_count = self.far_count.index_select(0, new_order)
        return self

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())
