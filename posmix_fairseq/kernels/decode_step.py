"""One decoding step of rPosNet decoder self-attention with a constant-size state (docs/search-time.md).

GPA Eq. 10 with gamma = 1 and causal keys: the key at distance i < K from the query at position t has
its own energy E[K+i], every older key shares E[2K]. So a step needs only the K most recent values, the
sum of the older ones and their count (design note "A fact worth building on later"), O(K Dh) whatever t:

    out = [ sum_{i<K, valid} exp(E[K+i]) v_i + exp(E[2K]) far_sum ] / Z,
    Z   = sum_{i<K, valid} exp(E[K+i]) + far_count exp(E[2K])

When the state holds every real token before the current one (padding steps leave it unchanged),
recent slot i is valid iff i <= t and far_count = max(0, t + 1 - K): the weights depend on t and E[t]
only (:func:`position_decode_weights`) and search keeps the state as one tensor (:func:`packed_state`).
Two ways to take a step: :func:`weighted_decode_step` with those weights (one batched product), or
:func:`relative_decode_step` from the energy row (the general step; a Triton kernel on a GPU).
"""
from typing import Optional

import torch
from torch import Tensor

from . import dispatch
from .common import compute_dtype


def check_decode_state(recent_values: Tensor, recent_valid: Tensor, far_sum: Tensor, far_count: Tensor,
                       energy_rows: Optional[Tensor] = None) -> None:
    """Validate the shapes of a decoding state (and of the step's ``energy_rows`` when given)."""
    if recent_values.dim() != 4:
        raise ValueError(f"relative_decode_step: recent_values must be (B, H, K, Dh), got {tuple(recent_values.shape)}")
    batch, heads, k, dim = recent_values.shape
    if recent_valid.shape != (batch, k) or recent_valid.dtype != torch.bool:
        raise ValueError(f"relative_decode_step: recent_valid must be a bool tensor (B, K) = {(batch, k)}, "
                         f"got {tuple(recent_valid.shape)} {recent_valid.dtype}")
    if far_sum.shape != (batch, heads, dim):
        raise ValueError(f"relative_decode_step: far_sum must be (B, H, Dh) = {(batch, heads, dim)}, "
                         f"got {tuple(far_sum.shape)}")
    if far_count.shape != (batch,) or far_count.is_floating_point():
        raise ValueError(f"relative_decode_step: far_count must be an integer tensor (B,) = ({batch},), "
                         f"got {tuple(far_count.shape)} {far_count.dtype}")
    if energy_rows is not None and energy_rows.shape != (batch, heads, 2 * k + 1):
        raise ValueError(f"relative_decode_step: energy_rows must be (B, H, 2K+1) = {(batch, heads, 2 * k + 1)} "
                         f"for K={k} recent values, got {tuple(energy_rows.shape)}")


