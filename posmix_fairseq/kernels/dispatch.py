"""One kernel call with the backend it is given, ``torch``, ``triton`` or ``auto`` (docs/gpu.md, "Dispatch"):
what Triton can run, and running it. It decides no sublayer's kernels: a model's calls pass what their
sublayer's kernels say (:mod:`.choice`, which also handles a Triton kernel that fails). ``auto``, a direct
call's default, is Triton where it runs without the interpreter (CUDA tensors, Triton installed).
"""
import functools
import importlib
import os
from typing import Callable, Optional

import torch

from . import common

BACKENDS = ("auto", "torch", "triton")
#: storage dtypes the Triton kernels accept (they compute in fp32)
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class KernelBackendError(RuntimeError):
    """A backend was asked for that cannot run here, or an unknown backend name was given."""


class TritonKernelError(KernelBackendError):
    """A Triton kernel raised (Triton imports but cannot build or launch it: no C compiler, a compiler error)."""


class TritonFallbackWarning(UserWarning):
    """A Triton kernel a sublayer's defaults chose failed at its first call; that part of the sublayer runs PyTorch."""


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    """True when the ``triton`` package is installed and imports (checked once per process)."""
    try:
        importlib.import_module("triton.language")
    except Exception:  # not installed, or a broken install: both count as missing
        return False
    return True


def interpreter_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def resolve(backend: Optional[str], device: torch.device) -> str:
    """``"torch"`` or ``"triton"`` for a call on tensors of ``device`` asking for ``backend`` (None: ``auto``)."""
    backend = "auto" if backend is None else backend
    if backend not in BACKENDS:
        raise KernelBackendError(f"backend={backend!r} is not a kernel backend; valid values: {', '.join(BACKENDS)}")
    if backend == "torch":
        return "torch"
    if backend == "auto":  # the interpreter is for tests, far slower than PyTorch
        return "triton" if triton_available() and common.on_gpu(device) else "torch"
    if not triton_available():
        reason = "Triton is not installed (pip install 'triton' on Linux x86-64; see constraints.txt)"
    elif common.on_gpu(device) or interpreter_enabled():
        return "triton"
    else:
        reason = ("the tensors are on the CPU and TRITON_INTERPRET=1 is not set (the Triton interpreter runs CPU "
                  "tensors)")
    raise KernelBackendError(f"backend asks for the 'triton' kernel backend, but {reason}; valid values: "
                             f"{', '.join(BACKENDS)} (use 'torch' or 'auto' here)")


def triton_module():
    """The Triton kernels, imported at their first use (Triton is optional)."""
    return importlib.import_module(f"{__package__}.triton_kernels")


def run(kernel: str, backend: Optional[str], tensors: tuple, triton_call: Callable, torch_call: Callable,
        forward_only: bool = False):
    """``triton_call()`` where ``backend`` resolves to Triton for ``tensors``, else ``torch_call()``.
    Triton has no kernel for float64 inputs, nor a backward for a ``forward_only`` kernel: ``auto`` runs
    PyTorch for them, ``triton`` is a :class:`KernelBackendError`. A Triton kernel that raises is a
    :class:`TritonKernelError` naming it."""
    if resolve(backend, tensors[0].device) != "triton":
        return torch_call()
    floats = [t for t in tensors if t.is_floating_point()]
    bad = sorted({str(t.dtype) for t in floats if t.dtype not in TRITON_DTYPES})
    needs_grad = forward_only and torch.is_grad_enabled() and any(t.requires_grad for t in floats)
    if backend == "triton" and bad:
        raise KernelBackendError(f"backend asks for the 'triton' kernel backend, which supports "
                                 f"float32, float16 and bfloat16, not {', '.join(bad)}; use 'torch' or 'auto'")
    if backend == "triton" and needs_grad:
        raise KernelBackendError(f"backend asks for the Triton {kernel}, which is forward-only; run it under "
                                 "torch.no_grad() or use 'torch' or 'auto' to differentiate it")
    if bad or needs_grad:
        return torch_call()
    try:
        return triton_call()
    except Exception as exc:  # noqa: BLE001  (whatever Triton raises while building or launching the kernel)
        raise TritonKernelError(f"backend asks for the 'triton' kernel backend, but the Triton kernel {kernel} "
                                f"failed ({type(exc).__name__}: {str(exc).strip()[:300]}); valid values: "
                                f"{', '.join(BACKENDS)} (use 'torch' or 'auto' here)") from exc
