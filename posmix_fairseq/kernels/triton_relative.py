"""Triton kernels of rPosNet mixing in the window + far-sum form, forward and backward.

Same math as :func:`posmix_fairseq.kernels.relative_mixing.relative_mixing_window` (see its
module docstring; Gated position-based attention, Eqs. 9-10): one program handles BLOCK_T queries
of one (batch row, head); a first pass over the 2K+1 band energies and the two far energies finds
the maximum, a second accumulates exp(E - max) * v in fp32 (band keys gathered by row, far keys
from the fp32 prefix/suffix sums of the values). The backward recomputes the weights from the
saved log-sum-exp and scatters dE into the table, dv into the band keys and the far sums with
fp32 atomics; the far-sum gradients are turned into value gradients by (reverse) cumulative sums.
Imported only when Triton is available.
"""
import torch
import triton
import triton.language as tl

from .common import next_power_of_2
from .relative_mixing import prefix_suffix
from .triton_support import check_runnable


@triton.jit
def _rel_fwd(table, pos, cen, lens, vals, prefix, suffix, out, lse,
             H, T, S, PQ, DH,
             K: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_t = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    W: tl.constexpr = 2 * K + 1
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = t < T
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    p = tl.load(pos + b * T + t, mask=tm, other=0).to(tl.int64)
    c = tl.load(cen + b * T + t, mask=tm, other=0).to(tl.int64)
    length = tl.load(lens + b).to(tl.int64)
    upper = tl.zeros([BLOCK_T], dtype=tl.int64) + length
    if CAUSAL:
        upper = tl.minimum(upper, p + 1)
    upper = tl.where(tm, upper, 0)
    row = table + (h * PQ + p) * W
    e_left = tl.load(row + 2 * K, mask=tm, other=0.0).to(tl.float32)
    e_right = tl.load(row, mask=tm, other=0.0).to(tl.float32)
    n_left = tl.maximum(tl.minimum(c - K, upper), 0)
    start_right = tl.maximum(c + K + 1, 0)
    n_right = tl.maximum(upper - start_right, 0)
    neg_inf = float("-inf")
    mx = tl.where(n_left > 0, e_left, neg_inf)
    mx = tl.maximum(mx, tl.where(n_right > 0, e_right, neg_inf))
    for o in range(W):
        m = c - K + o
        ok = (m >= 0) & (m < upper)
        e = tl.load(row + (2 * K - o), mask=tm, other=0.0).to(tl.float32)
        mx = tl.maximum(mx, tl.where(ok, e, neg_inf))
    mx = tl.where(mx == neg_inf, 0.0, mx)
    z = tl.zeros([BLOCK_T], dtype=tl.float32)
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=tl.float32)
    vbase = vals + bh * S * DH
    for o in range(W):
        m = c - K + o
        ok = (m >= 0) & (m < upper)
        e = tl.load(row + (2 * K - o), mask=tm, other=0.0).to(tl.float32)
        w = tl.where(ok, tl.exp(e - mx), 0.0)
        z += w
        v = tl.load(vbase + m[:, None] * DH + d[None, :], mask=ok[:, None] & dm[None, :], other=0.0).to(tl.float32)
        acc += w[:, None] * v
    sbase = bh * (S + 1) * DH
    w_left = tl.where(n_left > 0, tl.exp(e_left - mx), 0.0)
    z += w_left * n_left.to(tl.float32)
    left = tl.load(prefix + sbase + n_left[:, None] * DH + d[None, :], mask=(n_left > 0)[:, None] & dm[None, :],
                   other=0.0)
    acc += w_left[:, None] * left
    w_right = tl.where(n_right > 0, tl.exp(e_right - mx), 0.0)
    z += w_right * n_right.to(tl.float32)
    rmask = (n_right > 0)[:, None] & dm[None, :]
    right = (tl.load(suffix + sbase + start_right[:, None] * DH + d[None, :], mask=rmask, other=0.0)
             - tl.load(suffix + sbase + upper[:, None] * DH + d[None, :], mask=rmask, other=0.0))
    acc += w_right[:, None] * right
    live = z > 0
    res = acc / tl.where(live, z, 1.0)[:, None]
    tl.store(out + bh * T * DH + t[:, None] * DH + d[None, :], res.to(out.dtype.element_ty),
             mask=tm[:, None] & dm[None, :])
    tl.store(lse + bh * T + t, tl.where(live, mx + tl.log(tl.where(live, z, 1.0)), float("inf")), mask=tm)


