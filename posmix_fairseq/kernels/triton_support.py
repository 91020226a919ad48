"""Guards and device helpers shared by the Triton kernel modules (imported only when Triton is available).

Triton decides once, when it is first imported, whether its kernels (its own library functions
included) are compiled or interpreted: the TRITON_INTERPRET variable must be set before that.
"""
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .dispatch import interpreter_enabled

#: True when Triton was imported in interpreter mode (every kernel then runs on CPU tensors).
INTERPRETED = not isinstance(tl.standard.sum, JITFunction)


def check_runnable(tensor: torch.Tensor) -> None:
    if tensor.device.type == "cpu" and not INTERPRETED:
        raise RuntimeError(
            "posmix_fairseq.kernels: Triton was imported without TRITON_INTERPRET=1, so its kernels cannot run on "
            "CPU tensors" + (" (TRITON_INTERPRET was set after Triton's first import: set it before the process "
                             "imports Triton)" if interpreter_enabled() else "") + "; use backend='torch' or 'auto' here")


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
