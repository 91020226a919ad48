"""``--task translation_window``: ``posmix_translation`` that keeps, of the interval checkpoints, only
those a final average of N (``posmix-average``, GPA 5.3; ``--average-window N``) can use, without their optimizer state (docs/recipes.md,
Disk: the checkpoints the average needs), after each save (fairseq's ``post_save`` hook).
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
class AveragedCheckpointsConfig(PosMixTranslationConfig):
    average_window: int = field(default=-1, metadata={
        "help": "interval checkpoints an average of N uses (see --average-from); -1: keep all (fairseq's "
                "--keep-interval-updates decides), 0: none"})
    average_from: str = field(default="best", metadata={
        "help": "best: the best and the N-1 after it, or the last N when fewer follow (posmix-average "
                "--best-and-next N); last: the last N (posmix-average --last N)"})
    maximize_best_checkpoint_metric: bool = II("checkpoint.maximize_best_checkpoint_metric")


def read_extra_state(path: str) -> dict:
    """A checkpoint's extra_state, its tensors memory-mapped instead of read."""
    return load_mapped(path).get("extra_state") or {}


def kept_for_average(paths: List[str], scores: Dict[str, Optional[float]], n: int, from_best: bool,
                   maximize: bool = False) -> List[str]:
    """The checkpoints an average of ``n`` can still need: the last ``n`` and, ``from_best``, the ``n`` from
    the best on (lowest score, highest with ``maximize``; the earliest of ties)."""
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


class AveragedCheckpointsTask(PosMixTranslationTask):
    cfg: AveragedCheckpointsConfig

    def __init__(self, cfg: AveragedCheckpointsConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if cfg.average_from not in ("best", "last"):
            raise ValueError(f"--average-from {cfg.average_from!r}: valid values are best, last")
        self._scores: Dict[str, Optional[float]] = {}

    def post_save(self, cp_path: str, num_updates: int):
        n = self.cfg.average_window
        if n < 0 or not cp_path:
            return
        directory = os.path.dirname(cp_path)
        found = sorted((int(m.group(2)), m.string) for m in map(INTERVAL_RE.match, os.listdir(directory)) if m)
        paths = [os.path.join(directory, name) for _, name in found]  # the interval checkpoints, oldest first
        for p in paths:
            if p not in self._scores:
                self._scores[p] = read_extra_state(p).get("val_loss")
        keep = kept_for_average(paths, self._scores, n, self.cfg.average_from == "best",
                              self.cfg.maximize_best_checkpoint_metric)
        for p in paths:
            if p not in keep:
                os.remove(p)
                self._scores.pop(p, None)
        for p in keep:
            strip_optimizer_state(p)
        logger.info(f"checkpoints for an average of {n} ({self.cfg.average_from}): kept {len(keep)} interval checkpoint(s) "
                    f"without optimizer state, removed {len(paths) - len(keep)}")


if "translation_window" not in TASK_REGISTRY:  # idempotent: the plugin may be imported under two names
    # the registered name (stored in checkpoints' configurations, used by the recipes) stays
    register_task("translation_window", dataclass=AveragedCheckpointsConfig)(AveragedCheckpointsTask)


def strip_optimizer_state(path: str) -> bool:
    """Rewrites ``path`` without ``last_optimizer_state``, as fairseq's ``--no-save-optimizer-state`` leaves it,
    with fairseq's own atomic save (a temporary file renamed over the old one: the mapped tensors are read from
    the old file while the new one is written); False if it had none."""
    state = load_mapped(path)
    if "last_optimizer_state" not in state:
        return False
    del state["last_optimizer_state"]
    torch_persistent_save(state, path)
    return True
