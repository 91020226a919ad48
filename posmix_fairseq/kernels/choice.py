"""How each attention sublayer runs, decided here and nowhere else (docs/gpu.md, "What runs on a GPU").

A mixer declares the parts of its sublayers that can run more than one way in its own file (:func:`declare`);
:func:`choose` settles each part for CPU and for CUDA tensors when the sublayer is built, in one precedence:
the sublayer's option (``--S-rposnet-impl``: a value on every device, or ``triton`` forced everywhere), then
``POSMIX_GPU_DEFAULTS``, then :data:`GPU_DEFAULTS` (CUDA) and each part's first value by PyTorch (CPU).
Calls run through :meth:`SublayerKernels.run`, so what ``repr(model)`` and :func:`kernel_summary` print is
what runs, a Triton kernel that failed and its PyTorch replacement included.
"""
import functools
import json
import os
import warnings
from dataclasses import dataclass, replace
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import nn

from . import common, dispatch

ENV_VAR = "POSMIX_GPU_DEFAULTS"


@dataclass(frozen=True)
class Part:
    """A part of a sublayer that can run more than one way (:func:`declare`)."""

    name: str  # how choices print it: mixing, decode, gating
    setting: str  # its key in GPU_DEFAULTS and POSMIX_GPU_DEFAULTS
    values: Tuple[str, ...]  # its ways of running; the first runs on CPU tensors unless an option says otherwise
    triton: str  # the value the Triton kernels compute


#: setting -> the declared part
PARTS: Dict[str, Part] = {}
#: setting -> (value on a GPU, the figure that chose it). posmix-bench-gpu prints, after its tables,
#: what its own figures choose beside these values (docs/gpu.md, "What runs on a GPU").
GPU_DEFAULTS: Dict[str, Tuple[str, str]] = {}


def declare(name: str, setting: str, values: Sequence[str], triton: str, gpu_default: str, why: str) -> Part:
    """Declare a part of a mixer's sublayers, in the mixer's own file; its builder passes the returned
    :class:`Part` to :func:`choose`. ``why``: the figure that chose ``gpu_default``."""
    part = Part(name, setting, tuple(values), triton)
    if triton not in part.values or gpu_default not in part.values or PARTS.get(setting, part) != part:
        raise ValueError(f"declare({setting!r}): the Triton value {triton!r} and the GPU default {gpu_default!r} "
                         f"must be among its values {part.values}, and the setting declared once")
    PARTS[setting], GPU_DEFAULTS[setting] = part, (gpu_default, why)
    return part


#: Eq. 4's LayerNorm(GeLU(W^V x)) and c * GeLU(W^G y), a part of every gated sublayer
GATING = declare("gating", "gating", ("torch", "triton"), "triton", "torch",
                 "H200, bf16, D = 512: the rPosNet sublayer's fwd+bwd at N = 64 takes 3.84 ms with PyTorch gating, "
                 "4.45 ms with Triton gating; training 61,563 against 56,778 words/s (docs/gpu.md, GPU figures)")


def gpu_default(setting: str) -> str:
    """The value of one GPU default (a key of :data:`GPU_DEFAULTS`), ``POSMIX_GPU_DEFAULTS`` applied."""
    value, where = GPU_DEFAULTS[setting][0], "posmix_fairseq GPU_DEFAULTS"
    if os.environ.get(ENV_VAR):
        try:
            overrides = json.loads(os.environ[ENV_VAR])
        except json.JSONDecodeError as exc:
            raise ValueError(f"{ENV_VAR} must be a JSON object such as '{{\"gating\": \"triton\"}}': {exc}")
        unknown = sorted(set(overrides) - set(GPU_DEFAULTS)) if isinstance(overrides, dict) else None
        if unknown is None or unknown:
            raise ValueError(f"{ENV_VAR}: {unknown if unknown else overrides!r} is not an object of GPU defaults; "
                             f"valid keys: {', '.join(GPU_DEFAULTS)}")
        if setting in overrides:
            value, where = overrides[setting], ENV_VAR
    if value not in PARTS[setting].values:
        raise ValueError(f"{where}: {setting} = {value!r}; valid values: {', '.join(PARTS[setting].values)}")
    return value


@dataclass(frozen=True)
class PartChoice:
    """How one part runs on one kind of device: its value and what computes it (``failed``: why the
    Triton kernel the defaults chose failed, and PyTorch runs instead)."""

    value: str
    kernels: str = "torch"  # torch or triton
    failed: str = ""

    def __str__(self) -> str:
        shown = self.value if self.value == self.kernels else f"{self.value} ({self.kernels})"
        return shown + (f" after Triton failed: {self.failed}" if self.failed else "")


@dataclass(frozen=True)
class DeviceKernels:
    """How a sublayer runs on one kind of device: a :class:`PartChoice` per part it has."""

    parts: Tuple[Tuple[str, PartChoice], ...] = ()

    @functools.cached_property
    def _by_name(self) -> Dict[str, PartChoice]:  # read at every call of a sublayer: built once
        return dict(self.parts)

    def of(self, part: Part) -> Optional[PartChoice]:
        return self._by_name.get(part.name)

    def value(self, part: Part) -> str:
        return getattr(self.of(part), "value", "")  # "": a part the sublayer does not have

    def __str__(self) -> str:
        return ", ".join(f"{name} {choice}" for name, choice in self.parts) or "PyTorch"


