"""Triton kernels of the gating epilogue (GPA Eq. 4), forward and backward, fp32 arithmetic whatever
the storage dtype: y = LayerNorm(GeLU(x)) (one program per BLOCK_R rows of D features) and
y = c * GeLU(g) (elementwise). GeLU is exact (erf), GeLU'(x) = Phi(x) + x phi(x). Imported only when
Triton is available.
"""
import torch
import triton
import triton.language as tl

from .common import next_power_of_2
from .triton_support import check_runnable


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
