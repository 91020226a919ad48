"""The one pipeline driver (posmix_fairseq.harness.pipeline): a failing stage's error, the caller's paths,
fairseq-generate's defaults, and that every driver of preprocess / train / generate goes through it.
(Its stages run for real in tests/test_cli_end_to_end.py, tests/test_recipe.py and the GPU benchmark's
dry run.)"""
import os
import re
import subprocess
import sys

import pytest

from posmix_fairseq.harness import pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_failing_stage_raises_with_its_exit_status_and_log_tail(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cmd = [sys.executable, "-c", "import sys; print('loading the data'); print('no such file: train.bin'); sys.exit(3)"]
    with pytest.raises(pipeline.StepFailed) as e:
        pipeline.run(cmd, log=os.path.join("logs", "train.log"))
    assert e.value.returncode == 3 and e.value.code != 0
    assert "no such file: train.bin" in str(e.value) and str(tmp_path / "logs" / "train.log") in str(e.value)
    assert (tmp_path / "logs" / "train.log").read_text().splitlines() == ["loading the data", "no such file: train.bin"]


def test_stage_paths_are_the_callers(tmp_path, monkeypatch):
    """Relative paths are resolved against the current directory before a command sees them."""
    monkeypatch.chdir(tmp_path)
    pre = pipeline.preprocess_command("de", "en", "bin", "bpe/train", "bpe/valid", joined=True)
    assert pre[pre.index("--destdir") + 1] == str(tmp_path / "bin")
    assert pre[pre.index("--trainpref") + 1] == str(tmp_path / "bpe" / "train") and "--testpref" not in pre
    train = pipeline.train_command("bin", "ckpt", ["--arch", "rposnet_iwslt_de_en"])
    assert train[3] == str(tmp_path / "bin") and train[train.index("--save-dir") + 1] == str(tmp_path / "ckpt")
    gen = pipeline.generate_command("bin", os.path.join("ckpt", "checkpoint_best.pt"))
    assert gen[gen.index("--path") + 1] == str(tmp_path / "ckpt" / "checkpoint_best.pt")


def test_generate_keeps_fairseqs_defaults_but_the_batch_multiple():
    """What a user runs: no length or beam settings unless asked; --required-batch-size-multiple 1 always
    (fairseq 0.12.3 skips sentences with its default of 8)."""
    gen = pipeline.generate_command("bin", "c.pt", ["--beam", "4"])
    assert gen[gen.index("--required-batch-size-multiple") + 1] == "1"
    assert not {"--max-len-a", "--max-len-b", "--lenpen"} & set(gen) and gen[-2:] == ["--beam", "4"]


def test_a_missing_command_output_is_an_error(tmp_path):
    """fairseq-generate on data that does not exist: a non-zero exit, raised, not an empty output file."""
    out = tmp_path / "gen.txt"
    with pytest.raises(pipeline.StepFailed):
        pipeline.generate(tmp_path / "no-data", tmp_path / "no.pt", out, log=tmp_path / "gen.log")
    assert "no-data" in (tmp_path / "gen.log").read_text() or "No such file" in (tmp_path / "gen.log").read_text()


def test_one_driver_and_no_circle():
    """Only the pipeline (and the benchmark's in-process launcher, which it drives) names fairseq's
    preprocess / train / generate modules; the recipes' plan does not import their stages."""
    names = re.compile(r"""["']fairseq_cli\.(preprocess|train|generate)["']|from fairseq_cli import (preprocess|train|generate)""")
    allowed = {os.path.join("posmix_fairseq", "harness", "pipeline.py"),
               os.path.join("posmix_fairseq", "harness", "benchmarks", "gpu", "fairseq_child.py")}
    offenders = []
    for top in ("posmix_fairseq", "scripts", os.path.join("tests", "helpers.py")):
        walk = [(os.path.dirname(top), [], [os.path.basename(top)])] if top.endswith(".py") else os.walk(
            os.path.join(ROOT, top))
        for folder, _, files in walk:
            for name in files:
                path = os.path.join(ROOT, folder, name) if top.endswith(".py") else os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)
                if name.endswith(".py") and rel not in allowed and names.search(open(path, encoding="utf-8").read()):
                    offenders.append(rel)
    assert not offenders, offenders
    code = ("import sys, posmix_fairseq.harness.recipes.plan, posmix_fairseq.harness.recipes.grid_plan; "
            "print('posmix_fairseq.harness.recipes.stages' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=pipeline.environment())
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]