@triton.jit
def _rel_bwd(table, pos, cen, lens, vals, prefix, suffix, out, dout, lse, dtable, dvals, dprefix, dsuffix,
             H, T, S, PQ, DH,
             K: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_t = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    W: tl.constexpr = 2 * K + 1
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = t < T
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    p = tl.load(pos + b * T + t, mask=tm, other=0).to(tl.int64)
    c = tl.load(cen + b * T + t, mask=tm, other=0).to(tl.int64)
    length = tl.load(lens + b).to(tl.int64)
    upper = tl.zeros([BLOCK_T], dtype=tl.int64) + length
    if CAUSAL:
        upper = tl.minimum(upper, p + 1)
    upper = tl.where(tm, upper, 0)
    qmask = tm[:, None] & dm[None, :]
    qoff = bh * T * DH + t[:, None] * DH + d[None, :]
    g = tl.load(dout + qoff, mask=qmask, other=0.0).to(tl.float32)
    o_val = tl.load(out + qoff, mask=qmask, other=0.0).to(tl.float32)
    delta = tl.sum(g * o_val, axis=1)
    lse_t = tl.load(lse + bh * T + t, mask=tm, other=float("inf"))
    row = table + (h * PQ + p) * W
    drow = dtable + (h * PQ + p) * W
    vbase = vals + bh * S * DH
    dvbase = dvals + bh * S * DH
    for o in range(W):
        m = c - K + o
        ok = (m >= 0) & (m < upper)
        e = tl.load(row + (2 * K - o), mask=tm, other=0.0).to(tl.float32)
        pr = tl.where(ok, tl.exp(e - lse_t), 0.0)
        kmask = ok[:, None] & dm[None, :]
        v = tl.load(vbase + m[:, None] * DH + d[None, :], mask=kmask, other=0.0).to(tl.float32)
        de = pr * (tl.sum(g * v, axis=1) - delta)
        tl.atomic_add(drow + (2 * K - o), de, mask=ok)
        tl.atomic_add(dvbase + m[:, None] * DH + d[None, :], pr[:, None] * g, mask=kmask)
    sbase = bh * (S + 1) * DH
    n_left = tl.maximum(tl.minimum(c - K, upper), 0)
    start_right = tl.maximum(c + K + 1, 0)
    n_right = tl.maximum(upper - start_right, 0)
    e_left = tl.load(row + 2 * K, mask=tm, other=0.0).to(tl.float32)
    e_right = tl.load(row, mask=tm, other=0.0).to(tl.float32)
    lok = n_left > 0
    lmask = lok[:, None] & dm[None, :]
    w_left = tl.where(lok, tl.exp(e_left - lse_t), 0.0)
    left = tl.load(prefix + sbase + n_left[:, None] * DH + d[None, :], mask=lmask, other=0.0)
    tl.atomic_add(drow + 2 * K, w_left * (tl.sum(g * left, axis=1) - n_left.to(tl.float32) * delta), mask=lok)
    tl.atomic_add(dprefix + sbase + n_left[:, None] * DH + d[None, :], w_left[:, None] * g, mask=lmask)
    rok = n_right > 0
    rmask = rok[:, None] & dm[None, :]
    w_right = tl.where(rok, tl.exp(e_right - lse_t), 0.0)
    right = (tl.load(suffix + sbase + start_right[:, None] * DH + d[None, :], mask=rmask, other=0.0)
             - tl.load(suffix + sbase + upper[:, None] * DH + d[None, :], mask=rmask, other=0.0))
    tl.atomic_add(drow, w_right * (tl.sum(g * right, axis=1) - n_right.to(tl.float32) * delta), mask=rok)
    tl.atomic_add(dsuffix + sbase + start_right[:, None] * DH + d[None, :], w_right[:, None] * g, mask=rmask)
    tl.atomic_add(dsuffix + sbase + upper[:, None] * DH + d[None, :], -w_right[:, None] * g, mask=rmask)


def _launch_config(steps: int, head_dim: int):
    block_d = max(16, next_power_of_2(head_dim))
    block_t = 32 if block_d <= 64 else 16
    block_t = min(block_t, max(16, next_power_of_2(steps)))
    return block_t, block_d


class RelativeWindowMixing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, values, query_positions, centre, key_lengths, causal):
        heads, pq, width = table.shape
        k = (width - 1) // 2
        batch, _, keys, dim = values.shape
        steps = query_positions.size(1)
        table_c, values_c = table.contiguous(), values.contiguous()
        pos = query_positions.to(torch.int32).contiguous()
        cen = centre.to(torch.int32).contiguous()
        lens = key_lengths.to(torch.int32).contiguous()
        prefix, suffix = prefix_suffix(values_c, key_lengths)
        out = torch.empty(batch, heads, steps, dim, dtype=values.dtype, device=values.device)
        lse = torch.empty(batch, heads, steps, dtype=torch.float32, device=values.device)
        block_t, block_d = _launch_config(steps, dim)
        grid = (triton.cdiv(steps, block_t), batch * heads)
        if steps and batch * heads:
            _rel_fwd[grid](table_c, pos, cen, lens, values_c, prefix, suffix, out, lse, heads, steps, keys, pq, dim,
                           K=k, CAUSAL=bool(causal), BLOCK_T=block_t, BLOCK_D=block_d)
        ctx.save_for_backward(table_c, values_c, pos, cen, lens, prefix, suffix, out, lse, key_lengths)
        ctx.causal = bool(causal)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        table, values, pos, cen, lens, prefix, suffix, out, lse, key_lengths = ctx.saved_tensors
        heads, pq, width = table.shape
        k = (width - 1) // 2
        batch, _, keys, dim = values.shape
        steps = pos.size(1)
        dtable = torch.zeros(table.shape, dtype=torch.float32, device=table.device)
        dvals = torch.zeros(values.shape, dtype=torch.float32, device=values.device)
        dprefix = torch.zeros_like(prefix)
        dsuffix = torch.zeros_like(suffix)
        block_t, block_d = _launch_config(steps, dim)
        grid = (triton.cdiv(steps, block_t), batch * heads)
        if steps and batch * heads:
            _rel_bwd[grid](table, pos, cen, lens, values, prefix, suffix, out, grad_out.contiguous(), lse,
                           dtable, dvals, dprefix, dsuffix, heads, steps, keys, pq, dim,
                           K=k, CAUSAL=ctx.causal, BLOCK_T=block_t, BLOCK_D=block_d)
        # prefix[i] = sum_{m<i} v_m -> dv_m += sum_{i>m} dprefix[i]; suffix[i] = sum_{m>=i} v_m -> dv_m += sum_{i<=m}
        dvals += torch.cumsum(dprefix[:, :, 1:].flip(2), dim=2).flip(2)
        dvals += torch.cumsum(dsuffix[:, :, :keys], dim=2)
        real = torch.arange(keys, device=values.device) < key_lengths[:, None]
        dvals *= real[:, None, :, None]
        return dtable.to(table.dtype), dvals.to(values.dtype), None, None, None, None


def relative_mixing_triton(table, query_positions, values, key_lengths, centre, causal):
    check_runnable(values)
    return RelativeWindowMixing.apply(table, values, query_positions, centre, key_lengths, causal)
