"""What one beam-search step asks of the device, counted by torch.profiler: operators, scalar reads and kernels.

At small batches a GPU's decoding step is bound by how much work it launches and by the scalar reads that make
the host wait for the device, more than by arithmetic. These counts compare models on that on any machine, and
on a GPU add the kernels themselves:

- *operators*: the outermost ``aten`` operators that compute (views, reshapes, dtype no-ops and metadata reads
  are left out, :data:`NO_KERNEL`); on a GPU each launches one kernel or more;
- *scalar reads*: ``aten::_local_scalar_dense`` (``.item()``, ``bool(tensor)``), each a wait for the device on a
  GPU;
- *kernels* (CUDA): the device activities the profiler records (kernels, copies, fills) and their device time.

A step's count is a difference: decoding ``long`` output tokens minus decoding ``short``, divided by
``long - short``. The encoder, the first step's cross-attention keys and values and the search's set-up cancel.
"""
from collections import Counter
from typing import Callable, Dict, Iterable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile as torch_profile

#: aten operators that launch no kernel on a GPU themselves: views and metadata, and wrappers (``to``,
#: ``contiguous``, ``reshape``) that launch one only through an operator they call (``_to_copy``, ``clone``), which
#: is then counted in their place
NO_KERNEL = frozenset({
    "view", "reshape", "_reshape_alias", "_unsafe_view", "flatten", "unflatten", "transpose", "t", "permute",
    "movedim", "unsqueeze", "squeeze", "unsqueeze_", "squeeze_", "expand", "expand_as", "broadcast_to", "view_as",
    "slice", "select", "narrow", "diagonal", "as_strided", "alias", "detach", "detach_", "chunk", "split",
    "split_with_sizes", "unsafe_split", "unbind", "contiguous", "to", "type_as", "lift_fresh", "resolve_conj",
    "resolve_neg", "empty", "empty_like", "empty_strided", "size", "stride", "numel", "dim", "is_nonzero", "item",
    "result_type", "_local_scalar_dense"})
SCALAR_READ = "aten::_local_scalar_dense"


def _is_device_event(event) -> bool:
    return getattr(event, "device_type", DeviceType.CPU) != DeviceType.CPU


def _elapsed_us(event) -> float:
    time_range = getattr(event, "time_range", None)
    return float(time_range.elapsed_us()) if time_range is not None else 0.0


def _inside_an_operator(event) -> bool:
    """Whether ``event`` runs inside an operator that is counted (an aten operator outside NO_KERNEL)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::") and parent.name[len("aten::"):] not in NO_KERNEL:
            return True
        parent = parent.cpu_parent
    return False


def count_events(events: Iterable) -> Dict[str, object]:
    """{"operators", "scalar_reads", "kernels", "kernel_us", "by_operator" (a Counter of operator names without
    ``aten::``)} of a profile's events (torch.profiler's ``prof.events()``)."""
    counts = {"operators": 0, "scalar_reads": 0, "kernels": 0, "kernel_us": 0.0, "by_operator": Counter()}
    for event in events:
        if _is_device_event(event):
            counts["kernels"] += 1
            counts["kernel_us"] += _elapsed_us(event)
            continue
        if event.name == SCALAR_READ:
            counts["scalar_reads"] += 1
        name = event.name[len("aten::"):]
        if event.name.startswith("aten::") and name not in NO_KERNEL and not _inside_an_operator(event):
            counts["operators"] += 1
            counts["by_operator"][name] += 1
    return counts


def profile(run: Callable[[], object], device: str) -> Dict[str, object]:
    """:func:`count_events` of one call of ``run`` under torch.profiler (CPU activities; CUDA ones too on a GPU)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with torch_profile(activities=activities) as prof:
        run()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return count_events(prof.events())


def per_step(short: Dict[str, object], long: Dict[str, object], steps: int) -> Dict[str, object]:
    """The counts of one step: (``long`` - ``short``) / ``steps``, the operator breakdown included."""
    if steps <= 0:
        raise ValueError(f"per_step: steps must be positive, got {steps}")
    out = {key: (long[key] - short[key]) / steps for key in ("operators", "scalar_reads", "kernels", "kernel_us")}
    by_operator = Counter(long["by_operator"])
    by_operator.subtract(short["by_operator"])
    out["by_operator"] = {name: n / steps for name, n in by_operator.most_common() if n}
    return out
