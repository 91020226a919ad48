"""The device predicate, input checks and small helpers shared by the position-attention kernels (no fairseq import)."""
from typing import Optional, Tuple

import torch
from torch import Tensor


#: the device types :func:`on_gpu` accepts
DEVICE_TYPES = ("cpu", "cuda")


def on_gpu(device: torch.device) -> bool:
    """The one device predicate: True for CUDA tensors, False for CPU tensors, an error for any other device.

    On CUDA a sublayer runs its CUDA choice (:mod:`.choice`) and the checks that read tensor values run on
    the device (``torch._assert_async``) or are bounded by host-known sizes, since a host read there is a
    device synchronisation; on the CPU it runs its CPU choice and those checks read the values. A device that
    is neither would need both rules settled for it, so it is refused rather than given one half of each."""
    if device.type in DEVICE_TYPES:
        return device.type == "cuda"
    raise ValueError(f"posmix_fairseq mixers run on {' or '.join(DEVICE_TYPES)} tensors, got a tensor on "
                     f"{device.type!r}: move the model and its inputs to one of those devices")


def check_mixing_inputs(name: str, table: Tensor, query_positions: Tensor, values: Tensor,
                        key_lengths: Tensor, table_keys: Optional[int] = None) -> Tuple[int, int, int, int, int]:
    """Validate the conventions of the mixing primitives; returns (B, H, T, S, Dh). ``table`` (H, Pq, X)
    float; ``query_positions`` (B, T) integer in [0, Pq); ``values`` (B, H, S, Dh) float; ``key_lengths``
    (B,) integer in [0, S] (and <= ``table_keys`` when given: the key axis of an absolute table)."""
    if table.dim() != 3 or not table.is_floating_point():
        raise ValueError(f"{name}: table must be a float tensor (H, Pq, X), got {tuple(table.shape)} {table.dtype}")
    if values.dim() != 4 or not values.is_floating_point():
        raise ValueError(f"{name}: values must be a float tensor (B, H, S, Dh), "
                         f"got {tuple(values.shape)} {values.dtype}")
    batch, heads, keys, head_dim = values.shape
    if heads != table.size(0):
        raise ValueError(f"{name}: table has {table.size(0)} heads but values have {heads}")
    if query_positions.dim() != 2 or query_positions.size(0) != batch or query_positions.is_floating_point():
        raise ValueError(f"{name}: query_positions must be an integer tensor (B={batch}, T), "
                         f"got {tuple(query_positions.shape)} {query_positions.dtype}")
    if key_lengths.shape != (batch,) or key_lengths.is_floating_point():
        raise ValueError(f"{name}: key_lengths must be an integer tensor (B={batch},), "
                         f"got {tuple(key_lengths.shape)} {key_lengths.dtype}")
    devices = {table.device, query_positions.device, values.device, key_lengths.device}
    if len(devices) != 1:
        raise ValueError(f"{name}: all inputs must be on one device, got {sorted(str(d) for d in devices)}")
    steps = query_positions.size(1)
    limit = keys if table_keys is None else min(keys, table_keys)
    if on_gpu(values.device):  # no synchronisation: the bounds are checked on the device
        if query_positions.numel():
            torch._assert_async((query_positions.min() >= 0) & (query_positions.max() < table.size(1)),
                                f"{name}: query positions must lie in [0, {table.size(1)}) (the table's query axis)")
        if batch:
            torch._assert_async((key_lengths.min() >= 0) & (key_lengths.max() <= limit),
                                f"{name}: key_lengths must lie in [0, {limit}]")
        return batch, heads, steps, keys, head_dim
    empty = torch.zeros(1, dtype=torch.long, device=values.device)
    qp, kl = (query_positions if query_positions.numel() else empty), (key_lengths if batch else empty)
    q_low, q_high, k_low, k_high = torch.stack([qp.min(), qp.max(), kl.min(), kl.max()]).tolist()
    if q_low < 0 or q_high >= table.size(1):
        raise ValueError(f"{name}: query positions must lie in [0, {table.size(1)}) (the table's query axis); "
                         f"got [{q_low}, {q_high}]: raise the table's maximum positions")
    if k_low < 0 or k_high > limit:
        raise ValueError(f"{name}: key_lengths must lie in [0, {limit}] (values hold {keys} key slots"
                         + ("" if table_keys is None else f", the table's key axis {table_keys} positions")
                         + f"); got [{k_low}, {k_high}]")
    return batch, heads, steps, keys, head_dim


def centres(query_positions: Tensor, length_ratio: float) -> Tensor:
    """floor(gamma * p) (GPA Eq. 10), in float64 like ``core.positions.relative_distance``; gamma = 1: p."""
    if length_ratio <= 0:
        raise ValueError(f"length_ratio (gamma) must be > 0, got {length_ratio}")
    if length_ratio == 1.0:
        return query_positions.long()
    return torch.floor(query_positions.double() * length_ratio).long()


def allowed_keys(query_positions: Tensor, key_lengths: Tensor, keys: int, causal: bool) -> Tensor:
    """(B, T, S) bool: key m is a real key (m < length) and, when causal, m <= p."""
    m = torch.arange(keys, device=query_positions.device)
    allowed = (m < key_lengths[:, None, None]).expand(-1, query_positions.size(1), -1)
    if causal:
        allowed = allowed & (m <= query_positions[:, :, None])
    return allowed


def masked_softmax_mix(energies: Tensor, allowed: Tensor, values: Tensor) -> Tensor:
    """sum_m softmax_m(E) v_m over the allowed keys (fp32 softmax; 0 for a query with none): energies
    (B, H, T, S) in the compute dtype, allowed (B, 1 or H, T, S) bool, values (B, H, S, Dh)."""
    logits = energies.masked_fill(~allowed, float("-inf"))
    dead = ~allowed.any(dim=-1, keepdim=True)
    probs = torch.softmax(logits.masked_fill(dead, 0.0), dim=-1) * allowed
    return torch.matmul(probs, values.to(probs.dtype)).to(values.dtype)


def compute_dtype(tensor: Tensor) -> torch.dtype:
    """The softmax/accumulation dtype of the PyTorch paths: float32, or float64 for float64 inputs."""
    return torch.float64 if tensor.dtype == torch.float64 else torch.float32


#: CUDA's limits on a launch grid, blocks per axis: 2^31 - 1 on axis 0, 65,535 on axes 1 and 2
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


def row_grid(rows: int, blocks: int) -> Tuple[int, int]:
    """The launch grid ``(rows, blocks)`` of a kernel with one program per (row, block): the rows (batch x
    heads: 4,096 sentences of 16 heads are 65,536) on axis 0, the query or key tiles of a row on axis 1
    (limited to 65,535). A grid over the limits is a clear error, not CUDA's ``invalid argument``."""
    grid = (rows, blocks)
    for axis, (size, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if size > limit:
            what = "batch x heads" if axis == 0 else "blocks per (sentence, head)"
            raise ValueError(f"a kernel launch needs {size} programs on grid axis {axis} ({what}), over CUDA's "
                             f"limit of {limit}: split the batch or the sentences")
    return grid


def next_power_of_2(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()
