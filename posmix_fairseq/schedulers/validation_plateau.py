"""``--lr-scheduler validation_plateau``: multiply the learning rate by ``--lr-shrink`` at the
``--lr-patience``-th consecutive validation without improvement of the best validation score (PEA
Section 4.1: 0.9 after 6, with 8 validations per epoch), counting every validation where fairseq's
``reduce_lr_on_plateau`` sees the end-of-epoch one only (docs/recipes.md, PEA's learning-rate schedule).
A validation in the middle of an epoch is seen through the save that follows it, which moves fairseq's best
score (``checkpoint_utils.save_checkpoint.best``): so every validation must be a save.
"""
from dataclasses import dataclass, field
from typing import List

from fairseq import checkpoint_utils
from fairseq.dataclass import FairseqDataclass
from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY, FairseqLRScheduler, register_lr_scheduler
from omegaconf import II

#: what a checkpoint keeps of the schedule, besides the updates at which the rate shrank
STATE = ("lr", "plateau_best", "bad_validations", "observed_update")


@dataclass
class ValidationPlateauConfig(FairseqDataclass):
    lr_shrink: float = field(default=0.9, metadata={"help": "factor of each reduction (PEA 4.1: 0.9)"})
    lr_patience: int = field(default=6, metadata={
        "help": "consecutive validations without improvement before each reduction (PEA 4.1: 6)"})
    lr_threshold: float = field(default=0.0, metadata={
        "help": "relative improvement a validation needs to count as one (default 0: any)"})
    lr: List[float] = II("optimization.lr")
    maximize_best_checkpoint_metric: bool = II("checkpoint.maximize_best_checkpoint_metric")
    save_interval_updates: int = II("checkpoint.save_interval_updates")
    validate_interval_updates: int = II("dataset.validate_interval_updates")
    validate_after_updates: int = II("dataset.validate_after_updates")
    disable_validation: bool = II("dataset.disable_validation")


class ValidationPlateauSchedule(FairseqLRScheduler):
    def __init__(self, cfg: ValidationPlateauConfig, optimizer):
        super().__init__(cfg, optimizer)
        if len(cfg.lr) != 1:
            raise ValueError(f"--lr-scheduler validation_plateau takes one --lr (got {', '.join(map(str, cfg.lr))})")
        if not 0.0 < cfg.lr_shrink < 1.0:
            raise ValueError(f"--lr-shrink must be in (0, 1) (got {cfg.lr_shrink})")
        if cfg.lr_patience < 1:
            raise ValueError(f"--lr-patience must be >= 1 (got {cfg.lr_patience})")
        if cfg.lr_threshold < 0:
            raise ValueError(f"--lr-threshold must be >= 0 (got {cfg.lr_threshold})")
        vi, si = cfg.validate_interval_updates, cfg.save_interval_updates
        if vi > 0 and (si <= 0 or vi % si != 0):
            raise ValueError(f"--lr-scheduler validation_plateau counts validations through the checkpoint saves that "
                             f"follow them: --validate-interval-updates ({vi}) must be 0 or a multiple of "
                             f"--save-interval-updates ({si})")
        self.lr = cfg.lr[0]
        self.optimizer.set_lr(self.lr)
        self.plateau_best, self.bad_validations, self.observed_update, self.num_updates = None, 0, -1, 0
        self.reductions: List[int] = []  # updates at which the rate shrank

    def _improves(self, value: float) -> bool:
        if self.plateau_best is None:
            return True
        margin = abs(self.plateau_best) * self.cfg.lr_threshold
        if self.cfg.maximize_best_checkpoint_metric:
            return value > self.plateau_best + margin
        return value < self.plateau_best - margin

    def observe(self, value: float, update: int) -> float:
        """One validation (its score, or fairseq's best score after it) at ``update``."""
        if update <= self.observed_update:
            return self.lr
        self.observed_update = update
        if self._improves(value):
            self.plateau_best = value
            self.bad_validations = 0
            return self.lr
        self.bad_validations += 1
        if self.bad_validations >= self.cfg.lr_patience:
            self.lr *= self.cfg.lr_shrink
            self.optimizer.set_lr(self.lr)
            self.bad_validations = 0
            self.reductions.append(update)
        return self.lr

    def validated_mid_epoch(self, update: int) -> bool:
        """Whether fairseq validates (and saves) after ``update`` inside an epoch (train.py's validate_and_save)."""
        cfg = self.cfg
        if cfg.disable_validation or update <= 0 or update < cfg.validate_after_updates:
            return False
        vi, si = cfg.validate_interval_updates, cfg.save_interval_updates
        return (vi > 0 and update % vi == 0) or (si > 0 and update % si == 0)

    def step(self, epoch, val_loss=None):
        """End of an epoch: fairseq passes that validation's score."""
        if val_loss is not None:
            self.observe(float(val_loss), self.num_updates)
        return self.optimizer.get_lr()

    def step_update(self, num_updates):
        """fairseq has no hook between a validation and the next update: a validation after update u is
        seen here at u + 1, and a reduction it brings applies from u + 2."""
        previous = num_updates - 1
        if previous > self.observed_update and self.validated_mid_epoch(previous):
            best = getattr(checkpoint_utils.save_checkpoint, "best", None)
            if best is not None:
                self.observe(float(best), previous)
        self.num_updates = num_updates
        return self.optimizer.get_lr()

    def state_dict(self):
        return {key: getattr(self, key) for key in STATE} | {"reductions": list(self.reductions)}

    def load_state_dict(self, state_dict):
        if "plateau_best" not in state_dict:
            return  # a checkpoint of another scheduler: start counting afresh
        for key in STATE:
            setattr(self, key, state_dict[key])
        self.reductions = list(state_dict.get("reductions", []))
        self.optimizer.set_lr(self.lr)


if "validation_plateau" not in LR_SCHEDULER_REGISTRY:  # idempotent: the plugin may be imported under two names
    register_lr_scheduler("validation_plateau", dataclass=ValidationPlateauConfig)(ValidationPlateauSchedule)
