"""The implementations the model is to use on a GPU, in one place, chosen by posmix-bench-gpu's
figures (docs/gpu.md, "GPU defaults"). Each entry names the figure that chose it; posmix-bench-gpu
prints, after its tables, what its own figures would choose beside these values.

No GPU figure has been measured yet, so every entry holds the choice the CPU measurements made.
"""

#: setting -> (value, the figure that chose it)
GPU_DEFAULTS = {
    # --S-rposnet-impl on CUDA: "dense" or "window" (the Triton window kernel)
    "rposnet_impl": ("dense", "CPU: the PyTorch window form is slower than dense below N ~ 1024 (docs/search-time.md); "
                              "no GPU figure yet"),
    # Eq. 4's LayerNorm(GeLU(W^V x)) and c * GeLU(W^G y): "torch" (PyTorch ops) or "triton" (kernels.gelu_layernorm,
    # kernels.gelu_gate)
    "gating": ("torch", "no GPU figure yet"),
    # aPosNet mixing: "dense" (PyTorch), "triton" (kernels.absolute_position_mixing) or "flex" (kernels.flex)
    "aposnet": ("dense", "no GPU figure yet"),
}


def gpu_default(name: str) -> str:
    """The value of one GPU default (``rposnet_impl``, ``gating``, ``aposnet``)."""
    if name not in GPU_DEFAULTS:
        raise KeyError(f"{name!r} is not a GPU default; valid: {', '.join(GPU_DEFAULTS)}")
    return GPU_DEFAULTS[name][0]
