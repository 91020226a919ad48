"""A claims run whose training was interrupted and resumed (fairseq-train continues from its last epoch
checkpoint): its earlier log is set aside, not overwritten, and the run's record reads every part: the
validations of all of them, the stop by patience of the last, and the training time of each part."""
from posmix_fairseq.harness.evaluation.claims import runner

VALID = ("{stamp} | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | nll_loss 3.1 | "
         "ppl 8.6 | wps 16893.8 | wpb 2777.8 | bsz 168 | num_updates {updates}{best}\n")


def part(stamps_losses, stop=False):
    lines = ["2026-12-07 23:26:10 | INFO | fairseq_cli.train | num. shared model params: 602,624 (num. trained: "
             "602,624)\n"]
    for stamp, epoch, loss in stamps_losses:
        lines.append(VALID.format(stamp=stamp, epoch=epoch, loss=loss, updates=117 * epoch, best=""))
    if stop:
        lines.append(f"{stamps_losses[-1][0]} | INFO | fairseq_cli.train | early stop since valid performance hasn't "
                     "improved for last 5 runs\n")
    return "".join(lines)


def test_an_interrupted_training_keeps_every_part_and_its_time(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(part([("2026-12-07 23:27:20", 1, 9.1), ("2026-12-07 23:28:12", 2, 7.7)]))
    assert runner.set_aside_interrupted_log(str(log)) == [str(log) + ".1"]
    assert not log.exists() and (tmp_path / "train.log.1").exists()
    # the first part ran from its first timestamp (23:26:10) to its last (23:28:12)
    assert runner.logged_seconds(str(tmp_path / "train.log.1")) == 122.0
    log.write_text(part([("2026-12-08 02:00:00", 3, 6.9), ("2026-12-08 02:01:00", 4, 7.0),
                         ("2026-12-08 02:02:00", 5, 7.2)], stop=True))
    # a third part would not overwrite the second's log either
    earlier = [str(tmp_path / "train.log.1")]
    summary = runner.training_summary(*earlier, str(log))
    assert summary["validations"] == [(117, 9.1), (234, 7.7), (351, 6.9), (468, 7.0), (585, 7.2)]
    assert (summary["best_update"], summary["best_valid_loss"], summary["last_update"]) == (351, 6.9, 585)
    assert summary["stopped_by_patience"] and summary["resumed"] == 1 and summary["params"] == 602624
    assert runner.set_aside_interrupted_log(str(log)) == [str(tmp_path / "train.log.1"), str(tmp_path / "train.log.2")]


def test_a_run_never_interrupted_reads_one_log(tmp_path):
    log = tmp_path / "train.log"
    assert runner.set_aside_interrupted_log(str(log)) == []
    log.write_text(part([("2026-12-07 23:27:20", 1, 9.1)]))
    summary = runner.training_summary(str(log))
    assert summary["resumed"] == 0 and not summary["stopped_by_patience"] and summary["best_update"] == 117
