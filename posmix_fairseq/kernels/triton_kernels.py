"""The Triton kernels, fp32 arithmetic whatever the storage dtype (imported only when Triton is available):

- rPosNet mixing (GPA Eqs. 9-10), the window + far-sum form of :mod:`.relative_mixing`, forward and
  backward. A program takes BLOCK_T queries of one (batch row, head) and walks their band keys in
  BLOCK_N-key tiles (a banded weight tile times the value tile by ``tl.dot``; tiles without a band key
  skipped), plus the far groups from prefix / suffix sums. The backward recomputes the weights from the
  saved log-sum-exp; dE goes into the table rows by atomics (queries of several rows share a position),
  the far-sum gradients into the prefix / suffix sums, turned into value gradients by cumulative sums;
- the constant-state decoding step of :mod:`.decode_step`, forward only;
- GPA Eq. 4's LayerNorm(GeLU(x)) and c * GeLU(g), forward and backward, with the exact (erf) GeLU,
  GeLU'(x) = Phi(x) + x phi(x).

Triton decides once, when first imported, whether its kernels (its own library functions included) are
compiled or interpreted: TRITON_INTERPRET must be set before that.
"""
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .common import next_power_of_2, row_grid
from .dispatch import interpreter_enabled
from .relative_mixing import prefix_suffix

#: True when Triton was imported in interpreter mode (every kernel then runs on CPU tensors).
INTERPRETED = not isinstance(tl.standard.sum, JITFunction)


def check_runnable(tensor: torch.Tensor) -> None:
    if tensor.device.type == "cpu" and not INTERPRETED:
        late = (" (TRITON_INTERPRET was set after Triton's first import: set it before the process imports Triton)"
                if interpreter_enabled() else "")
        raise RuntimeError("posmix_fairseq.kernels: Triton was imported without TRITON_INTERPRET=1, so its kernels "
                           f"cannot run on CPU tensors{late}; use backend='torch' or 'auto' here")


@triton.jit
def program_row(H):
    """(bh, b, h): the (batch row, head) pair of this program (grid axis 0: common.row_grid), bh as int64."""
    bh = tl.program_id(0).to(tl.int64)
    return bh, bh // H, bh % H


@triton.jit
def mixed_dot(a, b, PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    """a @ b with fp32 accumulation: both operands in fp32 at ``PRECISION`` (DOT_F32, fp32 storage),
    or ``a`` cast to ``b``'s storage dtype (fp16 / bf16 tensor cores)."""
    if DOT_F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PRECISION)
    else:
        return tl.dot(a.to(b.dtype), b)


@triton.jit
def _rel_setup(pos, cen, lens, b, T, pid_t, K: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr):
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = t < T
    # int32 index arithmetic (positions and lengths are far below 2^31); base offsets are int64
    p = tl.load(pos + b * T + t, mask=tm, other=0)
    c = tl.load(cen + b * T + t, mask=tm, other=0)
    length = tl.load(lens + b)
    upper = tl.zeros([BLOCK_T], dtype=tl.int32) + length
    if CAUSAL:
        upper = tl.minimum(upper, p + 1)
    upper = tl.where(tm, upper, 0)
    n_left = tl.maximum(tl.minimum(c - K, upper), 0)
    start_right = tl.maximum(c + K + 1, 0)
    n_right = tl.maximum(upper - start_right, 0)
    # band keys of the block: [lo, hi)
    live = tm & (upper > 0)
    lo = tl.maximum(tl.min(tl.where(live, c - K, 2147483647), axis=0), 0)
    hi = tl.max(tl.where(live, tl.minimum(c + K + 1, upper), 0), axis=0)
    return t, tm, p, c, upper, n_left, start_right, n_right, lo, hi


@triton.jit
def _band(c, upper, tm, n0, K: tl.constexpr, BLOCK_N: tl.constexpr):
    """(m, j, in_band, any): keys n0 + [0, BLOCK_N), their energy index for each query, whether
    each is a band key of each query, and whether the tile holds any band key at all (a block
    whose queries have distant positions, e.g. padding queries at position 0 beside real ones,
    spans tiles that none of its queries uses: they are skipped)."""
    m = n0 + tl.arange(0, BLOCK_N)
    j = c[:, None] - m[None, :] + K
    in_band = (j >= 0) & (j <= 2 * K) & (m[None, :] < upper[:, None]) & (m[None, :] >= 0) & tm[:, None]
    used = tl.sum(tl.sum(in_band.to(tl.int32), axis=1), axis=0) > 0
    return m, j, in_band, used


