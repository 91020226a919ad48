"""Triton kernel of one constant-state rPosNet decoding step (forward only).

Same math as :func:`posmix_fairseq.kernels.decode_step.relative_decode_reference` (Gated
position-based attention, Eq. 10, gamma = 1, causal): one program per (hypothesis, head) reads
the K window energies E[K+i], the far energy E[2K], the K window values and the far sum, and
writes the softmax-weighted context with fp32 accumulation. Imported only when Triton is available.
"""
import torch
import triton
import triton.language as tl

from .common import next_power_of_2
from .triton_support import check_runnable


@triton.jit
def _decode(rows, wvals, wvalid, far_sum, far_count, out, H, K, DH,
            BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b = bh // H
    i = tl.arange(0, BLOCK_K)
    im = i < K
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    W = 2 * K + 1
    valid = (tl.load(wvalid + b * K + i, mask=im, other=0) != 0) & im
    e = tl.load(rows + bh * W + K + i, mask=valid, other=0.0).to(tl.float32)
    count = tl.load(far_count + b).to(tl.float32)
    e_far = tl.load(rows + bh * W + 2 * K).to(tl.float32)
    neg_inf = float("-inf")
    mx = tl.max(tl.where(valid, e, neg_inf), axis=0)
    mx = tl.maximum(mx, tl.where(count > 0, e_far, neg_inf))
    mx = tl.where(mx == neg_inf, 0.0, mx)
    w = tl.where(valid, tl.exp(e - mx), 0.0)
    w_far = tl.where(count > 0, tl.exp(e_far - mx), 0.0)
    z = tl.sum(w, axis=0) + w_far * count
    v = tl.load(wvals + bh * K * DH + i[:, None] * DH + d[None, :], mask=valid[:, None] & dm[None, :],
                other=0.0).to(tl.float32)
    acc = tl.sum(w[:, None] * v, axis=0)
    acc += w_far * tl.load(far_sum + bh * DH + d, mask=dm, other=0.0).to(tl.float32)
    res = acc / tl.where(z > 0, z, 1.0)
    tl.store(out + bh * DH + d, res.to(out.dtype.element_ty), mask=dm)


def relative_decode_triton(energy_rows, window_values, window_valid, far_sum, far_count):
    check_runnable(window_values)
    batch, heads, k, dim = window_values.shape
    out = torch.empty(batch, heads, dim, dtype=window_values.dtype, device=window_values.device)
    if batch * heads:
        _decode[(batch * heads,)](energy_rows.contiguous(), window_values.contiguous(),
                                  window_valid.to(torch.int8).contiguous(), far_sum.contiguous(),
                                  far_count.contiguous(), out, heads, k, dim,
                                  BLOCK_K=max(2, next_power_of_2(k)), BLOCK_D=max(16, next_power_of_2(dim)))
    return out
