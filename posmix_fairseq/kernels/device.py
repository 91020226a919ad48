"""The one device check of the kernel choices: which tensors take a sublayer's GPU choice."""
import torch


def on_gpu(device: torch.device) -> bool:
    """Whether tensors on ``device`` take a sublayer's GPU choice (kernels/choice.py)."""
    return device.type == "cuda"
