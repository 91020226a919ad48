"""Backend selection for the position-attention kernels: ``auto``, ``torch`` or ``triton`` (docs/gpu.md, "Dispatch").

Precedence: the ``backend=`` argument of a call, else :func:`set_backend`, else ``POSMIX_KERNELS``, else
``auto`` (Triton for CUDA tensors when it imports). Forcing ``triton`` where it cannot run is a
:class:`KernelBackendError`, never a silent fallback; :func:`run_triton` handles a kernel that fails
at its first call.
"""
import functools
import importlib
import os
import warnings
from typing import Callable, Optional

import torch

from . import common

BACKENDS = ("auto", "torch", "triton")
ENV_VAR = "POSMIX_KERNELS"

_global_backend: Optional[str] = None


class KernelBackendError(RuntimeError):
    """A backend was asked for that cannot run here, or an unknown backend name was given."""


class TritonFallbackWarning(UserWarning):
    """A Triton kernel failed at its first call; the process runs the PyTorch implementations."""


#: ``failure``: why a Triton kernel failed at its first call in this process (None: none has);
#: ``proven``: the kernels (by name) that have run once
TRITON_STATE = {"failure": None, "proven": set()}


def _check_name(name: str, setting: str) -> str:
    if name not in BACKENDS:
        raise KernelBackendError(f"{setting}={name!r} is not a kernel backend; valid values: {', '.join(BACKENDS)}")
    return name


def set_backend(name: Optional[str]) -> None:
    """Set the process-wide backend (``None`` returns to the ``POSMIX_KERNELS`` / ``auto`` default)."""
    global _global_backend
    _global_backend = None if name is None else _check_name(name, "set_backend(name)")


def get_backend() -> str:
    """The backend requested for calls that pass no ``backend=`` (``auto`` when nothing is set)."""
    return requested(None)[0]


def requested(backend: Optional[str]) -> tuple:
    """(name, setting): the backend asked for and where it was set (argument, set_backend(), env, auto)."""
    if backend is not None:
        return _check_name(backend, "backend"), "backend"
    if _global_backend is not None:
        return _global_backend, "set_backend()"
    env = os.environ.get(ENV_VAR)
    if env:
        return _check_name(env, ENV_VAR), ENV_VAR
    return "auto", "auto"


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
    """``"torch"`` or ``"triton"`` for a call on tensors of ``device``."""
    name, setting = requested(backend)
    if name == "torch":
        return "torch"
    if name == "auto":  # Triton for CUDA tensors only (the interpreter is for tests, far slower than torch)
        usable = triton_available() and TRITON_STATE["failure"] is None
        return "triton" if common.on_gpu(device) and usable else "torch"
    if not triton_available():
        reason = "Triton is not installed (pip install 'triton' on Linux x86-64; see constraints.txt)"
    elif common.on_gpu(device) or (device.type == "cpu" and interpreter_enabled()):
        return "triton"
    elif device.type == "cpu":
        reason = ("the tensors are on the CPU and TRITON_INTERPRET=1 is not set (the Triton interpreter runs CPU "
                  "tensors)")
    else:
        reason = (f"device type {device.type!r} is not supported by the Triton kernels (cuda, or cpu with "
                  "TRITON_INTERPRET=1)")
    raise KernelBackendError(f"{setting} asks for the 'triton' kernel backend, but {reason}; valid values: "
                             f"{', '.join(BACKENDS)} (use 'torch' or 'auto' here)")


def run_triton(kernel: str, backend: Optional[str], triton_call: Callable, torch_call: Callable):
    """``triton_call()``, the Triton kernel ``kernel`` that :func:`resolve` chose for ``backend``; if it
    fails at its first call, ``torch_call()`` with one :class:`TritonFallbackWarning` per process (asked
    for by ``auto``, which then runs PyTorch for the rest of the process) or a :class:`KernelBackendError`
    naming the setting (forced). A kernel that has run once propagates its errors."""
    if kernel in TRITON_STATE["proven"]:
        return triton_call()
    try:
        out = triton_call()
    except Exception as exc:  # noqa: BLE001  (whatever Triton raises while building the kernel)
        name, setting = requested(backend)
        why = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        if name == "triton":
            raise KernelBackendError(f"{setting} asks for the 'triton' kernel backend, but the Triton kernel {kernel} "
                                     f"failed at its first call ({why}); valid values: {', '.join(BACKENDS)} (use "
                                     "'torch' or 'auto' here)") from exc
        if TRITON_STATE["failure"] is None:
            TRITON_STATE["failure"] = f"{kernel}: {why}"
            warnings.warn(f"posmix_fairseq: the Triton kernel {kernel} failed at its first call ({why}); this process "
                          "runs the PyTorch implementations instead (docs/gpu.md: what Triton needs at run time)",
                          TritonFallbackWarning, stacklevel=4)
        return torch_call()
    TRITON_STATE["proven"].add(kernel)
    return out
