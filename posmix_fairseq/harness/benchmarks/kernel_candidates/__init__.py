"""Kernels no model path runs, kept where posmix-bench-gpu measures them against the model's paths:
aPosNet mixing (GPA Eq. 8) from an energy table by a flash-style Triton kernel
(:mod:`.triton_absolute`, its dense reference :mod:`.absolute_mixing`) and the FlexAttention
formulations of rPosNet and aPosNet mixing (:mod:`.flex`). The model's aPosNet mixes with its dense
energies on every device; a model path for one of these (a mixing path reading the aPosNet energy
table, as rPosNet's window path does) waits for GPU measurements that show a gain (docs/gpu.md).

:func:`absolute_position_mixing` takes the arguments and conventions of
``posmix_fairseq.kernels.relative_position_mixing`` (module docstring of posmix_fairseq.kernels).
"""
import importlib
from typing import Optional

from torch import Tensor

from posmix_fairseq import kernels
from posmix_fairseq.kernels.common import check_mixing_inputs
from posmix_fairseq.kernels.dispatch import run as run_kernel

from .absolute_mixing import absolute_mixing_dense


def absolute_position_mixing(table: Tensor, query_positions: Tensor, values: Tensor, key_lengths: Tensor,
                             causal: bool = False, backend: Optional[str] = None) -> Tensor:
    """aPosNet mixing (Eq. 8) from a table of energies E (H, Pq, Pk) indexed by query position and
    key position; (B, H, T, Dh). Differentiable w.r.t. ``table`` and ``values``."""
    batch, heads, steps, keys, dim = check_mixing_inputs("absolute_position_mixing", table, query_positions,
                                                         values, key_lengths, table_keys=table.size(2))
    if keys == 0:
        return kernels._no_keys(table, values, steps)
    return run_kernel("absolute mixing", backend, (table, values),
                      lambda: importlib.import_module(f"{__name__}.triton_absolute").absolute_mixing_triton(
                          table, query_positions, values, key_lengths, causal),
                      lambda: absolute_mixing_dense(table, query_positions, values, key_lengths, causal))
