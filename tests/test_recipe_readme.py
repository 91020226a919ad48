"""examples/<task>/README.md: each shows the full commands of its recipe's main configuration, and they stay
what the plan (PLAN=1) runs: a README read as a user reads it (its run line's variables, its command
block with $RAW, $OUT and $UD filled in) equals the plan's commands for those folders, and the file equals
what ``python -m posmix_fairseq.harness.recipes.readme`` writes now. No machine path appears in it."""
import io
import os
import re
import shlex
import sys

import pytest

from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.recipes import readme
from posmix_fairseq.harness.recipes.settings import TASKS, resolve
from posmix_fairseq.harness.recipes.stages import run_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = {"fairseq-preprocess": "fairseq_cli.preprocess", "fairseq-train": "fairseq_cli.train",
           "posmix-average": "posmix_fairseq.harness.evaluation.average",
           "posmix-score": "posmix_fairseq.harness.evaluation.score"}


def read(task):
    with open(os.path.join(ROOT, "examples", task, "README.md"), encoding="utf-8") as f:
        return f.read()


def command_block(text):
    block = text.split("## The commands", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0]
    joined = re.sub(r" \\\n\s+", " ", block).splitlines()
    return [line for line in joined if not line.startswith(("#", "UD=", "RAW="))]


def run_variables(text):
    """The VAR=value words before `bash examples/<task>/run.sh` on the README's run line."""
    line = next(line for line in text.splitlines() if "bash examples/" in line and not line.startswith("PLAN=1"))
    words = shlex.split(line)
    return dict(w.split("=", 1) for w in words[:words.index("bash")])


@pytest.mark.parametrize("task", sorted(TASKS))
def test_readme_commands_are_the_plans(task, tmp_path):
    text = read(task)
    raw, out = str(tmp_path / "raw"), str(tmp_path / "out")
    env = run_variables(text)
    stream = io.StringIO()
    stages = run_recipe(resolve(task, dict(env, RAW=raw, OUT=out)), plan=True, stream=stream)
    planned = [shlex.split(c) for c in stages.run.commands]
    shown = []
    for line in command_block(text):
        if line.startswith("fairseq-generate "):  # what the generate stage runs: not a stage command itself
            continue
        line = line.replace("$OUT", out).replace("$RAW", raw).replace("$UD", pipeline.USER_DIR)
        words = shlex.split(line)
        if words[0] in MODULES:
            words = [sys.executable, "-m", MODULES[words[0]]] + words[1:]
        elif words[0] == "python":
            words[0] = sys.executable
        shown.append(words)
    assert shown == planned
    assert any(w[:3] == [sys.executable, "-m", "fairseq_cli.train"] for w in shown)
    assert any(line.startswith("fairseq-generate ") and "--user-dir $UD" in line for line in command_block(text))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_readme_is_what_the_generator_writes_now(task):
    text = read(task)
    assert text == readme.render(task), f"examples/{task}/README.md is stale: python -m posmix_fairseq.harness.recipes.readme"
    for machine in (ROOT, sys.executable, readme.RAW_MARK, readme.OUT_MARK, "shared/"):
        assert machine not in text, machine


def test_readmes_state_the_papers_score_compute_and_subwords():
    text = read("wmt19_de_en")
    assert "The paper reports, for Relative (PEA Table 1, `posmix-reproduce --table pea-1`): De-En BLEU 40.4, " \
           "De-En TER 46.9." in text
    hours = 150000 * 4700 / 25000 / 3600  # PEA 4.1's 4,700 tokens per update, 150k updates, the assumed throughput
    assert f"Compute: 150,000 updates of 4,700 tokens (4700 x 1 GPU(s) x update-freq 1), about {hours:.1f} GPU-hours" in text
    assert "the paper: BPE (Sennrich et al., 2016) with 50k joint merge operations (PEA 4.1)" in text
    # PEA's relative model is Shaw et al.'s layout: the run line carries its flags
    assert "--encoder-self-shaw-value-term on" in run_variables(text)["TRAIN_FLAGS"]
    assert "GPA Table 3 (right)" in read("iwslt14_de_en") and "De-En BLEU 35.1" in read("iwslt14_de_en")
    assert "No paper reports this configuration" in read("multi30k_en_de")


def test_check_mode_reports_a_stale_readme(tmp_path, monkeypatch, capsys):
    path = tmp_path / "README.md"
    path.write_text("old\n")
    monkeypatch.setattr(readme, "readme_path", lambda task: str(path))
    assert readme.main(["--check", "multi30k_en_de"]) == 1
    assert path.read_text() == "old\n"
    assert f"1 README(s) differ from their plans: {path}" in capsys.readouterr().out
    assert readme.main(["multi30k_en_de"]) == 0 and path.read_text() == readme.render("multi30k_en_de")
    with pytest.raises(SystemExit) as e:
        readme.main(["no_such_task"])
    assert e.value.code == 2
