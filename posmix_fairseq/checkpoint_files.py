"""Reading and writing checkpoint files: the one place the library and the harness open them."""
import torch


def load_mapped(path: str) -> dict:
    """A checkpoint with its tensors memory-mapped: only what is used is read (the validation score of
    every candidate, the weights of the chosen ones), never a checkpoint's optimizer state."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except RuntimeError:  # saved in torch's legacy (non-zip) format, which cannot be memory-mapped
        return torch.load(path, map_location="cpu", weights_only=False)