def relative_decode_reference(energy_rows: Tensor, recent_values: Tensor, recent_valid: Tensor, far_sum: Tensor,
                              far_count: Tensor) -> Tensor:
    """(B, H, Dh) context of the current query (module docstring), fp32 softmax; 0 when it has no key."""
    k = recent_values.size(2)
    dtype = compute_dtype(recent_values)
    rows = energy_rows.to(dtype)
    near = rows[..., k:2 * k].masked_fill(~recent_valid[:, None, :], float("-inf"))  # (B, H, K)
    count = far_count.to(dtype)
    far = (rows[..., 2 * k] + torch.log(count.clamp(min=1))[:, None]).masked_fill((far_count == 0)[:, None],
                                                                                   float("-inf"))
    logits = torch.cat([near, far[..., None]], dim=-1)
    dead = torch.isneginf(logits).all(dim=-1, keepdim=True)
    probs = torch.softmax(logits.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    far_mean = far_sum.to(dtype) / count.clamp(min=1)[:, None, None]
    out = torch.einsum("bhk,bhkd->bhd", probs[..., :k], recent_values.to(dtype)) + probs[..., k, None] * far_mean
    return out.to(recent_values.dtype)


def relative_decode_step(energy_rows: Tensor, recent_values: Tensor, recent_valid: Tensor, far_sum: Tensor,
                         far_count: Tensor, backend: Optional[str] = None) -> Tensor:
    """One query per hypothesis of constant-state rPosNet decoder self-attention; (B, H, Dh).
    ``energy_rows`` (B, H, 2K+1): the table row of the current position; the state (:class:`RelativeDecodeState`)
    holds the K most recent values and the sum and count of the older ones. The Triton kernel is forward-only
    (search needs no gradient); ``backend`` as in :func:`.dispatch.run`."""
    check_decode_state(recent_values, recent_valid, far_sum, far_count, energy_rows)
    state = (recent_values, recent_valid, far_sum, far_count)
    return dispatch.run("decoding step", backend, (energy_rows, recent_values, far_sum),
                        lambda: dispatch.triton_module().relative_decode_triton(energy_rows, *state),
                        lambda: relative_decode_reference(energy_rows, *state), forward_only=True)


def position_decode_weights(energy_rows: Tensor, positions: Tensor) -> Tensor:
    """(..., K+1) weights of one decoding step at query position t for a state that holds every real
    token up to t, from the table rows E[t] (..., 2K+1) of Eq. 10 (``positions`` t broadcastable to
    their leading axes). Entry i < K weighs recent slot i (0 where i > t), entry K is the weight of one
    far key, exp(E[2K]) / Z, applied to the far sum (0 when t < K). Computed in fp32 (fp64 for fp64).
    """
    k = (energy_rows.size(-1) - 1) // 2
    rows = energy_rows.to(compute_dtype(energy_rows))
    t = positions.unsqueeze(-1)
    near = rows[..., k:2 * k].masked_fill(torch.arange(k, device=rows.device) > t, float("-inf"))
    count = (t + 1 - k).clamp(min=0).to(rows.dtype)
    far = (rows[..., 2 * k:] + torch.log(count.clamp(min=1))).masked_fill(count == 0, float("-inf"))
    probs = torch.softmax(torch.cat([near, far], dim=-1), dim=-1)  # slot 0 (the current token) is always valid
    return torch.cat([probs[..., :k], probs[..., k:] / count.clamp(min=1)], dim=-1)


def packed_state(batch: int, heads: int, k: int, head_dim: int, dtype=torch.float32, device=None) -> Tensor:
    """The empty state of search: (B, H, K+1, Dh) zeros in the accumulation dtype (fp32, fp64 for fp64
    values); slot i < K holds the value at distance i from the newest token, slot K the sum of the
    older ones. Which slots hold a token follows from the newest token's position, so this one
    batch-first tensor is all a layer keeps (beam search reorders it with one index_select)."""
    if k < 1:
        raise ValueError(f"packed_state: K (max relative position) must be >= 1, got {k}")
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.zeros(batch, heads, k + 1, head_dim, dtype=acc, device=device)


def push_packed(state: Tensor, values: Tensor, valid: Optional[Tensor] = None) -> Tensor:
    """The packed state after the new token's ``values`` (B, H, 1, Dh): the oldest recent slot joins
    the far sum (a slot not yet filled holds zeros). Rows where ``valid`` (B,) is False keep their state."""
    k = state.size(2) - 1
    if values.dtype != state.dtype:
        values = values.to(state.dtype)
    recent, oldest, far = state.split((k - 1, 1, 1), dim=2)
    pushed = torch.cat([values, recent, oldest + far], dim=2)
    if valid is not None:
        pushed = torch.where(valid[:, None, None, None], pushed, state)
    return pushed


def unpack_state(state: Tensor, positions: Tensor, dtype: torch.dtype):
    """The arguments (recent_values in ``dtype``, recent_valid, far_sum, far_count) of
    ``relative_decode_step`` for a packed state whose newest token has position ``positions`` (B,)."""
    k = state.size(2) - 1
    recent_valid = torch.arange(k, device=state.device)[None, :] <= positions[:, None]
    far_count = (positions.long() + 1 - k).clamp(min=0)
    return state[:, :, :k].to(dtype), recent_valid, state[:, :, k], far_count


def weighted_decode_step(weights: Tensor, values: Tensor, state: Tensor, valid: Optional[Tensor] = None):
    """Push ``values`` (B, H, 1, Dh) into the packed ``state`` and mix with the (B, H, 1, K+1)
    :func:`position_decode_weights`: one batched product. Returns (context in the values' dtype, the
    new state); rows where ``valid`` (B,) is False keep their state and get 0. Few operations: a step
    of the search is dominated by per-operation overhead."""
    state = push_packed(state, values, valid)
    if weights.dtype != state.dtype:
        weights = weights.to(state.dtype)
    context = torch.matmul(weights, state)
    if valid is not None:
        context = context.masked_fill(~valid[:, None, None, None], 0.0)
    if context.dtype != values.dtype:
        context = context.to(values.dtype)
    return context, state


class RelativeDecodeState:
    """The constant-size state of :func:`relative_decode_step` (the general step; search keeps the same
    content packed: :func:`packed_state`): ``recent_values`` (B, H, K, Dh), slot i the value at distance
    i from the newest token; ``recent_valid`` (B, K); ``far_sum`` (B, H, Dh) in fp32 (fp64 for fp64
    values) and ``far_count`` (B,), the sum and number of the values at distance >= K. Per step:
    ``state.push(v_t)``, then ``relative_decode_step(table[:, t_b].transpose(0, 1), *state.tensors())``.
    """

    def __init__(self, recent_values: Tensor, recent_valid: Tensor, far_sum: Tensor, far_count: Tensor):
        check_decode_state(recent_values, recent_valid, far_sum, far_count)
        self.recent_values, self.recent_valid = recent_values, recent_valid
        self.far_sum, self.far_count = far_sum, far_count

    @classmethod
    def empty(cls, batch: int, heads: int, k: int, head_dim: int, dtype=torch.float32, device=None):
        if k < 1:
            raise ValueError(f"RelativeDecodeState: K (max relative position) must be >= 1, got {k}")
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        return cls(torch.zeros(batch, heads, k, head_dim, dtype=dtype, device=device),
                   torch.zeros(batch, k, dtype=torch.bool, device=device),
                   torch.zeros(batch, heads, head_dim, dtype=acc, device=device),
                   torch.zeros(batch, dtype=torch.long, device=device))

    def tensors(self):
        return self.recent_values, self.recent_valid, self.far_sum, self.far_count

    def push(self, value: Tensor, valid: Optional[Tensor] = None) -> "RelativeDecodeState":
        """Add the new token's value (B, H, Dh): the oldest recent value moves into the far sum.
        Rows where ``valid`` (B,) is False (a padding token) keep their state."""
        if value.shape != (self.recent_values.size(0), self.recent_values.size(1), self.recent_values.size(3)):
            raise ValueError(f"RelativeDecodeState.push: value must be (B, H, Dh) = "
                             f"{tuple(self.recent_values[:, :, 0].shape)}, got {tuple(value.shape)}")
        oldest, oldest_valid = self.recent_values[:, :, -1].to(self.far_sum.dtype), self.recent_valid[:, -1]
        far_sum = self.far_sum + oldest * oldest_valid[:, None, None]
        far_count = self.far_count + oldest_valid.long()
        recent_values = torch.cat([value.to(self.recent_values.dtype)[:, :, None], self.recent_values[:, :, :-1]], 2)
        recent_valid = torch.cat([torch.ones_like(self.recent_valid[:, :1]), self.recent_valid[:, :-1]], 1)
        pushed = (recent_values, recent_valid, far_sum, far_count)
        if valid is not None:
            keep = ~valid.to(torch.bool)
            pushed = [torch.where(keep.view(-1, *[1] * (new.dim() - 1)), old, new)
                      for old, new in zip(self.tensors(), pushed)]
        self.recent_values, self.recent_valid, self.far_sum, self.far_count = pushed
        return self

    def reorder(self, new_order: Tensor) -> "RelativeDecodeState":
        """Select the hypotheses of beam search (``new_order`` (B',))."""
        self.recent_values, self.recent_valid, self.far_sum, self.far_count = (
            t.index_select(0, new_order) for t in self.tensors())
        return self

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())
