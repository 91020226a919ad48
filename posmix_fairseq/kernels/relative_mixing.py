"""rPosNet mixing from a table of position energies: dense reference and O(K) window form.

GPA Eqs. 9-10: the energy of query n and key m is e(n, clip(floor(gamma n) - m, K)), so a table E
(H, Pq, 2K+1) indexed by query position and j = clip(floor(gamma p) - m, -K, K) + K holds them all.
Window form (design note "A fact worth building on later"): with centre c = floor(gamma p), every
key m < c - K has index 2K and every key m > c + K index 0, so with n_l far-left and n_r far-right keys

    Z       = sum_{band m in [c-K, c+K]} exp(E[j]) + n_l exp(E[2K]) + n_r exp(E[0])
    context = (band + exp(E[2K]) sum_{far left} v_m + exp(E[0]) sum_{far right} v_m) / Z

with the far sums read from prefix / suffix sums of the values: O(T (2K+3) Dh) instead of O(T S Dh).
Both functions take the (validated, S >= 1) arguments of ``kernels.relative_position_mixing``.
"""
import torch
from torch import Tensor

from .common import allowed_keys, centres, compute_dtype, masked_softmax_mix


def relative_mixing_dense(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                          length_ratio: float, causal: bool) -> Tensor:
    """The ground truth: materialise the (B, H, T, S) energies by gather, mask, softmax, matmul."""
    heads, _, width = table.shape
    k = (width - 1) // 2
    keys = values.size(2)
    centre = centres(query_positions, length_ratio)
    m = torch.arange(keys, device=values.device)
    index = (centre[:, :, None] - m).clamp(-k, k) + k  # (B, T, S)
    rows = table[:, query_positions].to(compute_dtype(values))  # (H, B, T, 2K+1)
    energies = torch.gather(rows, 3, index.unsqueeze(0).expand(heads, -1, -1, -1)).transpose(0, 1)
    allowed = allowed_keys(query_positions, key_lengths, keys, causal).unsqueeze(1)
    return masked_softmax_mix(energies, allowed, values)


def prefix_suffix(values: Tensor, key_lengths: Tensor):
    """(prefix, suffix), each (B, H, S+1, Dh) float32 (float64 for float64 values) over the real
    keys (padding slots count 0): prefix[i] = sum_{m < i} v_m, suffix[i] = sum_{m >= i} v_m (suffix[S] = 0 exactly)."""
    batch, heads, keys, dim = values.shape
    dtype = compute_dtype(values)
    real = (torch.arange(keys, device=values.device) < key_lengths[:, None]).to(dtype)
    v = values.to(dtype) * real[:, None, :, None]
    zero = v.new_zeros(batch, heads, 1, dim)
    prefix = torch.cat([zero, torch.cumsum(v, dim=2)], dim=2)
    suffix = torch.cat([torch.cumsum(v.flip(2), dim=2).flip(2), zero], dim=2)
    return prefix, suffix


def _gather_keys(x: Tensor, index: Tensor) -> Tensor:
    """x (B, H, S', Dh), index (B, T, W) -> (B, H, T, W, Dh)."""
    batch, heads, _, dim = x.shape
    _, steps, width = index.shape
    flat = index.reshape(batch, 1, steps * width, 1).expand(batch, heads, steps * width, dim)
    return torch.gather(x, 2, flat).reshape(batch, heads, steps, width, dim)


def relative_mixing_window(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                           length_ratio: float, causal: bool) -> Tensor:
    """The window + far-sum form in PyTorch ops (differentiable by autograd)."""
    _, _, width = table.shape
    k = (width - 1) // 2
    keys = values.size(2)
    centre = centres(query_positions, length_ratio)  # (B, T)
    upper = key_lengths[:, None].expand_as(centre)
    if causal:
        upper = torch.minimum(upper, query_positions + 1)
    offsets = torch.arange(width, device=values.device)
    band = centre[:, :, None] - k + offsets  # (B, T, 2K+1): key of band slot o, energy index 2K - o
    band_ok = (band >= 0) & (band < upper[:, :, None])
    # far-left keys are [0, n_left), far-right keys [start_right, upper)
    n_left = torch.minimum(centre - k, upper).clamp(min=0)
    start_right = (centre + k + 1).clamp(min=0)
    n_right = (upper - start_right).clamp(min=0)

    dtype = compute_dtype(values)
    rows = table[:, query_positions].to(dtype).transpose(0, 1)  # (B, H, T, 2K+1), energy index j
    neg_inf = float("-inf")
    band_logits = rows.flip(-1).masked_fill(~band_ok[:, None], neg_inf)
    left_logit = (rows[..., width - 1] + torch.log(n_left.clamp(min=1).to(dtype))[:, None]).masked_fill(
        (n_left == 0)[:, None], neg_inf)
    right_logit = (rows[..., 0] + torch.log(n_right.clamp(min=1).to(dtype))[:, None]).masked_fill(
        (n_right == 0)[:, None], neg_inf)
    logits = torch.cat([band_logits, left_logit[..., None], right_logit[..., None]], dim=-1)  # (B,H,T,2K+3)
    dead = torch.isneginf(logits).all(dim=-1, keepdim=True)
    probs = torch.softmax(logits.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)

    prefix, suffix = prefix_suffix(values, key_lengths)
    # band slots outside [0, S) are clamped for the gather and weigh 0 (band_ok)
    band_values = _gather_keys(values.to(dtype), band.clamp(0, keys - 1))
    context = torch.einsum("bhtw,bhtwd->bhtd", probs[..., :width] * band_ok[:, None], band_values)
    left_sum = _gather_keys(prefix, n_left[:, :, None])[:, :, :, 0]
    right_sum = (_gather_keys(suffix, start_right.clamp(max=keys)[:, :, None])
                 - _gather_keys(suffix, upper[:, :, None]))[:, :, :, 0]
    left_mean = left_sum / n_left.clamp(min=1)[:, None, :, None]
    right_mean = right_sum / n_right.clamp(min=1)[:, None, :, None]
    context = context + probs[..., width, None] * left_mean + probs[..., width + 1, None] * right_mean
    return context.to(values.dtype)