@triton.jit
def _rel_fwd(table, pos, cen, lens, vals, prefix, suffix, out, lse,
             H, T, S, PQ, DH,
             K: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_W: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    pid_t = tl.program_id(1)
    bh, b, h = program_row(H)
    W: tl.constexpr = 2 * K + 1
    t, tm, p, c, upper, n_left, start_right, n_right, lo, hi = _rel_setup(pos, cen, lens, b, T, pid_t, K, CAUSAL,
                                                                          BLOCK_T)
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    row = table + (h * PQ + p) * W
    e_left = tl.load(row + 2 * K, mask=tm, other=0.0).to(tl.float32)
    e_right = tl.load(row, mask=tm, other=0.0).to(tl.float32)
    neg_inf = float("-inf")
    # the maximum: one tile of each query's table row (index j <-> key c - j + K)
    jw = tl.arange(0, BLOCK_W)
    mw = c[:, None] - jw[None, :] + K
    ok_w = (jw[None, :] < W) & (mw >= 0) & (mw < upper[:, None]) & tm[:, None]
    e_w = tl.load(row[:, None] + jw[None, :], mask=ok_w, other=0.0).to(tl.float32)
    mx = tl.max(tl.where(ok_w, e_w, neg_inf), axis=1)
    mx = tl.maximum(mx, tl.where(n_left > 0, e_left, neg_inf))
    mx = tl.maximum(mx, tl.where(n_right > 0, e_right, neg_inf))
    mx = tl.where(mx == neg_inf, 0.0, mx)
    z = tl.zeros([BLOCK_T], dtype=tl.float32)
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=tl.float32)
    vbase = vals + bh * S * DH
    for n0 in range(lo, hi, BLOCK_N):
        m, j, in_band, used = _band(c, upper, tm, n0, K, BLOCK_N)
        if used:
            e = tl.load(row[:, None] + j, mask=in_band, other=0.0).to(tl.float32)
            pr = tl.where(in_band, tl.exp(e - mx[:, None]), 0.0)
            z += tl.sum(pr, axis=1)
            v = tl.load(vbase + m[:, None] * DH + d[None, :], mask=(m < hi)[:, None] & dm[None, :], other=0.0)
            acc += mixed_dot(pr, v, PRECISION, DOT_F32)
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
             K: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr):
    pid_t = tl.program_id(1)
    bh, b, h = program_row(H)
    W: tl.constexpr = 2 * K + 1
    t, tm, p, c, upper, n_left, start_right, n_right, lo, hi = _rel_setup(pos, cen, lens, b, T, pid_t, K, CAUSAL,
                                                                          BLOCK_T)
    d = tl.arange(0, BLOCK_D)
    dm = d < DH
    qmask = tm[:, None] & dm[None, :]
    qoff = bh * T * DH + t[:, None] * DH + d[None, :]
    g = tl.load(dout + qoff, mask=qmask, other=0.0)
    g32 = g.to(tl.float32)
    delta = tl.sum(g32 * tl.load(out + qoff, mask=qmask, other=0.0).to(tl.float32), axis=1)
    lse_t = tl.load(lse + bh * T + t, mask=tm, other=float("inf"))
    row = table + (h * PQ + p) * W
    drow = dtable + (h * PQ + p) * W
    vbase = vals + bh * S * DH
    dvbase = dvals + bh * S * DH
    for n0 in range(lo, hi, BLOCK_N):
        m, j, in_band, used = _band(c, upper, tm, n0, K, BLOCK_N)
        if used:
            e = tl.load(row[:, None] + j, mask=in_band, other=0.0).to(tl.float32)
            pr = tl.where(in_band, tl.exp(e - lse_t[:, None]), 0.0)
            kmask = (m < hi)[:, None] & dm[None, :]
            v = tl.load(vbase + m[:, None] * DH + d[None, :], mask=kmask, other=0.0)
            dp = mixed_dot(g, tl.trans(v), PRECISION, DOT_F32)
            dv = mixed_dot(tl.trans(pr), g, PRECISION, DOT_F32)
            # Why atomics: this program owns a block of queries, not of keys. The bands of neighbouring query
            # blocks overlap (a block of BLOCK_T consecutive queries reads BLOCK_T + 2K keys), so several
            # programs add into one key's dV; and queries of several batch rows at one position add into one
            # table row's dE. A key-major second pass would reread every band to avoid them. fp32 atomics make
            # the gradients' summation order, so their last bits, vary from run to run.
            tl.atomic_add(drow[:, None] + j, pr * (dp - delta[:, None]), mask=in_band)
            tl.atomic_add(dvbase + m[:, None] * DH + d[None, :], dv, mask=kmask)
    sbase = bh * (S + 1) * DH
    e_left = tl.load(row + 2 * K, mask=tm, other=0.0).to(tl.float32)
    e_right = tl.load(row, mask=tm, other=0.0).to(tl.float32)
    lok = n_left > 0
    lmask = lok[:, None] & dm[None, :]
    w_left = tl.where(lok, tl.exp(e_left - lse_t), 0.0)
    left = tl.load(prefix + sbase + n_left[:, None] * DH + d[None, :], mask=lmask, other=0.0)
    tl.atomic_add(drow + 2 * K, w_left * (tl.sum(g32 * left, axis=1) - n_left.to(tl.float32) * delta), mask=lok)
    tl.atomic_add(dprefix + sbase + n_left[:, None] * DH + d[None, :], w_left[:, None] * g32, mask=lmask)
    rok = n_right > 0
    rmask = rok[:, None] & dm[None, :]
    w_right = tl.where(rok, tl.exp(e_right - lse_t), 0.0)
    right = (tl.load(suffix + sbase + start_right[:, None] * DH + d[None, :], mask=rmask, other=0.0)
             - tl.load(suffix + sbase + upper[:, None] * DH + d[None, :], mask=rmask, other=0.0))
    tl.atomic_add(drow, w_right * (tl.sum(g32 * right, axis=1) - n_right.to(tl.float32) * delta), mask=rok)
    tl.atomic_add(dsuffix + sbase + start_right[:, None] * DH + d[None, :], w_right[:, None] * g32, mask=rmask)
    tl.atomic_add(dsuffix + sbase + upper[:, None] * DH + d[None, :], -w_right[:, None] * g32, mask=rmask)


