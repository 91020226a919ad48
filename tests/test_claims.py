"""posmix-claims: the catalogue of the papers' claims (each figure is in the paper's text), the verdict
rule, option errors, the plan, and one tiny study end to end (two systems, a few updates, a toy corpus):
the length-capped splits, the page, and a study continued from its results folder alone. Nothing here
trains to convergence."""
import gzip
import json
import re
import subprocess
import sys

import pytest
from helpers import paper_text

from posmix_fairseq.harness.command import run
from posmix_fairseq.harness.evaluation import claims
from posmix_fairseq.harness.evaluation.claims import CLAIMS, SYSTEMS, Claim, verdict
from posmix_fairseq.harness.evaluation.paper_tables import GPA, HC, PEA, POSNET, RECPE
from posmix_fairseq.harness.toy_corpus import write_corpus

CITATION = {"GPA": GPA, "HC": HC, "PEA": PEA, "RecPE": RECPE, "PosNet": POSNET}


def test_every_paper_has_three_rows_and_ten_rows_compare_bleu_with_intervals():
    per_paper = {}
    for c in CLAIMS:
        per_paper.setdefault(c.paper, []).append(c)
    assert set(per_paper) == {"GPA", "HC", "PEA", "RecPE", "PosNet"}
    assert all(len(rows) >= 3 for rows in per_paper.values())
    assert sum(c.kind == "bleu" for c in CLAIMS) >= 10
    for c in CLAIMS:
        if c.kind == "bleu":
            assert c.system in SYSTEMS and c.baseline in SYSTEMS and c.test in claims.TEST_SETS
            assert c.expect in claims.EXPECTATIONS
        if c.kind == "not_measured":
            assert c.why_not and not c.systems()
    assert len({c.key for c in CLAIMS}) == len(CLAIMS)


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.key for c in CLAIMS])
def test_the_papers_figures_are_in_the_papers_text(claim):
    text = paper_text(CITATION[claim.paper])
    numbers = re.findall(r"\d+\.\d+", claim.paper_figure)
    assert [n for n in numbers if n not in text] == []


@pytest.mark.parametrize("expect, margin, diff, p, expected", [
    ("no_worse", 0.5, -0.4, 0.01, "holds"),                  # within the margin, even if significant
    ("no_worse", 0.5, -1.2, 0.01, "does not hold at this scale"),
    ("no_worse", 0.5, -1.2, 0.20, "inconclusive at this scale"),
    ("same", 0.5, 1.5, 0.20, "holds"),                       # not significant
    ("same", 0.5, 1.5, 0.01, "does not hold at this scale"),
    ("better", 0, 1.0, 0.01, "holds"),
    ("better", 0, 1.0, 0.30, "not confirmed at this scale (p >= 0.05)"),
    ("better", 0, -1.0, 0.01, "does not hold at this scale"),
    ("worse", 0, -3.0, 0.001, "holds"),
    ("worse", 0, 3.0, 0.001, "does not hold at this scale"),
])
def test_verdict_rule(expect, margin, diff, p, expected):
    claim = Claim("x", "GPA", "", "", "rposnet", "transformer", expect=expect, margin=margin)
    assert verdict(claim, diff, p) == expected


