"""How each attention sublayer runs, decided once, when the model is built (docs/gpu.md, "What runs on a GPU"):
:func:`choose` gives a sublayer one :class:`KernelChoice` for CPU tensors and one for CUDA tensors (fairseq
builds a model on the CPU and moves it afterwards); the calls look theirs up by the tensors' device."""
import json
import os
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from . import common, dispatch

ENV_VAR = "POSMIX_GPU_DEFAULTS"

#: setting -> (value on a GPU, the figure that chose it). posmix-bench-gpu prints, after its tables,
#: what its own figures choose beside these values (docs/gpu.md, "GPU defaults").
GPU_DEFAULTS = {
    "rposnet_impl": ("dense", "CPU: the PyTorch window form is slower than dense below N ~ 1024 (docs/search-time.md); "
                              "no GPU figure yet"),
    "rposnet_decode": ("table", "CPU: the decode-weight table makes a step one batched product, where the Triton "
                                "step recomputes the softmax of every layer at every step; no GPU figure yet"),
    "gating": ("torch", "no GPU figure yet"),
}
#: the valid values of each setting
VALUES = {"rposnet_impl": ("dense", "window"), "rposnet_decode": ("table", "triton"), "gating": ("torch", "triton")}


def gpu_default(name: str) -> str:
    """The value of one GPU default (a key of :data:`GPU_DEFAULTS`), ``POSMIX_GPU_DEFAULTS`` applied."""
    value, where = GPU_DEFAULTS[name][0], "posmix_fairseq/kernels/choice.py GPU_DEFAULTS"
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


@dataclass(frozen=True)
class KernelChoice:
    """How a sublayer runs on one kind of device."""

    mixing: str = "dense"  # dense, or rPosNet's window form (GPA Eq. 10)
    kernels: str = "torch"  # what computes the window form: torch or triton
    decode: str = ""  # rPosNet decoder self-attention step by step: the decode-weight table or triton; "": none
    gating: str = ""  # Eq. 4's LayerNorm(GeLU) and GeLU gate: torch or triton; "": ungated

    def __str__(self) -> str:
        parts = [f"{self.mixing} mixing" + (f" ({self.kernels})" if self.mixing == "window" else "")]
        if self.decode:
            parts.append(f"decode {self.decode}")
        if self.gating:
            parts.append(f"gating {self.gating}")
        return ", ".join(parts)


@dataclass(frozen=True)
class SublayerKernels:
    """A sublayer's choices for CPU and CUDA tensors; ``forced`` names the option that forced the
    Triton kernels (a failure is then an error), empty when the defaults chose them."""

    cpu: KernelChoice
    gpu: KernelChoice
    forced: str = ""

    def on(self, device: torch.device) -> KernelChoice:
        return self.gpu if common.on_gpu(device) else self.cpu

    def backend(self, device: torch.device, part: str) -> str:
        """The ``backend=`` of the kernel calls of ``part`` (``kernels``: window mixing; ``decode``: the
        decoding step; ``gating``): ``torch``; ``triton`` where forced; ``auto`` where the defaults chose
        Triton (``kernels.dispatch`` runs it on a GPU and falls back to PyTorch if it fails)."""
        if getattr(self.on(device), part) != "triton":
            return "torch"
        return "triton" if self.forced else "auto"

    def __str__(self) -> str:
        return f"cpu: {self.cpu}; cuda: {self.gpu}" + (f" (forced by {self.forced})" if self.forced else "")


def choose(impl: Optional[str] = None, flag: str = "", decodes: bool = False, gated: bool = False) -> SublayerKernels:
    """The choices of one sublayer. ``impl``: its ``--S-rposnet-impl`` (``flag``, for messages), None
    for a mixer without that option (dense mixing); ``decodes``: rPosNet decoder self-attention, which
    decodes with the constant state; ``gated``: GPA Eq. 4's gating on."""
    decode = "table" if decodes else ""
    gating = "torch" if gated else ""
    gpu_gating = gpu_default("gating") if gated else ""
    gpu_decode = gpu_default("rposnet_decode") if decodes else ""
    if impl == "triton":
        forced = KernelChoice("window", "triton", "triton" if decodes else "", "triton" if gated else "")
        return SublayerKernels(forced, forced, forced=f"{flag} triton")
    if impl not in (None, "dense", "window", "auto"):
        raise ValueError(f"{flag}: {impl!r} is not a mixing implementation of rposnet; valid values: "
                         "auto, dense, window, triton")
    gpu_mixing = gpu_default("rposnet_impl") if impl == "auto" else (impl or "dense")
    cpu = KernelChoice("window" if impl == "window" else "dense", "torch", decode, gating)
    triton = dispatch.triton_available()
    gpu = KernelChoice(gpu_mixing, "triton" if triton and gpu_mixing == "window" else "torch",
                       gpu_decode if triton else decode, gpu_gating if triton else gating)
    return SublayerKernels(cpu, gpu)


#: the attribute names of fairseq's attention sublayers in its encoder and decoder layers
SUBLAYER_NAMES = ("self_attn", "encoder_attn")


def kernel_summary(model: nn.Module) -> str:
    """One line per attention sublayer of ``model``: its module name and its :class:`SublayerKernels`,
    or, for a module without choices (fairseq's MultiheadAttention: PyTorch on every device), its class."""
    lines = []
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in SUBLAYER_NAMES:
            kernels = getattr(module, "kernel_choice", None)
            lines.append(f"{name}: {kernels if kernels is not None else type(module).__name__ + ' (PyTorch)'}")
    return "\n".join(lines)
