"""Compile every Triton kernel of posmix_fairseq.kernels to a CUDA binary without a GPU (Triton's
ahead-of-time path with its bundled ptxas), so that CI on a CPU catches what the interpreter
accepts but the compiler rejects. Run by tests/test_kernels.py in a subprocess (no
TRITON_INTERPRET): ``python tests/kernels_compile_check.py [--arch 90] [--dtype bf16 ...] [--runtime]``
(``--runtime``: every specialization the archs launch, for each dtype).
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from posmix_fairseq.harness.benchmarks.kernel_candidates import triton_absolute  # noqa: E402
from posmix_fairseq.kernels import triton_kernels  # noqa: E402
from posmix_fairseq.kernels.common import next_power_of_2  # noqa: E402


def jobs(dtype, head_dim=64, k=16):
    """(kernel, argument types, constexprs) of every kernel, as the wrappers launch them."""
    i32, f32p, vt = "i32", "*fp32", f"*{dtype}"
    mixing = dict(table=vt, pos="*i32", cen="*i32", lens="*i32", vals=vt, prefix=f32p, suffix=f32p, out=vt,
                  lse=f32p, dout=vt, dtable=f32p, dvals=f32p, dprefix=f32p, dsuffix=f32p,
                  H=i32, T=i32, S=i32, PQ=i32, PK=i32, DH=i32)
    absolute = dict(mixing, dvals=vt)
    dense = dict(BLOCK_T=32, BLOCK_N=32, BLOCK_D=head_dim, PRECISION="ieee", DOT_F32=dtype == "fp32")
    relative = dict(dense, num_warps=8 if dtype == "fp32" else 4)  # as triton_kernels.launch_config
    relative_bwd = dict(dense, num_warps=8)
    rows = dict(x=vt, w=vt, b=vt, y=vt, mean_out=f32p, rstd_out=f32p, dy=vt, mean_in=f32p, rstd_in=f32p, dx=vt,
                dw_part=f32p, db_part=f32p, R=i32, D=i32, eps="fp32")
    gate = dict(c=vt, g=vt, y=vt, dy=vt, dc=vt, dg=vt, N=i32)
    return [
        (triton_kernels._rel_fwd, mixing, dict(K=k, CAUSAL=True, BLOCK_W=next_power_of_2(2 * k + 1), **relative)),
        (triton_kernels._rel_bwd, mixing, dict(K=k, CAUSAL=False, **relative_bwd)),
        (triton_absolute._abs_fwd, absolute, dict(CAUSAL=True, **dense)),
        (triton_absolute._abs_bwd_dv, absolute, dict(CAUSAL=True, **dense)),
        (triton_absolute._abs_bwd_de, absolute, dict(CAUSAL=False, **dense)),
        (triton_kernels._decode, dict(rows=vt, wvals=vt, wvalid="*i8", far_sum=f32p, far_count="*i64", out=vt,
                                       H=i32, K=i32, DH=i32), dict(BLOCK_K=16, BLOCK_D=head_dim)),
        (triton_kernels._gelu_ln_fwd, rows, dict(BLOCK_R=8, BLOCK_D=512)),
        (triton_kernels._gelu_ln_bwd, rows, dict(BLOCK_R=8, BLOCK_D=512)),
        (triton_kernels._gelu_gate_fwd, gate, dict(BLOCK=1024)),
        (triton_kernels._gelu_gate_bwd, gate, dict(BLOCK=1024)),
    ]


def runtime_jobs(dtype, head_dim=64):
    """Every specialization the registered archs launch at run time, beyond :func:`jobs`: the archs'
    K (16; 8 in *_big) with and without the causal mask for the rPosNet kernels, and the decoding
    step's window of each K (head dimension 64 in every arch: D / H = 512 / 8 and 1024 / 16)."""
    out = []
    for k in (8, 16):
        for fn, types, consts in jobs(dtype, head_dim, k):
            if fn in (triton_kernels._rel_fwd, triton_kernels._rel_bwd):
                for causal in (False, True):
                    out.append((fn, types, dict(consts, CAUSAL=causal)))
            elif fn is triton_kernels._decode:
                out.append((fn, types, dict(consts, BLOCK_K=max(2, next_power_of_2(k)))))
            elif k == 16:
                out.append((fn, types, consts))
    return out


def spill_count(cubin: bytes) -> str:
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return f"{sass.count('STL')} spill stores, {sass.count('LDL')} spill loads"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, nargs="+", default=[90], help="CUDA compute capabilities (90 = H100)")
    ap.add_argument("--dtype", nargs="+", default=["bf16"], choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--spills", action="store_true",
                    help="also count register spill stores/loads (STL/LDL) in each binary (cuobjdump -sass)")
    ap.add_argument("--runtime", action="store_true",
                    help="every specialization the archs launch at run time (runtime_jobs), not one per kernel")
    args = ap.parse_args(argv)
    print(f"Triton {triton.__version__}")
    failures = 0
    for arch in args.arch:
        for dtype in args.dtype:
            for fn, types, consts in (runtime_jobs if args.runtime else jobs)(dtype):
                consts = dict(consts)
                signature = {name: "constexpr" if name in consts else types[name] for name in fn.arg_names}
                warps = consts.pop("num_warps", 4)
                try:
                    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts),
                                            target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
                    extra = f", {spill_count(kernel.asm['cubin'])}" if args.spills else ""
                    what = ", ".join(f"{k}={consts[k]}" for k in ("K", "CAUSAL", "BLOCK_K") if k in consts)
                    print(f"ok sm_{arch} {dtype} {fn.__name__}{' (' + what + ')' if what else ''} "
                          f"({len(kernel.asm['cubin'])} bytes{extra})")
                except Exception as exc:  # report every kernel, then fail
                    failures += 1
                    print(f"FAILED sm_{arch} {dtype} {fn.__name__}: {type(exc).__name__}: {exc}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