def cli(*argv, cwd=None):
    """The installed command in a child process: its exit status and output as a user sees them."""
    return subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.evaluation.claims", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def in_process(capsys, *argv):
    """What the console script does (``command.run``), in this process: (exit status, stdout, stderr)."""
    status = run(claims.main, "posmix-claims", list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("argv, message", [
    (["--rows", "gpa-9"], "--rows: no row 'gpa-9'"),
    (["--rows", "hc-4"], "--rows hc-4: a GPU is needed"),
    (["--systems", "bert"], "--systems: no system 'bert'"),
    (["--patience", "2", "--average", "4"], "--average must be in 1..--patience + 1 = 3"),
    (["--max-update", "0"], "argument --max-update: 0 is out of range: must be an integer >= 1"),
    (["--validate-every", "500", "--max-update", "100"], "--validate-every 500 is more than --max-update 100"),
])
def test_bad_options_are_usage_errors(tmp_path, capsys, argv, message):
    status, _, err = in_process(capsys, "--data-dir", str(tmp_path), "--plan", *argv)
    assert status == 2 and message in err, err


def test_plan_lists_every_command_and_rows_choose_their_systems(tmp_path, capsys):
    status, out, err = in_process(capsys, "--data-dir", str(tmp_path), "--plan", "--out", str(tmp_path / "study"))
    assert status == 0, err
    trains = [line for line in out.splitlines() if " -m fairseq_cli.train " in line]
    assert len(trains) == len(SYSTEMS)
    for key, line in zip(SYSTEMS, trains):
        assert f"--arch {SYSTEMS[key].arch}" in line and "--patience 3" in line and "--cpu" in line
    assert out.count("-m fairseq_cli.generate") == 4 * len(SYSTEMS) + 0
    assert "posmix_fairseq.harness.freeze" in out
    _, out, _ = in_process(capsys, "--data-dir", str(tmp_path), "--plan", "--rows", "gpa-2,pea-4")
    systems = re.findall(r"^# system (\w+):", out, re.M)
    assert systems == ["rposnet", "shaw", "rposnet_nogate", "shaw_konly"]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("claims")
    write_corpus(str(root / "raw"), seed=3, sizes={"train": 400, "valid": 16, "test": 30}, src="src", tgt="tgt")
    argv = ["--data-dir", str(root / "raw"), "-s", "src", "-t", "tgt", "--systems", "transformer,rposnet",
            "--vocab-size", "120", "--max-update", "4", "--validate-every", "2", "--patience", "1", "--average", "2",
            "--beam", "1", "--max-len-b", "12", "--size", "tiny", "--max-tokens", "2000",
            "--results", str(root / "results")]
    r = cli(*argv, "--out", str(root / "study"), "--page", str(root / "page.md"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root, argv


def test_the_test_sets_split_at_the_training_length_cap(tiny_study):
    root, _ = tiny_study
    info = json.load(open(root / "study" / "bpe" / "prepare.json"))
    cap = info["max_train_len"]
    bpe = root / "study" / "bpe"

    def lengths(name, lang):
        return [len(line.split()) for line in open(bpe / f"{name}.{lang}", encoding="utf-8")]

    assert max(max(lengths("train.capped", "src")), max(lengths("train.capped", "tgt"))) <= cap
    assert info["train_pairs_kept"] < info["train_pairs"] == 400
    assert lengths("long", "src") and min(lengths("long", "src")) > cap >= max(lengths("seen", "src"))
    assert len(lengths("seen", "src")) + len(lengths("long", "src")) == 30
    assert len(lengths("concat", "src")) == 15
    raw_test = open(root / "study" / "raw" / "test.src", encoding="utf-8").read().splitlines()
    assert open(root / "study" / "raw" / "concat.src", encoding="utf-8").readline().rstrip("\n") == \
        f"{raw_test[0]} {raw_test[1]}"


def test_the_page_has_every_row_and_the_frozen_model_translates_as_trained(tiny_study):
    root, _ = tiny_study
    page = (root / "page.md").read_text()
    for c in CLAIMS:
        assert f"| {c.key} |" in page
    gpa1 = next(line for line in page.splitlines() if line.startswith("| gpa-1 |"))
    assert re.search(r"rPosNet [\d.]+ ± [\d.]+ vs Transformer .* BLEU on `test`: Δ = [-+][\d.]+, p = [\d.]+", gpa1)
    assert "not run" in next(line for line in page.splitlines() if line.startswith("| hc-1 |"))
    result = json.load(open(root / "results" / "rposnet" / "result.json"))
    assert result["frozen"]["same_translations"] == result["frozen"]["sentences"] == 30
    assert result["frozen"]["parameters"]["all"] < result["parameters"]["all"]
    gpa5 = next(line for line in page.splitlines() if line.startswith("| gpa-5 |"))
    assert "Base size, same count: 23.0% saved" in gpa5 and "D = 32:" in gpa5


def test_a_study_continues_from_its_results_folder_alone(tiny_study, capsys):
    """A fresh study folder, the results folder of the first: nothing is trained again, the same spm.model
    encodes, and the page's scores are the same."""
    root, argv = tiny_study
    hyps = gzip.open(root / "results" / "transformer" / "hyp.test.txt.gz", "rt").read().splitlines()
    assert len(hyps) == 30 and all(h.startswith("H-") for h in hyps)
    status, _, err = in_process(capsys, *argv, "--render-only", "--out", str(root / "again"), "--page",
                                str(root / "again.md"))
    assert status == 0, err[-3000:]
    assert not (root / "again" / "systems" / "transformer" / "train.log").exists()
    first = [line for line in (root / "page.md").read_text().splitlines() if line.startswith("| gpa-1 |")]
    again = [line for line in (root / "again.md").read_text().splitlines() if line.startswith("| gpa-1 |")]
    assert first == again
    status, _, err = in_process(capsys, *[a if a != "120" else "200" for a in argv], "--render-only", "--out",
                                str(root / "other"))
    assert status == 2 and "holds a study with other settings (vocab_size: 120 there, 200 here)" in err
