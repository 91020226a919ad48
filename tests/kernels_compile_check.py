"""Compile every Triton kernel of posmix_fairseq.kernels to a CUDA binary without a GPU (Triton's
ahead-of-time path with its bundled ptxas), so that CI on a CPU catches what the interpreter
accepts but the compiler rejects. Run by tests/test_kernels.py in a subprocess (no
TRITON_INTERPRET): ``python tests/kernels_compile_check.py [--arch 90] [--dtype bf16 ...]``.
"""
import argparse
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from posmix_fairseq.kernels import triton_absolute, triton_decode, triton_gating, triton_relative  # noqa: E402


def jobs(dtype, head_dim=64, k=16):
    """(kernel, argument types, constexprs) of every kernel, as the wrappers launch them."""
    i32, f32p, vt = "i32", "*fp32", f"*{dtype}"
    mixing = dict(table=vt, pos="*i32", cen="*i32", lens="*i32", vals=vt, prefix=f32p, suffix=f32p, out=vt,
                  lse=f32p, dout=vt, dtable=f32p, dvals=f32p, dprefix=f32p, dsuffix=f32p,
                  H=i32, T=i32, S=i32, PQ=i32, PK=i32, DH=i32)
    absolute = dict(mixing, dvals=vt)
    block = dict(BLOCK_T=32, BLOCK_D=head_dim)
    dense = dict(BLOCK_T=32, BLOCK_N=32, BLOCK_D=head_dim, PRECISION="ieee", DOT_F32=dtype == "fp32")
    rows = dict(x=vt, w=vt, b=vt, y=vt, mean_out=f32p, rstd_out=f32p, dy=vt, mean_in=f32p, rstd_in=f32p, dx=vt,
                dw_part=f32p, db_part=f32p, R=i32, D=i32, eps="fp32")
    gate = dict(c=vt, g=vt, y=vt, dy=vt, dc=vt, dg=vt, N=i32)
    return [
        (triton_relative._rel_fwd, mixing, dict(K=k, CAUSAL=True, **block)),
        (triton_relative._rel_bwd, mixing, dict(K=k, CAUSAL=False, **block)),
        (triton_absolute._abs_fwd, absolute, dict(CAUSAL=True, **dense)),
        (triton_absolute._abs_bwd_dv, absolute, dict(CAUSAL=True, **dense)),
        (triton_absolute._abs_bwd_de, absolute, dict(CAUSAL=False, **dense)),
        (triton_decode._decode, dict(rows=vt, wvals=vt, wvalid="*i8", far_sum=f32p, far_count="*i64", out=vt,
                                     H=i32, K=i32, DH=i32), dict(BLOCK_K=16, BLOCK_D=head_dim)),
        (triton_gating._gelu_ln_fwd, rows, dict(BLOCK_R=8, BLOCK_D=512)),
        (triton_gating._gelu_ln_bwd, rows, dict(BLOCK_R=8, BLOCK_D=512)),
        (triton_gating._gelu_gate_fwd, gate, dict(BLOCK=1024)),
        (triton_gating._gelu_gate_bwd, gate, dict(BLOCK=1024)),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, nargs="+", default=[90], help="CUDA compute capabilities (90 = H100)")
    ap.add_argument("--dtype", nargs="+", default=["bf16"], choices=["bf16", "fp16", "fp32"])
    args = ap.parse_args(argv)
    failures = 0
    for arch in args.arch:
        for dtype in args.dtype:
            for fn, types, consts in jobs(dtype):
                signature = {name: "constexpr" if name in consts else types[name] for name in fn.arg_names}
                try:
                    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts),
                                            target=GPUTarget("cuda", arch, 32))
                    print(f"ok sm_{arch} {dtype} {fn.__name__} ({len(kernel.asm['cubin'])} bytes)")
                except Exception as exc:  # report every kernel, then fail
                    failures += 1
                    print(f"FAILED sm_{arch} {dtype} {fn.__name__}: {type(exc).__name__}: {exc}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
