"""Parameters shared by the layers of an encoder or a decoder (GPA Section 4.1's n~, m~ and their
LayerNorms, PosNet-Attn's kernels, T5/AT5 bucket tables), used once per forward call when the layers are
activation-checkpointed: fairseq's reentrant checkpointing would otherwise give them a gradient once per
layer, which DistributedDataParallel refuses (docs/multi-gpu.md, Activation checkpointing and tables
shared across layers). Without checkpointing nothing is substituted.
"""
import contextlib
from typing import Dict, List, Tuple

from torch import Tensor, nn

#: the prefix of the keyword arguments that carry the shared views into a checkpointed layer
ARGUMENT_PREFIX = "shared_parameter:"


class SharedParameters:
    """The parameters of ``tables`` (a module the side registers) and the views of the running call."""

    def __init__(self, tables: nn.Module, side: str):
        self.tables, self.side = tables, side
        self._views: List[Dict[str, Tensor]] = []

    def _slots(self) -> List[Tuple[str, nn.Module, str]]:
        """(qualified name, owning module, attribute) of every parameter in the tables."""
        return [(f"{prefix}.{name}" if prefix else name, module, name)
                for prefix, module in self.tables.named_modules()
                for name, value in module._parameters.items() if value is not None]

    @contextlib.contextmanager
    def carrying(self):
        """Around the side's forward call: one identity view of each shared parameter, its one use."""
        views = {name: getattr(module, attr).view_as(getattr(module, attr)) for name, module, attr in self._slots()}
        self._views.append(views)
        try:
            yield views
        finally:
            self._views.pop()

    def as_arguments(self) -> Dict[str, Tensor]:
        """The running call's views as (tensor) keyword arguments of a checkpointed layer."""
        if not self._views:
            raise RuntimeError(f"a checkpointed layer of the {self.side} was called outside its {self.side}'s "
                               "forward; call the encoder/decoder")
        return {ARGUMENT_PREFIX + name: view for name, view in self._views[-1].items()}

    @staticmethod
    def take_arguments(kwargs: dict) -> Dict[str, Tensor]:
        """Removes the shared views from a layer's keyword arguments and returns them by name."""
        return {key[len(ARGUMENT_PREFIX):]: kwargs.pop(key) for key in list(kwargs) if key.startswith(ARGUMENT_PREFIX)}

    @contextlib.contextmanager
    def substituted(self, tensors: Dict[str, Tensor]):
        """Inside a layer: each table reads ``tensors[name]`` in place of its parameter ``name``."""
        slots = self._slots() if tensors else []  # no views: the layer is not checkpointed
        missing = sorted({name for name, _, _ in slots} - set(tensors))
        if missing:
            raise RuntimeError(f"the {self.side}'s checkpointed layer got no view of its shared parameters {missing}")
        swapped = []
        try:
            for name, module, attr in slots:
                swapped.append((module, attr, module._parameters[attr]))
                module._parameters[attr] = tensors[name]
            yield
        finally:
            for module, attr, parameter in reversed(swapped):
                module._parameters[attr] = parameter
