"""Backend selection for the position-attention kernels: ``auto``, ``torch`` or ``triton``.

Precedence: the ``backend=`` argument of a call, else :func:`set_backend`, else the environment
variable ``POSMIX_KERNELS``, else ``auto``. ``auto`` runs the Triton kernels on CUDA tensors when
Triton imports, and the PyTorch implementations otherwise. Forcing ``triton`` where it cannot run
(Triton not installed, or CPU tensors without ``TRITON_INTERPRET=1``, or an unsupported device)
raises a :class:`KernelBackendError` naming the setting and its valid values: never a silent
fallback.
"""
import functools
import importlib
import importlib.util
import os
from typing import Optional

import torch

BACKENDS = ("auto", "torch", "triton")
ENV_VAR = "POSMIX_KERNELS"

_global_backend: Optional[str] = None


class KernelBackendError(RuntimeError):
    """A backend was asked for that cannot run here, or an unknown backend name was given."""


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
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        importlib.import_module("triton.language")
    except Exception:  # a broken install counts as missing
        return False
    return True


def interpreter_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _triton_unusable_reason(device: torch.device) -> Optional[str]:
    if not triton_available():
        return "Triton is not installed (pip install 'triton' on Linux x86-64; see constraints.txt)"
    if device.type == "cuda":
        return None
    if device.type == "cpu":
        if interpreter_enabled():
            return None
        return "the tensors are on the CPU and TRITON_INTERPRET=1 is not set (the Triton interpreter runs CPU tensors)"
    return f"device type {device.type!r} is not supported by the Triton kernels (cuda, or cpu with TRITON_INTERPRET=1)"


def resolve(backend: Optional[str], device: torch.device) -> str:
    """``"torch"`` or ``"triton"`` for a call on tensors of ``device``."""
    name, setting = requested(backend)
    if name == "torch":
        return "torch"
    if name == "auto":  # Triton for CUDA tensors only (the interpreter is for tests, far slower than torch)
        return "triton" if device.type == "cuda" and triton_available() else "torch"
    reason = _triton_unusable_reason(device)
    if reason is not None:
        raise KernelBackendError(
            f"{setting} asks for the 'triton' kernel backend, but {reason}; valid values: "
            f"{', '.join(BACKENDS)} (use 'torch' or 'auto' here)")
    return "triton"