def launch_config(values: torch.Tensor, backward: bool = False) -> dict:
    """Block sizes, warps and dot precision of the relative kernels for these values (sm_90
    binaries spill no registers with these: 8 warps, 4 for the 16-bit forward)."""
    block_d = max(16, next_power_of_2(values.size(-1)))
    warps = 8 if backward or values.dtype == torch.float32 else 4
    return dict(BLOCK_T=32, BLOCK_N=32, BLOCK_D=block_d, num_warps=warps,
                # fp32 storage: exact fp32 products ("ieee", not TF32); fp16/bf16: tensor-core products
                # of the storage dtype; the interpreter multiplies in fp32 (its tl.dot mishandles bf16)
                PRECISION="ieee", DOT_F32=values.dtype == torch.float32 or INTERPRETED)


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
        config = launch_config(values)
        if steps and batch * heads:
            _rel_fwd[row_grid(batch * heads, triton.cdiv(steps, config["BLOCK_T"]))](
                table_c, pos, cen, lens, values_c, prefix, suffix, out, lse, heads, steps, keys, pq, dim,
                K=k, CAUSAL=bool(causal), BLOCK_W=next_power_of_2(width), **config)
        ctx.save_for_backward(table_c, values_c, pos, cen, lens, prefix, suffix, out, lse, key_lengths)
        ctx.sizes, ctx.causal = (k, batch, heads, steps, keys, pq, dim), bool(causal)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        table, values, pos, cen, lens, prefix, suffix, out, lse, key_lengths = ctx.saved_tensors
        k, batch, heads, steps, keys, pq, dim = ctx.sizes
        dtable = torch.zeros(table.shape, dtype=torch.float32, device=table.device)
        dvals = torch.zeros(values.shape, dtype=torch.float32, device=values.device)
        dprefix = torch.zeros_like(prefix)
        dsuffix = torch.zeros_like(suffix)
        config = launch_config(values, backward=True)
        if steps and batch * heads:
            _rel_bwd[row_grid(batch * heads, triton.cdiv(steps, config["BLOCK_T"]))](
                table, pos, cen, lens, values, prefix, suffix, out, grad_out.to(values.dtype).contiguous(), lse,
                dtable, dvals, dprefix, dsuffix, heads, steps, keys, pq, dim, K=k, CAUSAL=ctx.causal, **config)
        # prefix[i] = sum_{m<i} v_m -> dv_m += sum_{i>m} dprefix[i]; suffix[i] = sum_{m>=i} v_m -> dv_m += sum_{i<=m}
        dvals += torch.cumsum(dprefix[:, :, 1:].flip(2), dim=2).flip(2)
        dvals += torch.cumsum(dsuffix[:, :, :keys], dim=2)
        real = torch.arange(keys, device=values.device) < key_lengths[:, None]
        dvals *= real[:, None, :, None]
        return dtable.to(table.dtype), dvals.to(values.dtype), None, None, None, None


