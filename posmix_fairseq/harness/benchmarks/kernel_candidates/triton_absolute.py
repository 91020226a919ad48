"""Triton kernels of aPosNet mixing from an energy table, forward and backward (flash-style).

GPA Eq. 8 with the
energies read from a table E (H, Pq, Pk) instead of a Q K^T product: a program owns BLOCK_T
queries of one (batch row, head) and walks the key blocks with an online softmax (running max
and denominator in fp32), P V by ``tl.dot`` with fp32 accumulation. Backward: a key-major kernel
accumulates dV = P^T dO without atomics; a query-major kernel computes dE = P (dO V^T - delta)
and adds it into the table rows of the query positions (fp32 atomics: several queries, in
several batch rows, share one position).
Imported only when Triton is available.
"""
import torch
import triton
import triton.language as tl

from posmix_fairseq.kernels.common import next_power_of_2, row_grid
from posmix_fairseq.kernels.triton_kernels import INTERPRETED, check_runnable, mixed_dot, program_row


@triton.jit
def _abs_fwd(table, pos, lens, vals, out, lse, H, T, S, PQ, PK, DH,
             CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
             PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    pid_t = tl.program_id(1)
    bh, b, h = program_row(H)
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = t < T
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    p = tl.load(pos + b * T + t, mask=tm, other=0).to(tl.int64)
    length = tl.load(lens + b)
    hi = length
    if CAUSAL:
        hi = tl.minimum(hi, tl.max(tl.where(tm, p, -1)) + 1)
    neg_inf = float("-inf")
    mx = tl.full([BLOCK_T], neg_inf, dtype=tl.float32)
    z = tl.zeros([BLOCK_T], dtype=tl.float32)
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=tl.float32)
    row = table + (h * PQ + p) * PK
    vbase = vals + bh * S * DH
    for n0 in range(0, hi, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        ok = tm[:, None] & (n < length)[None, :]
        if CAUSAL:
            ok = ok & (n[None, :] <= p[:, None])
        e = tl.load(row[:, None] + n[None, :], mask=ok, other=0.0).to(tl.float32)
        e = tl.where(ok, e, neg_inf)
        new_mx = tl.maximum(mx, tl.max(e, axis=1))
        safe = tl.where(new_mx == neg_inf, 0.0, new_mx)
        alpha = tl.exp(mx - safe)
        pr = tl.exp(e - safe[:, None])
        z = z * alpha + tl.sum(pr, axis=1)
        v = tl.load(vbase + n[:, None] * DH + d[None, :], mask=(n < length)[:, None] & dm[None, :], other=0.0)
        acc = acc * alpha[:, None] + mixed_dot(pr, v, PRECISION, DOT_F32)
        mx = new_mx
    live = z > 0
    res = acc / tl.where(live, z, 1.0)[:, None]
    tl.store(out + bh * T * DH + t[:, None] * DH + d[None, :], res.to(out.dtype.element_ty),
             mask=tm[:, None] & dm[None, :])
    tl.store(lse + bh * T + t, tl.where(live, mx + tl.log(tl.where(live, z, 1.0)), float("inf")), mask=tm)


@triton.jit
def _abs_bwd_dv(table, pos, lens, dout, lse, dvals, H, T, S, PQ, PK, DH,
                CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    pid_n = tl.program_id(1)
    bh, b, h = program_row(H)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    length = tl.load(lens + b)
    nm = n < length
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        tm = t < T
        p = tl.load(pos + b * T + t, mask=tm, other=0).to(tl.int64)
        ok = tm[:, None] & nm[None, :]
        if CAUSAL:
            ok = ok & (n[None, :] <= p[:, None])
        e = tl.load(table + (h * PQ + p[:, None]) * PK + n[None, :], mask=ok, other=0.0).to(tl.float32)
        lse_t = tl.load(lse + bh * T + t, mask=tm, other=float("inf"))
        pr = tl.where(ok, tl.exp(e - lse_t[:, None]), 0.0)
        g = tl.load(dout + bh * T * DH + t[:, None] * DH + d[None, :], mask=tm[:, None] & dm[None, :], other=0.0)
        acc += mixed_dot(tl.trans(pr), g, PRECISION, DOT_F32)
    tl.store(dvals + bh * S * DH + n[:, None] * DH + d[None, :], acc.to(dvals.dtype.element_ty),
             mask=(n < S)[:, None] & dm[None, :])


@triton.jit
def _abs_bwd_de(table, pos, lens, vals, out, dout, lse, dtable, H, T, S, PQ, PK, DH,
                CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    pid_t = tl.program_id(1)
    bh, b, h = program_row(H)
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = t < T
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    p = tl.load(pos + b * T + t, mask=tm, other=0).to(tl.int64)
    length = tl.load(lens + b)
    hi = length
    if CAUSAL:
        hi = tl.minimum(hi, tl.max(tl.where(tm, p, -1)) + 1)
    qmask = tm[:, None] & dm[None, :]
    qoff = bh * T * DH + t[:, None] * DH + d[None, :]
    g = tl.load(dout + qoff, mask=qmask, other=0.0)
    delta = tl.sum(g.to(tl.float32) * tl.load(out + qoff, mask=qmask, other=0.0).to(tl.float32), axis=1)
    lse_t = tl.load(lse + bh * T + t, mask=tm, other=float("inf"))
    row = (h * PQ + p) * PK
    vbase = vals + bh * S * DH
    for n0 in range(0, hi, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        ok = tm[:, None] & (n < length)[None, :]
        if CAUSAL:
            ok = ok & (n[None, :] <= p[:, None])
        e = tl.load(table + row[:, None] + n[None, :], mask=ok, other=0.0).to(tl.float32)
        pr = tl.where(ok, tl.exp(e - lse_t[:, None]), 0.0)
        v = tl.load(vbase + n[:, None] * DH + d[None, :], mask=(n < length)[:, None] & dm[None, :], other=0.0)
        dp = mixed_dot(g, tl.trans(v), PRECISION, DOT_F32)
        tl.atomic_add(dtable + row[:, None] + n[None, :], pr * (dp - delta[:, None]), mask=ok)


def _config(values):
    block_d = max(16, next_power_of_2(values.size(-1)))
    block = 32 if block_d <= 64 else 16
    # fp32 storage: exact fp32 products ("ieee", not TF32). fp16/bf16: tensor-core products of the
    # storage dtype with fp32 accumulation; in the interpreter the products are taken in fp32
    # because its tl.dot mishandles bfloat16 operands (numpy has no bfloat16).
    dot_f32 = values.dtype == torch.float32 or INTERPRETED
    return block, block_d, "ieee", dot_f32


class AbsoluteTableMixing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, values, query_positions, key_lengths, causal):
        heads, pq, pk = table.shape
        batch, _, keys, dim = values.shape
        steps = query_positions.size(1)
        table_c, values_c = table.contiguous(), values.contiguous()
        pos = query_positions.to(torch.int32).contiguous()
        lens = key_lengths.to(torch.int32).contiguous()
        out = torch.empty(batch, heads, steps, dim, dtype=values.dtype, device=values.device)
        lse = torch.empty(batch, heads, steps, dtype=torch.float32, device=values.device)
        block, block_d, precision, dot_f32 = _config(values)
        if steps and batch * heads:
            _abs_fwd[row_grid(batch * heads, triton.cdiv(steps, block))](
                table_c, pos, lens, values_c, out, lse, heads, steps, keys, pq, pk, dim, CAUSAL=bool(causal),
                BLOCK_T=block, BLOCK_N=block, BLOCK_D=block_d, PRECISION=precision, DOT_F32=dot_f32)
        ctx.save_for_backward(table_c, values_c, pos, lens, out, lse)
        ctx.causal = bool(causal)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        table, values, pos, lens, out, lse = ctx.saved_tensors
        heads, pq, pk = table.shape
        batch, _, keys, dim = values.shape
        steps = pos.size(1)
        grad_out = grad_out.contiguous()
        dtable = torch.zeros(table.shape, dtype=torch.float32, device=table.device)
        dvals = torch.empty(values.shape, dtype=values.dtype, device=values.device)
        block, block_d, precision, dot_f32 = _config(values)
        if keys and batch * heads:
            _abs_bwd_dv[row_grid(batch * heads, triton.cdiv(keys, block))](
                table, pos, lens, grad_out, lse, dvals, heads, steps, keys, pq, pk, dim, CAUSAL=ctx.causal,
                BLOCK_T=block, BLOCK_N=block, BLOCK_D=block_d, PRECISION=precision, DOT_F32=dot_f32)
        if steps and batch * heads:
            _abs_bwd_de[row_grid(batch * heads, triton.cdiv(steps, block))](
                table, pos, lens, values, out, grad_out, lse, dtable, heads, steps, keys, pq, pk, dim,
                CAUSAL=ctx.causal, BLOCK_T=block, BLOCK_N=block, BLOCK_D=block_d, PRECISION=precision,
                DOT_F32=dot_f32)
        return dtable.to(table.dtype), dvals, None, None, None


def absolute_mixing_triton(table, query_positions, values, key_lengths, causal):
    check_runnable(values)
    return AbsoluteTableMixing.apply(table, values, query_positions, key_lengths, causal)
