"""Kernels of gated position-based attention: PyTorch references and Triton kernels.

The primitives (rPosNet mixing, GPA Eqs. 9-10; its constant-state decoding step; the gating of Eq. 4),
their conventions (left-aligned values, fp32 softmax, 0 for a query without keys) and backends are
described in docs/gpu.md. Imports without fairseq (only torch; Triton when installed).
"""
import importlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from . import dispatch
from .common import centres, check_mixing_inputs
from .decode_step import RelativeDecodeState, check_decode_state, relative_decode_reference
from .dispatch import BACKENDS, KernelBackendError, get_backend, set_backend, triton_available
from .relative_mixing import relative_mixing_dense, relative_mixing_window

__all__ = [
    "relative_position_mixing", "relative_decode_step", "RelativeDecodeState",
    "gelu_layernorm", "gelu_gate", "set_backend", "get_backend", "triton_available", "KernelBackendError",
    "BACKENDS", "RELATIVE_IMPLS",
]

#: PyTorch implementations of rPosNet mixing (``impl=`` of :func:`relative_position_mixing`).
RELATIVE_IMPLS = ("dense", "window")
#: Storage dtypes the Triton kernels accept (they compute in fp32).
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _triton_module():
    """The Triton kernels, imported at their first use (Triton is optional)."""
    return importlib.import_module(f"{__name__}.triton_kernels")


def _run(kernel: str, backend: Optional[str], tensors: tuple, triton_call, torch_call, forward_only: bool = False):
    """``triton_call()`` where ``backend`` resolves to Triton for ``tensors`` (through :func:`.dispatch.run_triton`,
    which falls back to ``torch_call()`` where allowed), else ``torch_call()``. Triton has no kernel for float64
    inputs, nor a backward for a ``forward_only`` kernel: ``auto`` runs torch for them, a forced ``triton`` is an
    error."""
    if dispatch.resolve(backend, tensors[0].device) != "triton":
        return torch_call()
    floats = [t for t in tensors if t.is_floating_point()]
    bad = sorted({str(t.dtype) for t in floats if t.dtype not in TRITON_DTYPES})
    needs_grad = forward_only and torch.is_grad_enabled() and any(t.requires_grad for t in floats)
    if not (bad or needs_grad):
        return dispatch.run_triton(kernel, backend, triton_call, torch_call)
    requested, setting = dispatch.requested(backend)
    if requested == "triton" and bad:
        raise KernelBackendError(f"{setting} asks for the 'triton' kernel backend, which supports "
                                 f"float32, float16 and bfloat16, not {', '.join(bad)}; use 'torch' or 'auto'")
    if requested == "triton":
        raise KernelBackendError(f"{setting} asks for the 'triton' decoding step, which is forward-only; run it "
                                 "under torch.no_grad() or use 'torch' or 'auto' to differentiate it")
    return torch_call()


def _no_keys(table: Tensor, values: Tensor, steps: int) -> Tensor:
    """No key slot at all (S = 0): every query gets 0, still connected to both inputs' graphs
    (the sums over empty tensors are exact zeros, whatever the table holds)."""
    batch, heads, _, dim = values.shape
    zero = values.sum(2, keepdim=True) + table.reshape(-1)[:0].sum().to(values.dtype)
    return zero.expand(batch, heads, steps, dim)


def relative_position_mixing(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                             length_ratio: float = 1.0, causal: bool = False, backend: Optional[str] = None,
                             impl: str = "window") -> Tensor:
    """rPosNet mixing (Eqs. 9-10) from a table of energies; (B, H, T, Dh), differentiable w.r.t. ``table`` and
    ``values``. ``table`` (H, Pq, 2K+1): the energy of a query at position p for the clipped distance index
    j = clip(floor(gamma p) - m, -K, K) + K (``length_ratio`` = gamma). ``impl``: the PyTorch ``"window"``
    form (the band plus far sums) or the ``"dense"`` reference; the Triton backend runs the window form."""
    if impl not in RELATIVE_IMPLS:
        raise ValueError(f"impl={impl!r} is not an rPosNet mixing implementation; valid values: "
                         f"{', '.join(RELATIVE_IMPLS)}")
    if table.dim() != 3 or table.size(-1) % 2 != 1:
        raise ValueError(f"relative_position_mixing: table must be (H, Pq, 2K+1) with an odd last axis, "
                         f"got {tuple(table.shape)}")
    batch, heads, steps, keys, dim = check_mixing_inputs("relative_position_mixing", table, query_positions,
                                                         values, key_lengths)
    centre = centres(query_positions, length_ratio)
    if keys == 0:
        return _no_keys(table, values, steps)
    fn = relative_mixing_window if impl == "window" else relative_mixing_dense
    return _run("relative window mixing", backend, (table, values),
                lambda: _triton_module().relative_mixing_triton(table, query_positions, values, key_lengths, centre,
                                                                causal),
                lambda: fn(table, query_positions, values, key_lengths, length_ratio, causal))


def relative_decode_step(energy_rows: Tensor, window_values: Tensor, window_valid: Tensor, far_sum: Tensor,
                         far_count: Tensor, backend: Optional[str] = None) -> Tensor:
    """One query per hypothesis of constant-state rPosNet decoder self-attention; (B, H, Dh).
    ``energy_rows`` (B, H, 2K+1): the table row of the current position; the state (:class:`RelativeDecodeState`)
    holds the last K values and the sum and count of the older ones. The Triton kernel is forward-only
    (search needs no gradient): ``auto`` runs PyTorch when a gradient is needed."""
    check_decode_state(window_values, window_valid, far_sum, far_count, energy_rows)
    state = (window_values, window_valid, far_sum, far_count)
    return _run("decoding step", backend, (energy_rows, window_values, far_sum),
                lambda: _triton_module().relative_decode_triton(energy_rows, *state),
                lambda: relative_decode_reference(energy_rows, *state), forward_only=True)


def gelu_layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5,
                   backend: Optional[str] = None) -> Tensor:
    """LayerNorm(GeLU(x)) over the last axis: v_m of GPA Eq. 4 for x = W^V x_m, with the exact (erf) GeLU
    (GPA Section 2.3)."""
    if weight.shape != (x.size(-1),) or bias.shape != (x.size(-1),):
        raise ValueError(f"gelu_layernorm: weight and bias must be ({x.size(-1)},), got {tuple(weight.shape)} and "
                         f"{tuple(bias.shape)}")
    return _run("gelu_layernorm", backend, (x, weight, bias),
                lambda: _triton_module().gelu_layernorm_triton(x, weight, bias, eps),
                lambda: F.layer_norm(F.gelu(x), (x.size(-1),), weight, bias, eps))


def gelu_gate(context: Tensor, gate_preact: Tensor, backend: Optional[str] = None) -> Tensor:
    """context * GeLU(gate_preact): the gate of GPA Eq. 4 (gate_preact = W^G y_n; exact GeLU)."""
    if context.shape != gate_preact.shape:
        raise ValueError(f"gelu_gate: context and gate_preact must have the same shape, got {tuple(context.shape)} "
                         f"and {tuple(gate_preact.shape)}")
    return _run("gelu_gate", backend, (context, gate_preact),
                lambda: _triton_module().gelu_gate_triton(context, gate_preact),
                lambda: context * F.gelu(gate_preact))
