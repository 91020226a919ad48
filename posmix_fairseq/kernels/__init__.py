"""Kernels of gated position-based attention: PyTorch references and Triton kernels.

The primitives (rPosNet mixing, GPA Eqs. 9-10; its constant-state decoding step; the gating of Eq. 4),
their conventions (left-aligned values, fp32 softmax, 0 for a query without keys) and backends are
described in docs/gpu.md. Imports without fairseq (only torch; Triton when installed).
"""
from typing import Optional

import torch.nn.functional as F
from torch import Tensor

from . import dispatch
from .common import centres, check_mixing_inputs
from .decode_step import RelativeDecodeState, relative_decode_step
from .dispatch import BACKENDS, KernelBackendError, TritonKernelError, triton_available
from .relative_mixing import relative_mixing_dense, relative_mixing_window

__all__ = [
    "relative_position_mixing", "relative_decode_step", "RelativeDecodeState", "gelu_layernorm", "gelu_gate",
    "triton_available", "KernelBackendError", "TritonKernelError", "BACKENDS", "RELATIVE_IMPLS",
]

#: PyTorch implementations of rPosNet mixing (``impl=`` of :func:`relative_position_mixing`).
RELATIVE_IMPLS = ("dense", "window")


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
    return dispatch.run("relative window mixing", backend, (table, values),
                        lambda: dispatch.triton_module().relative_mixing_triton(table, query_positions, values,
                                                                                      key_lengths, centre, causal),
                        lambda: fn(table, query_positions, values, key_lengths, length_ratio, causal))


def gelu_layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5,
                   backend: Optional[str] = None) -> Tensor:
    """LayerNorm(GeLU(x)) over the last axis: v_m of GPA Eq. 4 for x = W^V x_m, with the exact (erf) GeLU
    (GPA Section 2.3)."""
    if weight.shape != (x.size(-1),) or bias.shape != (x.size(-1),):
        raise ValueError(f"gelu_layernorm: weight and bias must be ({x.size(-1)},), got {tuple(weight.shape)} and "
                         f"{tuple(bias.shape)}")
    return dispatch.run("gelu_layernorm", backend, (x, weight, bias),
                        lambda: dispatch.triton_module().gelu_layernorm_triton(x, weight, bias, eps),
                        lambda: F.layer_norm(F.gelu(x), (x.size(-1),), weight, bias, eps))


def gelu_gate(context: Tensor, gate_preact: Tensor, backend: Optional[str] = None) -> Tensor:
    """context * GeLU(gate_preact): the gate of GPA Eq. 4 (gate_preact = W^G y_n; exact GeLU)."""
    if context.shape != gate_preact.shape:
        raise ValueError(f"gelu_gate: context and gate_preact must have the same shape, got {tuple(context.shape)} "
                         f"and {tuple(gate_preact.shape)}")
    return dispatch.run("gelu_gate", backend, (context, gate_preact),
                        lambda: dispatch.triton_module().gelu_gate_triton(context, gate_preact),
                        lambda: context * F.gelu(gate_preact))
