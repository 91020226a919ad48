"""PEA's learning-rate schedule (validation_plateau: x0.9 after 6 validations without improvement, 8
validations per epoch) against a simulation of fairseq-train's own order of calls, and the task that
keeps only the checkpoints the final average can use (``translation_window``). No training: fast."""
import os

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.optim.adam import FairseqAdam
from omegaconf import OmegaConf

from posmix_fairseq.schedulers.validation_plateau import ValidationPlateauConfig, ValidationPlateauSchedule
from posmix_fairseq.tasks.averaged_checkpoints import (AveragedCheckpointsTask, kept_for_average, read_extra_state,
                                                       strip_optimizer_state)


def adam(lr):
    cfg = OmegaConf.create(dict(lr=[lr], adam_betas="(0.9, 0.98)", adam_eps=1e-9, weight_decay=0.0, use_old_adam=False,
                                fp16_adam_stats=False, tpu=False))
    return FairseqAdam(cfg, [torch.nn.Parameter(torch.zeros(2))])


def make_scheduler(interval, shrink=0.9, patience=6, lr=3e-4):
    optimizer = adam(lr)
    cfg = OmegaConf.create(dict(lr_shrink=shrink, lr_patience=patience, lr_threshold=0.0, lr=[lr],
                                maximize_best_checkpoint_metric=False, save_interval_updates=interval,
                                validate_interval_updates=interval, validate_after_updates=0, disable_validation=False))
    return ValidationPlateauSchedule(cfg, optimizer), optimizer


def simulate(scheduler, losses, updates_per_epoch, interval):
    """fairseq-train's order: train_step -> step_update(u); validate_and_save (a validation at every save
    and at each epoch's end: save_checkpoint records the best); at an epoch's end lr_step(epoch, loss).
    Returns the update -> learning rate seen after each update."""
    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        del checkpoint_utils.save_checkpoint.best
    losses = iter(losses)
    lrs, update, epoch = {}, 0, 1
    try:
        while True:
            for step in range(1, updates_per_epoch + 1):
                update += 1
                scheduler.step_update(update)
                end = step == updates_per_epoch
                if end or update % interval == 0:
                    loss = next(losses)
                    best = getattr(checkpoint_utils.save_checkpoint, "best", loss)
                    checkpoint_utils.save_checkpoint.best = min(best, loss)
                if end:
                    scheduler.step(epoch, loss)
                    scheduler.step_update(update)
                lrs[update] = scheduler.optimizer.get_lr()
            epoch += 1
    except StopIteration:
        return lrs


def test_the_rate_shrinks_at_the_sixth_validation_without_improvement_every_time():
    interval, per_epoch = 10, 80  # 8 validations per epoch (PEA 4.1)
    losses = [5.0 - 0.1 * i for i in range(10)] + [4.5] * 14 + [3.0] + [3.5] * 7
    scheduler, _ = make_scheduler(interval)
    lrs = simulate(scheduler, losses, per_epoch, interval)
    # validations 1-10 improve; 11-16 do not (the 6th of them, validation 16 at update 160, shrinks the
    # rate); 17-22 again (validation 22, update 220); 23-24 no; 25 improves; 26-31 (validation 31: update 310)
    assert scheduler.reductions == [160, 220, 310]
    # an epoch's end (update 160) shrinks the rate at once; a validation inside an epoch (220, 310) is seen
    # by the next update's step_update, so its rate applies from the update after that
    assert lrs[159] == pytest.approx(3e-4) and lrs[160] == pytest.approx(3e-4 * 0.9)
    assert lrs[220] == pytest.approx(3e-4 * 0.9) and lrs[221] == pytest.approx(3e-4 * 0.81)
    assert lrs[310] == pytest.approx(3e-4 * 0.81) and lrs[311] == pytest.approx(3e-4 * 0.9 ** 3)
    # the epoch ends (updates 80, 160, 240, 320) count once, not twice
    assert scheduler.observed_update == 320


def test_fairseqs_reduce_lr_on_plateau_would_not_decay_within_the_same_run():
    """The same losses with one plateau step per epoch (fairseq's reduce_lr_on_plateau, patience 6):
    only 4 epoch-end validations, so no decay at all."""
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule

    interval, per_epoch = 10, 80
    _, optimizer = make_scheduler(interval)
    cfg = OmegaConf.create(dict(lr_shrink=0.9, lr_threshold=1e-4, lr_patience=6, warmup_updates=0, warmup_init_lr=-1,
                                lr=[3e-4], maximize_best_checkpoint_metric=False))
    fairseq_scheduler = ReduceLROnPlateauLRSchedule(cfg, optimizer)
    losses = [5.0 - 0.1 * i for i in range(10)] + [4.5] * 14 + [3.0] + [3.5] * 7
    lrs = simulate(fairseq_scheduler, losses, per_epoch, interval)
    assert list(lrs.values()) == pytest.approx([3e-4] * len(lrs))


