"""The implementations the model uses on a GPU, in one place, chosen by posmix-bench-gpu's figures
(docs/gpu.md, "GPU defaults"). Each entry names the figure that chose it; posmix-bench-gpu prints,
after its tables, what its own figures choose beside these values. On the CPU none of this applies.

- ``rposnet_impl``: what ``--S-rposnet-impl auto`` (the default) runs for CUDA tensors, ``dense``
  or ``window`` (the Triton window kernel); read by mixers/paths/relative_window.py.
- ``gating``: Eq. 4's LayerNorm(GeLU(W^V x)) and c * GeLU(W^G y) for CUDA tensors, ``torch`` (PyTorch
  ops) or ``triton`` (kernels.gelu_layernorm, kernels.gelu_gate); read by mixers/engine/values.py and
  mixers/engine/gating.py.

The environment variable ``POSMIX_GPU_DEFAULTS`` (JSON, e.g. ``{"gating": "triton"}``) overrides
entries for one run (posmix-bench-gpu's training rows use it).

No GPU figure has been measured yet, so every entry holds the choice the CPU measurements made.
The model's aPosNet mixes with its dense energies on every device: adopting
kernels.absolute_position_mixing (or FlexAttention) needs a mixing path (mixers/paths/) reading its
energy table, like rPosNet's window path, to be built if posmix-bench-gpu's aPosNet rows show a gain.
"""
import json
import os

import torch

ENV_VAR = "POSMIX_GPU_DEFAULTS"

#: setting -> (value, the figure that chose it)
GPU_DEFAULTS = {
    # --S-rposnet-impl on CUDA: "dense" or "window" (the Triton window kernel)
    "rposnet_impl": ("dense", "CPU: the PyTorch window form is slower than dense below N ~ 1024 (docs/search-time.md); "
                              "no GPU figure yet"),
    # Eq. 4's LayerNorm(GeLU(W^V x)) and c * GeLU(W^G y): "torch" (PyTorch ops) or "triton" (kernels.gelu_layernorm,
    # kernels.gelu_gate)
    "gating": ("torch", "no GPU figure yet"),
}
VALUES = {"rposnet_impl": ("dense", "window"), "gating": ("torch", "triton")}


def gpu_default(name: str) -> str:
    """The value of one GPU default (``rposnet_impl``, ``gating``)."""
    if name not in GPU_DEFAULTS:
        raise KeyError(f"{name!r} is not a GPU default; valid: {', '.join(GPU_DEFAULTS)}")
    value, where = GPU_DEFAULTS[name][0], "posmix_fairseq/kernels/gpu_defaults.py"
    if os.environ.get(ENV_VAR):
        try:
            overrides = json.loads(os.environ[ENV_VAR])
        except json.JSONDecodeError as exc:
            raise ValueError(f"{ENV_VAR} must be a JSON object such as '{{\"gating\": \"triton\"}}': {exc}")
        unknown = sorted(set(overrides) - set(GPU_DEFAULTS)) if isinstance(overrides, dict) else None
        if unknown is None or unknown:
            raise ValueError(f"{ENV_VAR}: {unknown if unknown else overrides!r} is not an object of GPU defaults; "
                             f"valid keys: {', '.join(GPU_DEFAULTS)}")
        if name in overrides:
            value, where = overrides[name], ENV_VAR
    if value not in VALUES[name]:
        raise ValueError(f"{where}: {name} = {value!r}; valid values: {', '.join(VALUES[name])}")
    return value


def use_gating_kernels(tensor: torch.Tensor) -> bool:
    """Whether Eq. 4's gating of ``tensor`` runs the Triton kernels (CUDA tensors, ``gating`` = triton)."""
    return tensor.is_cuda and gpu_default("gating") == "triton"
