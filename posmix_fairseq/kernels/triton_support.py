"""Guards shared by the Triton kernel modules (imported only when Triton is available)."""
import os

import torch

#: Triton decides at decoration time whether a kernel is compiled or interpreted.
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def check_runnable(tensor: torch.Tensor) -> None:
    if tensor.device.type == "cpu" and not INTERPRETED:
        raise RuntimeError("posmix_fairseq.kernels: the Triton kernels were loaded without TRITON_INTERPRET=1, so "
                           "they cannot run on CPU tensors; set TRITON_INTERPRET=1 before the first Triton call "
                           "(or use backend='torch')")
