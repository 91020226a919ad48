"""What torch's weights-only loader (the default since torch 2.6) needs to read fairseq checkpoints, so that
fairseq's own loader reads them while a pickle that needs anything else is still refused; weights-only loading
is never turned off (docs/choices.md, "Nothing run from a file")."""
import argparse

import torch


def fairseq_checkpoint_types() -> list:
    """The non-tensor, non-container types a fairseq checkpoint may hold: the ``args`` Namespace, and the numpy
    scalars, dtypes and arrays that metric states may carry (``--eval-bleu`` keeps its n-gram counts as arrays:
    ``numpy.core.multiarray._reconstruct`` only allocates an empty array)."""
    types = [argparse.Namespace]
    try:
        # optional: numpy (metric states); torch runs without it
        import numpy as np
        from numpy.core.multiarray import _reconstruct, scalar  # numpy 2 keeps these names as aliases
        types += [scalar, np.dtype, np.ndarray, _reconstruct]
        types += [type(np.dtype(t)) for t in ("float64", "float32", "int64", "int32", "bool")]
    except ImportError:  # pragma: no cover  (numpy comes with torch's users here)
        pass
    return types


def allow_fairseq_checkpoints() -> None:
    """Lets ``torch.load``'s weights-only unpickler build the types of :func:`fairseq_checkpoint_types`
    (idempotent)."""
    torch.serialization.add_safe_globals(fairseq_checkpoint_types())


def load_mapped(path: str) -> dict:
    """A fairseq checkpoint read weights-only, its tensors memory-mapped (only what is used is read)."""
    allow_fairseq_checkpoints()
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
