"""``--task translation_window``: the translation task (``posmix_translation``, ``--source-prefix`` included)
that keeps, of the interval checkpoints (``checkpoint_<epoch>_<updates>.pt``), only those a final
checkpoint average can use, without their optimizer state.

With ``--keep-interval-updates -1`` fairseq keeps every interval checkpoint with Adam's state (three
copies of the weights): GPA's Small setting (100 checkpoints) takes about 45 GB, Base (150) over 120 GB,
Big (500) over 1 TB. The averages the recipes make need far less (``posmix-average``):

- ``--average-from best``: the best checkpoint (lowest validation score in ``extra_state["val_loss"]``,
  the earliest of ties) and the ``--average-window N`` - 1 saved after it, or the last N when fewer
  follow it (GPA 5.3);
- ``--average-from last``: the last N.

After each save (fairseq's ``post_save`` hook) this task deletes the interval checkpoints no such
average can still use and rewrites the others without ``last_optimizer_state``: at most the N from
the current best on and the last N, each the size of the weights. ``checkpoint_last.pt`` (to resume)
and ``checkpoint_best.pt`` are fairseq's copies and keep everything. Why it is safe for "best": a
later best can only be a later checkpoint, so a checkpoint before the current best is never needed
again unless it is among the last N, and one more than N - 1 after the current best only as one of
the last N. ``--average-window 0`` deletes every interval checkpoint once saved (the best and the last
remain).
"""
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from fairseq.checkpoint_utils import torch_persistent_save
from fairseq.tasks import TASK_REGISTRY, register_task
from omegaconf import II

from ..fairseq_checkpoints import load_mapped
from .translation import PosMixTranslationConfig, PosMixTranslationTask

logger = logging.getLogger(__name__)
INTERVAL_RE = re.compile(r"^checkpoint_(\d+)_(\d+)\.pt$")


@dataclass
class TranslationWindowConfig(PosMixTranslationConfig):
    average_window: int = field(default=-1, metadata={
        "help": "interval checkpoints an average of N uses (see --average-from); -1: keep all (fairseq's "
                "--keep-interval-updates decides), 0: none"})
    average_from: str = field(default="best", metadata={
        "help": "best: the best and the N-1 after it, or the last N when fewer follow (posmix-average "
                "--best-and-next N); last: the last N (posmix-average --last N)"})
    maximize_best_checkpoint_metric: bool = II("checkpoint.maximize_best_checkpoint_metric")


def interval_checkpoints(directory: str) -> List[str]:
    """The interval checkpoints of ``directory``, oldest (fewest updates) first."""
    found = [(int(m.group(2)), n) for n in os.listdir(directory) for m in [INTERVAL_RE.match(n)] if m]
    return [os.path.join(directory, n) for _, n in sorted(found)]


def read_extra_state(path: str) -> dict:
    """A checkpoint's extra_state, its tensors memory-mapped instead of read."""
    return load_mapped(path).get("extra_state") or {}


def window_to_keep(paths: List[str], scores: Dict[str, Optional[float]], n: int, from_best: bool,
                   maximize: bool = False) -> List[str]:
    """The checkpoints an average of ``n`` can still need (see the module docstring)."""
    if n <= 0:
        return []
    keep = set(paths[-n:])
    if from_best:
        scored = [(i, scores[p]) for i, p in enumerate(paths) if scores.get(p) is not None]
        if scored:
            sign = -1.0 if maximize else 1.0
            best = min(scored, key=lambda t: (sign * t[1], t[0]))[0]
            keep.update(paths[best:best + n])
    return [p for p in paths if p in keep]


class TranslationWindowTask(PosMixTranslationTask):
    cfg: TranslationWindowConfig

    def __init__(self, cfg: TranslationWindowConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if cfg.average_from not in ("best", "last"):
            raise ValueError(f"--average-from {cfg.average_from!r}: valid values are best, last")
        self._scores: Dict[str, Optional[float]] = {}

    def post_save(self, cp_path: str, num_updates: int):
        n = self.cfg.average_window
        if n < 0 or not cp_path:
            return
        directory = os.path.dirname(cp_path)
        paths = interval_checkpoints(directory)
        for p in paths:
            if p not in self._scores:
                self._scores[p] = read_extra_state(p).get("val_loss")
        keep = window_to_keep(paths, self._scores, n, self.cfg.average_from == "best",
                              self.cfg.maximize_best_checkpoint_metric)
        for p in paths:
            if p not in keep:
                os.remove(p)
                self._scores.pop(p, None)
        for p in keep:
            strip_optimizer_state(p)
        logger.info(f"checkpoint window ({self.cfg.average_from}, {n}): kept {len(keep)} interval checkpoint(s) "
                    f"without optimizer state, removed {len(paths) - len(keep)}")


if "translation_window" not in TASK_REGISTRY:  # idempotent: the plugin may be imported under two names
    register_task("translation_window", dataclass=TranslationWindowConfig)(TranslationWindowTask)


def strip_optimizer_state(path: str) -> bool:
    """Rewrites ``path`` without ``last_optimizer_state`` (atomically, as fairseq's
    ``--no-save-optimizer-state`` leaves it); False if it had none."""
    state = load_mapped(path)
    if "last_optimizer_state" not in state:
        return False
    del state["last_optimizer_state"]
    # fairseq's own atomic save (a temporary file renamed over the old one), as for the checkpoints it
    # writes; the mapped tensors are read from the old file while the new one is written
    torch_persistent_save(state, path)
    return True