def relative_mixing_triton(table, query_positions, values, key_lengths, centre, causal):
    check_runnable(values)
    return RelativeWindowMixing.apply(table, values, query_positions, centre, key_lengths, causal)


@triton.jit
def _decode(rows, wvals, wvalid, far_sum, far_count, out, H, K, DH,
            BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    bh, b, _ = program_row(H)
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


def relative_decode_triton(energy_rows, recent_values, recent_valid, far_sum, far_count):
    check_runnable(recent_values)
    batch, heads, k, dim = recent_values.shape
    out = torch.empty(batch, heads, dim, dtype=recent_values.dtype, device=recent_values.device)
    if batch * heads:
        _decode[(batch * heads,)](energy_rows.contiguous(), recent_values.contiguous(),
                                  recent_valid.to(torch.int8).contiguous(), far_sum.contiguous(),
                                  far_count.contiguous(), out, heads, k, dim,
                                  BLOCK_K=max(2, next_power_of_2(k)), BLOCK_D=max(16, next_power_of_2(dim)))
    return out


@triton.jit
def _gelu_and_grad(x):
    cdf = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    return x * cdf, cdf + x * 0.3989422804014327 * tl.exp(-0.5 * x * x)


@triton.jit
def _gelu_ln_fwd(x, w, b, y, mean_out, rstd_out, R, D, eps, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    msk = (r < R)[:, None] & (d < D)[None, :]
    xv = tl.load(x + r[:, None] * D + d[None, :], mask=msk, other=0.0).to(tl.float32)
    g, _ = _gelu_and_grad(xv)
    g = tl.where(msk, g, 0.0)
    mean = tl.sum(g, axis=1) / D
    cen = tl.where(msk, g - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(cen * cen, axis=1) / D + eps)
    wv = tl.load(w + d, mask=d < D, other=0.0).to(tl.float32)
    bv = tl.load(b + d, mask=d < D, other=0.0).to(tl.float32)
    out = cen * rstd[:, None] * wv[None, :] + bv[None, :]
    tl.store(y + r[:, None] * D + d[None, :], out.to(y.dtype.element_ty), mask=msk)
    tl.store(mean_out + r, mean, mask=r < R)
    tl.store(rstd_out + r, rstd, mask=r < R)


@triton.jit
def _gelu_ln_bwd(x, w, dy, mean_in, rstd_in, dx, dw_part, db_part, R, D,
                 BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    r = pid.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    msk = (r < R)[:, None] & (d < D)[None, :]
    xv = tl.load(x + r[:, None] * D + d[None, :], mask=msk, other=0.0).to(tl.float32)
    g, dg_dx = _gelu_and_grad(xv)
    mean = tl.load(mean_in + r, mask=r < R, other=0.0)
    rstd = tl.load(rstd_in + r, mask=r < R, other=0.0)
    xhat = tl.where(msk, (g - mean[:, None]) * rstd[:, None], 0.0)
    wv = tl.load(w + d, mask=d < D, other=0.0).to(tl.float32)
    gy = tl.load(dy + r[:, None] * D + d[None, :], mask=msk, other=0.0).to(tl.float32)
    dxhat = gy * wv[None, :]
    c1 = tl.sum(dxhat * xhat, axis=1) / D
    c2 = tl.sum(dxhat, axis=1) / D
    dg = (dxhat - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]
    tl.store(dx + r[:, None] * D + d[None, :], (dg * dg_dx).to(dx.dtype.element_ty), mask=msk)
    tl.store(dw_part + pid * D + d, tl.sum(gy * xhat, axis=0), mask=d < D)
    tl.store(db_part + pid * D + d, tl.sum(gy, axis=0), mask=d < D)


@triton.jit
def _gelu_gate_fwd(c, g, y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    gv = tl.load(g + i, mask=m, other=0.0).to(tl.float32)
    act, _ = _gelu_and_grad(gv)
    cv = tl.load(c + i, mask=m, other=0.0).to(tl.float32)
    tl.store(y + i, (cv * act).to(y.dtype.element_ty), mask=m)


@triton.jit
def _gelu_gate_bwd(c, g, dy, dc, dg, N, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    gv = tl.load(g + i, mask=m, other=0.0).to(tl.float32)
    act, dact = _gelu_and_grad(gv)
    cv = tl.load(c + i, mask=m, other=0.0).to(tl.float32)
    gy = tl.load(dy + i, mask=m, other=0.0).to(tl.float32)
    tl.store(dc + i, (gy * act).to(dc.dtype.element_ty), mask=m)
    tl.store(dg + i, (gy * cv * dact).to(dg.dtype.element_ty), mask=m)


def _rows_config(dim: int):
    block_d = max(16, next_power_of_2(dim))
    return max(1, min(16, 4096 // block_d)), block_d


class GeluLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dim = x.size(-1)
        x2 = x.contiguous().view(-1, dim)
        rows = x2.size(0)
        y = torch.empty_like(x2)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        block_r, block_d = _rows_config(dim)
        if rows:
            _gelu_ln_fwd[(triton.cdiv(rows, block_r),)](x2, weight.contiguous(), bias.contiguous(), y, mean, rstd,
                                                        rows, dim, float(eps), BLOCK_R=block_r, BLOCK_D=block_d)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, grad_y):
        x2, weight, mean, rstd = ctx.saved_tensors
        rows, dim = x2.shape
        block_r, block_d = _rows_config(dim)
        programs = triton.cdiv(rows, block_r)
        dx = torch.empty_like(x2)
        dw_part = torch.zeros(max(programs, 1), dim, dtype=torch.float32, device=x2.device)
        db_part = torch.zeros(max(programs, 1), dim, dtype=torch.float32, device=x2.device)
        if rows:
            _gelu_ln_bwd[(programs,)](x2, weight.contiguous(), grad_y.contiguous().view(-1, dim), mean, rstd, dx,
                                      dw_part, db_part, rows, dim, BLOCK_R=block_r, BLOCK_D=block_d)
        return (dx.view(ctx.shape), dw_part.sum(0).to(weight.dtype), db_part.sum(0).to(weight.dtype), None)


class GeluGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, context, gate_preact):
        c, g = context.contiguous(), gate_preact.contiguous()
        y = torch.empty_like(c)
        n = c.numel()
        if n:
            _gelu_gate_fwd[(triton.cdiv(n, 1024),)](c, g, y, n, BLOCK=1024)
        ctx.save_for_backward(c, g)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        c, g = ctx.saved_tensors
        dc, dg = torch.empty_like(c), torch.empty_like(g)
        n = c.numel()
        if n:
            _gelu_gate_bwd[(triton.cdiv(n, 1024),)](c, g, grad_y.contiguous(), dc, dg, n, BLOCK=1024)
        return dc, dg


def gelu_layernorm_triton(x, weight, bias, eps):
    check_runnable(x)
    return GeluLayerNorm.apply(x, weight, bias, eps)


def gelu_gate_triton(context, gate_preact):
    check_runnable(context)
    return GeluGate.apply(context, gate_preact)
