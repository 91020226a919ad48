"""Reading and writing checkpoint files: the one place the harness's commands open them.

Reading is weights-only (``torch.load(weights_only=True)``): a pickle may build tensors, containers and
the few types fairseq checkpoints store (:mod:`posmix_fairseq.fairseq_checkpoints`), and nothing else, so
a crafted checkpoint cannot run code; a file that cannot be read is a :class:`CheckpointFileError`
naming it.

Writing is atomic: the object goes to a temporary file in the target's directory, is flushed to disk, and
is renamed over the target (``os.replace``), so a crash or a kill mid-write leaves the old file whole. A
target that is (through links) one of the command's inputs is refused before anything is read.
"""
import io
import os
import pickle
import zipfile
from typing import Callable, Iterable, Mapping

import torch

from ..fairseq_checkpoints import allow_fairseq_checkpoints
from . import command
from .command import same_file


class CheckpointFileError(ValueError):
    """A checkpoint (or output) file that cannot be read or written safely; the message names the file and
    the fix."""


def _refusal(path: str, error: Exception) -> CheckpointFileError:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = next((line for line in lines if "GLOBAL" in line), lines[0] if lines else type(error).__name__)
    return CheckpointFileError(
        f"{path}: refused to load: it is not a weights-only fairseq checkpoint ({text}). Only tensors, "
        "containers and the types fairseq stores are read; a file that needs anything else to unpickle can run "
        "code. If you made it yourself and trust it, load it with torch.load(weights_only=False) and save its "
        "state_dict again")


def _check_readable(path: str, option: str) -> None:
    if not os.path.exists(path):
        raise CheckpointFileError(f"{option}{path}: no such checkpoint file")
    if os.path.isdir(path):
        raise CheckpointFileError(f"{option}{path}: is a directory, not a checkpoint file")


def load(path: str, option: str = "", mmap: bool = False) -> dict:
    """A checkpoint read weights-only onto the CPU; ``mmap`` maps its tensors instead of reading them (only
    what is used is read: the validation score of every candidate, never the optimizer state).
    ``option`` (e.g. ``"--inputs "``) prefixes the file's name in errors."""
    allow_fairseq_checkpoints()
    _check_readable(path, option)
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except RuntimeError as e:
            if not mmap or "mmap" not in str(e):
                raise
            # saved in torch's legacy (non-zip) format, which cannot be memory-mapped
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError, KeyError, IndexError, AttributeError, TypeError) as e:
        if "Weights only load failed" in str(e) or "Unsupported global" in str(e):
            raise _refusal(option + path, e) from None
        raise CheckpointFileError(f"{option}{path}: not a readable checkpoint ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}); it may be truncated or not a "
                                  "torch.save file") from None
    except Exception as e:  # the weights-only unpickler raises UnpicklingError for refused globals
        if isinstance(e, pickle.UnpicklingError):
            raise _refusal(option + path, e) from None
        raise
    if not isinstance(state, dict):
        raise CheckpointFileError(f"{option}{path}: holds a {type(state).__name__}, not a checkpoint dict")
    return state


def load_fairseq(path: str, option: str = "") -> dict:
    """``fairseq.checkpoint_utils.load_checkpoint_to_cpu`` (its upgrades of old checkpoints included), which
    reads weights-only once :func:`allow_fairseq_checkpoints` ran; a refused or unreadable file is a
    :class:`CheckpointFileError` naming it."""
    # fairseq loads in seconds: only here, posmix-average reads checkpoints with torch alone
    from fairseq import checkpoint_utils

    allow_fairseq_checkpoints()
    _check_readable(path, option)
    try:
        return checkpoint_utils.load_checkpoint_to_cpu(path)
    except pickle.UnpicklingError as e:
        raise _refusal(option + path, e) from None
    except (EOFError, OSError, RuntimeError, zipfile.BadZipFile) as e:
        raise CheckpointFileError(f"{option}{path}: not a readable checkpoint ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}); it may be truncated or not a "
                                  "torch.save file") from None


def load_mapped(path: str, option: str = "") -> dict:
    """:func:`load` with the tensors memory-mapped."""
    return load(path, option, mmap=True)


# ---- checks of what was read ---------------------------------------------------------------------

ABSURD = 1e3
"""The largest magnitude a trained weight or frozen energy table is accepted with. Trained parameters and
their frozen energies stay within a few tens (LayerNorm, Adam's bounded steps, scaled dot products);
flipped bytes in float32 data read as values in the thousands up to inf. fairseq checkpoints carry no
checksum, so this bound (with NaN/inf) is the check."""


def check_tensors(tensors: Mapping[str, torch.Tensor], where: str, limit: float = ABSURD) -> None:
    """Raises :class:`CheckpointFileError` naming the first floating-point entry with a NaN, an inf or a
    magnitude above ``limit`` (see :data:`ABSURD`)."""
    for name, t in tensors.items():
        if not torch.is_tensor(t) or not t.is_floating_point() or t.numel() == 0:
            continue
        t32 = t.detach().float()
        if not bool(torch.isfinite(t32).all()):
            bad = int((~torch.isfinite(t32)).sum())
            raise CheckpointFileError(f"{where}: {name} has {bad} NaN/inf value(s); the file is damaged or the "
                                      "training diverged: use another checkpoint")
        peak = float(t32.abs().max())
        if peak > limit:
            raise CheckpointFileError(f"{where}: {name} has a value of magnitude {peak:.4g}, above {limit:g}; the "
                                      "file is damaged (flipped bytes in tensor data read as huge values) or the "
                                      "training diverged: use another checkpoint")


# ---- writing -------------------------------------------------------------------------------------

def check_output(path: str, inputs: Iterable[str] = (), option: str = "output") -> None:
    """Refuses an output ``path`` that is a directory or (links followed) one of ``inputs``: call it before
    reading, so nothing is lost and nothing is read in vain."""
    if os.path.isdir(path):
        raise CheckpointFileError(f"{option} {path}: is a directory; give a file name "
                                  f"(e.g. {os.path.join(path, 'out.pt')})")
    for source in inputs:
        if same_file(path, source):
            shown = source if os.path.realpath(source) == source else f"{source} -> {os.path.realpath(source)}"
            raise CheckpointFileError(f"{option} {path}: is also an input ({shown}); writing it would replace the "
                                      "file being read. Give another output file")


def write_atomic(path: str, writer: Callable[[io.BufferedWriter], None], inputs: Iterable[str] = (),
                 option: str = "output") -> str:
    """:func:`posmix_fairseq.harness.command.write_atomic` (a temporary file renamed over ``path``) once ``path``
    is checked (:func:`check_output`: not a directory, not one of ``inputs``); its directory is created."""
    inputs = list(inputs)
    check_output(path, inputs, option)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return command.write_atomic(path, writer)


def save_atomic(obj, path: str, inputs: Iterable[str] = (), option: str = "output") -> str:
    """``torch.save(obj, path)`` through :func:`write_atomic` (refused when ``path`` is one of ``inputs``)."""
    return write_atomic(path, lambda f: torch.save(obj, f), inputs, option)


def write_text_atomic(path: str, text: str, inputs: Iterable[str] = (), option: str = "output") -> str:
    """Writes ``text`` (UTF-8) to ``path`` through :func:`write_atomic`."""
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")), inputs, option)

