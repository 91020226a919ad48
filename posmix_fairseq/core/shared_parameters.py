"""Parameters shared by the layers of an encoder or a decoder (GPA Section 4.1's n~, m~ and their
LayerNorms, PosNet-Attn's kernels, T5/AT5 bucket tables), used once per forward call when the layers are
activation-checkpointed: fairseq's reentrant checkpointing would otherwise give them a gradient once per
layer, which DistributedDataParallel refuses (docs/multi-gpu.md, Activation checkpointing and tables
shared across layers). Without checkpointing nothing is substituted.

A checkpointed layer runs through ``torch.func.functional_call`` on a module that holds the side's tables,
so the tables read the views of the running call in place of their parameters for that layer's call only.
"""
import contextlib
from typing import Callable, Dict, List

import torch
from torch import Tensor, nn

#: the prefix of the keyword arguments that carry the shared views into a checkpointed layer
ARGUMENT_PREFIX = "shared_parameter:"


class _TablesAround(nn.Module):
    """Holds the side's tables (a second parent, outside the model: nothing is saved or counted twice) so
    that ``functional_call`` can substitute their parameters while ``forward`` runs a layer's call."""

    def __init__(self, tables: nn.Module):
        super().__init__()
        self.tables = tables

    def forward(self, run: Callable, *args, **kwargs):
        return run(*args, **kwargs)


class SharedParameters:
    """The parameters of ``tables`` (a module the side registers) and the views of the running call."""

    def __init__(self, tables: nn.Module, side: str):
        self.tables, self.side = tables, side
        self._around = _TablesAround(tables)
        self._views: List[Dict[str, Tensor]] = []

    @contextlib.contextmanager
    def carrying(self):
        """Around the side's forward call: one identity view of each shared parameter, its one use."""
        views = {name: parameter.view_as(parameter) for name, parameter in self.tables.named_parameters()}
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

    def run_substituted(self, tensors: Dict[str, Tensor], run: Callable, *args, **kwargs):
        """``run(*args, **kwargs)`` (a layer's call) with each table reading ``tensors[name]`` in place of its
        parameter ``name``; without tensors (the layer is not checkpointed), ``run`` as it is."""
        if not tensors:
            return run(*args, **kwargs)
        missing = sorted({name for name, _ in self.tables.named_parameters()} - set(tensors))
        if missing:
            raise RuntimeError(f"the {self.side}'s checkpointed layer got no view of its shared parameters {missing}")
        return torch.func.functional_call(self._around, {f"tables.{name}": view for name, view in tensors.items()},
                                          (run, *args), kwargs, strict=False)