class SublayerKernels:
    """A sublayer's :class:`DeviceKernels` for CPU and CUDA tensors, settled by :func:`choose`. ``flag``: its
    option; ``option``: the option and its value where it chose (e.g. ``--encoder-self-rposnet-impl window``),
    empty where the defaults did; ``forced``: the same where it forced the Triton kernels (a failure is then
    an error)."""

    def __init__(self, cpu: DeviceKernels, gpu: DeviceKernels, flag: str = "", given: str = "", forced: bool = False):
        self.cpu, self.gpu, self.flag = cpu, gpu, flag
        self.option = f"{flag} {given}" if given else ""
        self.forced = self.option if forced else ""
        self.proven = set()  # the parts whose Triton kernel has run here: its errors are errors
        self._note_triton()

    def _note_triton(self) -> None:
        """``triton_parts``: the names of the parts some device runs by the Triton kernels (a call of any other part
        goes straight to PyTorch: :meth:`by_torch`)."""
        self.triton_parts = frozenset(name for kernels in (self.cpu, self.gpu) for name, choice in kernels.parts
                                      if choice.kernels == "triton")

    def by_torch(self, part: Part) -> bool:
        """Whether ``part`` runs by PyTorch on every device (no Triton kernel to try, nothing to fall back from)."""
        return part.name not in self.triton_parts

    def on(self, device: torch.device) -> DeviceKernels:
        return self.gpu if common.on_gpu(device) else self.cpu

    def may_run(self, part: Part, value: str) -> bool:
        """Whether ``part`` runs ``value`` on some device (a mixer builds the paths its choice can take)."""
        return value in (self.cpu.value(part), self.gpu.value(part))

    def run(self, device: torch.device, part: Part, triton_call: Callable, torch_call: Callable):
        """``triton_call()`` (the kernel call with ``backend="triton"``) where ``part`` runs by the Triton kernels
        on ``device``, else ``torch_call()``. Where the defaults chose Triton, a kernel that cannot run, or fails
        before it has run once here, makes this part of this sublayer PyTorch from then on (a kernel that has
        run propagates its failures); where the option forced Triton, the error propagates."""
        if part.name not in self.triton_parts or getattr(self.on(device).of(part), "kernels", "torch") != "triton":
            return torch_call()
        try:
            out = triton_call()
        except dispatch.KernelBackendError as exc:
            if self.forced or (isinstance(exc, dispatch.TritonKernelError) and part.name in self.proven):
                raise
            self._fall_back(part, exc.__cause__ or exc)
            return torch_call()
        self.proven.add(part.name)
        return out

    def _fall_back(self, part: Part, exc: BaseException) -> None:
        """``part`` by PyTorch on a GPU from now on (only a GPU runs Triton kernels the defaults chose)."""
        why = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        self.gpu = DeviceKernels(tuple((name, replace(choice, kernels="torch", failed=why) if name == part.name
                                        else choice) for name, choice in self.gpu.parts))
        self._note_triton()
        warnings.warn(f"posmix_fairseq: a sublayer's Triton kernel for its {part.name} failed ({why}); that "
                      f"sublayer runs its {part.name} by PyTorch from now on (kernel_summary(model) says which; "
                      "docs/gpu.md: what Triton needs at run time)", dispatch.TritonFallbackWarning, stacklevel=3)

    def __str__(self) -> str:
        return f"cpu: {self.cpu}; cuda: {self.gpu}" + (f" (forced by {self.forced})" if self.forced else "")


def choose(parts: Sequence[Part] = (), option: Optional[str] = None, flag: str = "",
           gated: bool = False) -> SublayerKernels:
    """The kernels of one sublayer, in the precedence of the module docstring. ``parts``: the declared parts
    it has (GATING added when ``gated``); ``option``: its value of ``flag``, which sets ``parts[0]``:
    None or ``auto`` (the defaults), one of that part's values, or ``triton``."""
    parts = tuple(parts) + ((GATING,) if gated else ())
    if option == "triton":
        forced = DeviceKernels(tuple((part.name, PartChoice(part.triton, "triton")) for part in parts))
        return SublayerKernels(forced, forced, flag, "triton", forced=True)
    own = parts[0].values if parts and option is not None else ()
    if option not in (None, "auto", *own):
        raise ValueError(f"{flag}: {option!r} is not one of its values; valid values: "
                         f"{', '.join(('auto', *own, 'triton'))}")
    given = option if option in own else None
    triton = dispatch.triton_available()
    cpu, gpu = [], []
    for part in parts:
        value = given if given and part is parts[0] else None
        cpu.append((part.name, PartChoice(value or part.values[0])))
        value = value or gpu_default(part.setting)
        gpu.append((part.name, PartChoice(value, "triton" if triton and value == part.triton else "torch")))
    return SublayerKernels(DeviceKernels(tuple(cpu)), DeviceKernels(tuple(gpu)), flag, given or "")


#: the attribute names of fairseq's attention sublayers in its encoder and decoder layers
SUBLAYER_NAMES = ("self_attn", "encoder_attn")


def sublayer_kernels(model: nn.Module) -> Dict[str, str]:
    """Each attention sublayer of ``model`` by module name: its :class:`SublayerKernels` in words (what runs
    now, fallbacks included), or, for a module without them (fairseq's MultiheadAttention: PyTorch on every
    device), its class."""
    found = {}
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in SUBLAYER_NAMES:
            kernels = getattr(module, "sublayer_kernels", None)
            found[name] = str(kernels) if kernels is not None else type(module).__name__ + " (PyTorch)"
    return found


def kernel_summary(model: nn.Module) -> str:
    """:func:`sublayer_kernels` as text, one line per attention sublayer: ``name: kernels``."""
    return "\n".join(f"{name}: {kernels}" for name, kernels in sublayer_kernels(model).items())