def test_state_survives_a_restart():
    scheduler, _ = make_scheduler(10)
    simulate(scheduler, [5.0] + [5.0] * 5, 80, 10)  # 1 best + 5 without improvement
    state = scheduler.state_dict()
    resumed, optimizer = make_scheduler(10)
    resumed.load_state_dict(state)
    assert resumed.bad_validations == 5 and resumed.observed_update == 60
    resumed.observe(5.0, 70)  # the 6th
    assert resumed.reductions == [70] and optimizer.get_lr() == pytest.approx(2.7e-4)


def test_a_validation_that_is_not_a_save_is_a_clear_error():
    optimizer = adam(1e-3)
    cfg = OmegaConf.structured(ValidationPlateauConfig(lr=[1e-3], maximize_best_checkpoint_metric=False,
                                                       save_interval_updates=300, validate_interval_updates=100,
                                                       validate_after_updates=0, disable_validation=False))
    with pytest.raises(ValueError, match=r"--validate-interval-updates \(100\) must be 0 or a multiple of "
                                         r"--save-interval-updates \(300\)"):
        ValidationPlateauSchedule(cfg, optimizer)


# --- the checkpoints an average keeps -----------------------------------------------------------------------

def test_window_keeps_the_best_and_the_ones_after_it_and_the_last():
    paths = [f"c{i}" for i in range(10)]
    scores = dict(zip(paths, [5, 4, 3, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1]))
    assert kept_for_average(paths, scores, 3, True) == ["c3", "c4", "c5", "c7", "c8", "c9"]
    assert kept_for_average(paths, scores, 3, False) == ["c7", "c8", "c9"]
    assert kept_for_average(paths, scores, 0, True) == []
    scores["c9"] = 1.0  # the newest is the best: the last 3 hold it
    assert kept_for_average(paths, scores, 3, True) == ["c7", "c8", "c9"]


def test_every_average_that_posmix_average_can_make_survives_the_pruning():
    """Pruning after each save, as the task does, never removes a checkpoint of the final average."""
    import random

    rng = random.Random(0)
    for _ in range(200):
        n, total = rng.randint(1, 6), rng.randint(1, 40)
        losses = [rng.choice([1.0, 2.0, 3.0]) + rng.random() for _ in range(total)]
        kept, scores = [], {}
        for i, loss in enumerate(losses):
            kept.append(f"c{i:03d}")
            scores[f"c{i:03d}"] = loss
            kept = kept_for_average(kept, scores, n, True)
        everything = [f"c{i:03d}" for i in range(total)]
        best = min(range(total), key=lambda i: (losses[i], i))
        final = everything[best:best + n] if best + n <= total else everything[-n:]
        if len(everything) >= n:
            assert set(final) <= set(kept)
        assert len(kept) <= 2 * n


def test_strip_optimizer_state_keeps_the_weights_and_the_validation_score(tmp_path):
    path = str(tmp_path / "checkpoint_1_100.pt")
    weights = {"w": torch.arange(6.0)}
    torch.save({"model": weights, "last_optimizer_state": {"state": {0: torch.ones(1000)}},
                "extra_state": {"val_loss": 2.5}}, path)
    before = os.path.getsize(path)
    assert strip_optimizer_state(path)
    state = torch.load(path, weights_only=False)
    assert "last_optimizer_state" not in state and torch.equal(state["model"]["w"], weights["w"])
    assert read_extra_state(path)["val_loss"] == 2.5 and os.path.getsize(path) < before
    assert not strip_optimizer_state(path)


def test_post_save_prunes_the_directory_by_update_count_and_strips_what_it_keeps(tmp_path):
    """The task's post_save hook on a real directory: interval checkpoints ordered by their update count
    (900 before 1000, which a sort by name would put first), the best and the one after it kept without
    optimizer state, the rest removed, fairseq's own copies and other files untouched."""
    losses = {"checkpoint_1_300.pt": 3.0, "checkpoint_1_600.pt": 2.0, "checkpoint_1_900.pt": 2.5,
              "checkpoint_1_1000.pt": 2.6, "checkpoint_1_1300.pt": 2.7}
    for name, loss in [*losses.items(), ("checkpoint_last.pt", 9.0), ("checkpoint_best.pt", 2.0)]:
        torch.save({"model": {"w": torch.zeros(2)}, "last_optimizer_state": {"step": 1},
                    "extra_state": {"val_loss": loss}}, str(tmp_path / name))
    (tmp_path / "checkpoint_1_1.txt").write_text("not a checkpoint")
    cfg = OmegaConf.create(dict(average_window=2, average_from="best", maximize_best_checkpoint_metric=False,
                                source_prefix=None))
    AveragedCheckpointsTask(cfg, None, None).post_save(str(tmp_path / "checkpoint_1_1300.pt"), 1300)
    kept = ["checkpoint_1_600.pt", "checkpoint_1_900.pt", "checkpoint_1_1000.pt", "checkpoint_1_1300.pt"]
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["checkpoint_best.pt", "checkpoint_last.pt",
                                                          "checkpoint_1_1.txt"])
    for name in kept:
        assert "last_optimizer_state" not in torch.load(str(tmp_path / name), weights_only=False)
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        assert "last_optimizer_state" in torch.load(str(tmp_path / name), weights_only=False)
