"""posmix-claims: the catalogue of the papers' claims (each quoted figure is on the paper's line for the system it
is quoted for), option errors, the plan (the CPU grid, and the uncapped GPU grid as a dry run), the recipe's
PLAN=1, the committed results folder against the page and docs, and one tiny study end to end (two systems,
a few updates, a toy corpus): the length-capped splits, what a run records, and the page written again from
the results folder alone. The statistics and the verdict rule: tests/test_claims_statistics.py. Nothing here
trains to convergence."""
import gzip
import json
import math
import os
import re
import subprocess
import sys

import pytest
from helpers import paper_text

from posmix_fairseq.harness.command import run
from posmix_fairseq.harness.evaluation import claims
from posmix_fairseq.harness.evaluation.claims.catalogue import (CLAIMS, EXPECTATIONS, PAPER_CITATIONS, SCORING_SETS)
from posmix_fairseq.harness.evaluation.claims.systems import SYSTEMS, TEST_SETS
from posmix_fairseq.harness.toy_corpus import write_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "examples", "claims", "results")
NUMBER = r"\d+\.\d+%?|\d+%"


def test_the_catalogue_has_every_papers_rows():
    per_paper = {}
    for c in CLAIMS:
        per_paper.setdefault(c.paper, []).append(c)
    assert set(per_paper) == set(PAPER_CITATIONS) and all(len(rows) >= 3 for rows in per_paper.values())
    assert len(CLAIMS) >= 27 and len({c.key for c in CLAIMS}) == len(CLAIMS)
    for c in CLAIMS:
        if c.kind in ("bleu", "gap"):
            assert c.system in SYSTEMS and c.baseline in SYSTEMS and c.test in SCORING_SETS and c.expect in EXPECTATIONS
            assert SCORING_SETS[c.test][0] in TEST_SETS
        if c.kind == "gap":
            assert c.test2 in SCORING_SETS
        if c.expect in ("same", "no_worse") and c.kind == "bleu":
            assert c.margin_source == "seed" or (c.margin and c.margin_source), c.key  # every margin says where from
        if c.kind == "not_measured":
            assert c.why_not and not c.systems()


def figures_of_line(line):
    return re.findall(r"(?<![\d.])(\d+(?:\.\d+)?)", line)


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.key for c in CLAIMS])
def test_each_quoted_figure_is_the_papers_figure_for_that_comparison(claim):
    """Each (label, figures) of a row's source is one line of the paper: the line that names the system also
    holds its figures. Every figure the row quotes is one of them, or their difference or relative change."""
    lines = paper_text(PAPER_CITATIONS[claim.paper]).splitlines()
    figures = []
    for label, values in claim.source:
        holding = [line for line in lines if label in line]
        assert holding, f"{claim.key}: no line of the paper holds {label!r}"
        assert any(all(v.rstrip("%") in figures_of_line(line) for v in values) for line in holding), \
            f"{claim.key}: no line with {label!r} holds {values}"
        figures += [float(v.rstrip("%")) for v in values]
    for quoted in re.findall(NUMBER, claim.paper_figure):
        value = float(quoted.rstrip("%"))
        derived = {round(abs(a - b), 1) for a in figures for b in figures} | \
                  {round(100 * abs(a - b) / b) for a in figures for b in figures if b}
        assert value in figures or value in derived, f"{claim.key}: {quoted} is not the paper's figure for this row"


def test_the_papers_significance_is_quoted_where_they_tested():
    """RecPE tests against the Transformer at p < 0.01; PosNet marks En-De PosNet-Embed not significant."""
    by_key = {c.key: c for c in CLAIMS}
    assert all("p < 0.01" in by_key[k].paper_figure for k in ("recpe-1", "recpe-2", "recpe-5"))
    assert "not marked significant" in by_key["posnet-1"].paper_figure
    assert "dev set" in by_key["hc-1"].paper_figure and "dev set" in by_key["hc-2"].paper_figure
    assert "rPosNet against the Transformer" in by_key["gpa-4"].paper_figure
    assert "K̂D + 4D²" in by_key["gpa-5"].text and "HK̂N + 3D²" in by_key["gpa-5"].text


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
    (["--max-update", "-1"], "argument --max-update: -1 is out of range"),
    (["--validate-every", "500", "--max-update", "100"], "--validate-every 500 is more than --max-update 100"),
    (["--render-only"], "--render-only writes the page from a results folder: give --results"),
])
def test_bad_options_are_usage_errors(tmp_path, capsys, argv, message):
    status, _, err = in_process(capsys, "--data-dir", str(tmp_path), "--plan", *argv)
    assert status == 2 and message in err, err


def test_the_plan_lists_every_run_with_its_seed_and_its_time(tmp_path, capsys):
    status, out, err = in_process(capsys, "--data-dir", str(tmp_path), "--plan", "--out", str(tmp_path / "study"),
                                  "--device", "cpu")
    assert status == 0, err
    trains = [line for line in out.splitlines() if " -m fairseq_cli.train " in line]
    expected = [(k, s) for k in sorted(SYSTEMS, key=lambda k: (SYSTEMS[k].group, list(SYSTEMS).index(k)))
                for s in range(1, SYSTEMS[k].seeds + 1)]
    assert len(trains) == len(expected) == sum(s.seeds for s in SYSTEMS.values())
    for (key, seed), line in zip(expected, trains):
        assert f"--arch {SYSTEMS[key].arch}" in line and f"--seed {seed} " in line and "--cpu" in line
        assert ("data-bin-uncapped" in line) == SYSTEMS[key].uncapped
    assert sum(SYSTEMS[k].seeds for k in SYSTEMS if k == "transformer") == 5
    assert out.count("-m fairseq_cli.generate") == 2 * len(TEST_SETS) * len(expected)  # as it stops, at length
    assert out.count("--task posmix_translation --match-target-len") == len(TEST_SETS) * len(expected)
    assert re.search(r"# time: \d+ runs x at most 2500 updates .* h of training", out)
    _, out, _ = in_process(capsys, "--data-dir", str(tmp_path), "--plan", "--rows", "gpa-2,pea-4", "--device", "cpu")
    assert re.findall(r"^# run (\w+) seed 1:", out, re.M) == ["rposnet", "shaw", "rposnet_nogate", "shaw_konly"]


def test_the_converged_gpu_grid_plans_on_a_cpu(tmp_path, capsys):
    """The GPU plan's dry run of the converged grid (the recipe's GPU=1): validation every epoch, patience 5, the
    safety cap far past where patience stops a run, several runs on one GPU, and a time estimate from the updates
    patience is expected to allow, not from the cap."""
    status, out, err = in_process(capsys, "--data-dir", str(tmp_path), "--plan", "--device", "cuda", "--jobs", "16",
                                  "--validate-every", "0", "--patience", "5", "--max-update", "30000",
                                  "--out", str(tmp_path / "gpu"))
    assert status == 0, err
    trains = [line for line in out.splitlines() if " -m fairseq_cli.train " in line]
    assert "16 at a time on the CUDA" in out and trains
    assert all("--max-update 30000" in line and "--patience 5" in line and "--validate-interval 1 " in line
               and "--cpu" not in line and "--no-epoch-checkpoints" not in line for line in trains)
    time_line = re.search(r"# time: (\d+) runs x about 8000 updates \(--expected-updates, the patience rule stops "
                          r"each before the --max-update 30000 cap\) x 0.166 s per update \(each of 16 runs sharing one "
                          r"H200, measured at --size small\) / 16 at once = ([\d.]+) h of training", out)
    assert time_line, out.splitlines()[-1]
    runs, hours = int(time_line.group(1)), float(time_line.group(2))
    assert runs == len(trains) and hours == pytest.approx(runs * 8000 * 0.166 / 16 / 3600, abs=0.05)


def test_the_gpu_plan_reads_the_measured_step_times_between_and_past_the_measured_counts():
    from posmix_fairseq.harness.evaluation.claims.systems import gpu_seconds_per_update
    assert gpu_seconds_per_update(1) == pytest.approx(0.057)
    assert gpu_seconds_per_update(8) == pytest.approx(0.097)
    assert gpu_seconds_per_update(6) == pytest.approx((0.076 + 0.097) / 2)  # halfway between 4 and 8
    # past 16 runs the 16 runs' throughput is shared: twice the runs, each twice as slow
    assert gpu_seconds_per_update(32) == pytest.approx(2 * 0.166)
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        gpu_seconds_per_update(0)


def test_the_recipe_plans_and_every_example_script_parses(tmp_path):
    for folder, _, files in os.walk(os.path.join(ROOT, "examples")):
        for name in files:
            if name.endswith(".sh"):
                assert subprocess.run(["bash", "-n", os.path.join(folder, name)]).returncode == 0, name
    env = dict(os.environ, PLAN="1", RAW=str(tmp_path), OUT=str(tmp_path / "claims"), PYTHON=sys.executable,
               PYTHONPATH=ROOT)
    proc = subprocess.run(["bash", os.path.join(ROOT, "examples", "claims", "run.sh"), "--device", "cpu"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "# posmix-claims plan:" in proc.stdout and "--seed 5" in proc.stdout
    proc = subprocess.run(["bash", os.path.join(ROOT, "examples", "claims", "run.sh")], capture_output=True, text=True,
                          env={k: v for k, v in env.items() if k != "RAW"})
    assert proc.returncode != 0 and "set RAW to the folder of Multi30k raw text" in proc.stderr


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("claims")
    write_corpus(str(root / "raw"), seed=3, sizes={"train": 400, "valid": 16, "test": 30}, src="src", tgt="tgt")
    argv = ["--data-dir", str(root / "raw"), "-s", "src", "-t", "tgt", "--systems", "transformer,rposnet",
            "--seeds", "1", "--vocab-size", "120", "--max-update", "4", "--validate-every", "2", "--patience", "1",
            "--average", "2", "--beam", "1", "--max-len-b", "12", "--size", "tiny", "--max-tokens", "2000",
            "--device", "cpu", "--results", str(root / "results")]
    r = subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.evaluation.claims", *argv, "--out",
                        str(root / "study"), "--page", str(root / "page.md")], capture_output=True, text=True, timeout=600)
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
    assert len(lengths("seen", "src")) + len(lengths("long", "src")) == 30 and len(lengths("concat", "src")) == 15
    heldout = lengths("long_heldout", "src")
    assert heldout and min(heldout) > cap and len(heldout) <= 400 - info["train_pairs_kept"]
    train = set(open(bpe / "train.capped.src", encoding="utf-8"))
    assert not train & set(open(bpe / "long_heldout.src", encoding="utf-8"))  # never trained on
    assert info["source_lengths"]["long_heldout"] == heldout


def test_the_step_probe_measures_each_count_with_runs_of_their_own(tiny_study, tmp_path):
    """The probe behind the GPU plan's step times: N trainings at once per count, each with a seed of its own (none
    resumes another's checkpoints), each capped at --updates, with fairseq's updates/s of every log interval."""
    root, _ = tiny_study
    out = tmp_path / "step.json"
    argv = ["--data-dir", str(root / "raw"), "-s", "src", "-t", "tgt", "--vocab-size", "120", "--validate-every", "2",
            "--size", "tiny", "--max-tokens", "2000", "--device", "cpu", "--threads", "1", "--out",
            str(tmp_path / "probe"), "--counts", "1,2", "--updates", "4", "--json", str(out)]
    r = subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.evaluation.claims.step_probe", *argv],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.load(open(out))
    assert [(x["count"], x["system"], x["seed"]) for x in result["runs"]] == [
        (1, "transformer", 1), (2, "transformer", 2), (2, "rposnet", 2)]
    assert all(x["updates"] == 4 and len(x["updates_per_s"]) == 2 and x["train_seconds"] and len(x["valid_losses"]) == 2
               for x in result["runs"])
    for count, measured in result["counts"].items():
        assert measured["updates_per_s_together"] == pytest.approx(int(count) / measured["seconds_per_update"], rel=0.02)
    r = subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.evaluation.claims.step_probe", *argv[:-6],
                        "--counts", "0,4", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--counts '0,4': give runs at once as a comma list of integers >= 1" in r.stderr


def test_a_run_records_its_seed_commit_machine_load_and_scores(tiny_study):
    root, _ = tiny_study
    result = json.load(open(root / "results" / "rposnet" / "seed1" / "result.json"))
    assert result["seed"] == 1 and "--seed 1 " in result["train_flags"]
    assert re.fullmatch(r"[0-9a-f]{40}", result["commit"]) and isinstance(result["code_differs_from_commit"], bool)
    assert "vCPUs" in result["machine"] and "torch" in result["machine"]
    assert "load_1min_mean" in result and result["train_seconds"] > 0
    assert result["frozen"]["same_translations"] == result["frozen"]["sentences"] == 30
    assert result["parameters"]["position_modules"] > 0 and result["frozen"]["parameters"]["position_modules"] == 0
    assert set(result["scores"]) >= {"test", "seen", "long", "concat", "long_heldout"}
    test = result["scores"]["test"]
    assert set(test) >= {"bleu", "bp", "ratio", "precisions", "truncated", "chrf++"}
    if min(test["precisions"]) > 0:
        geo = math.exp(sum(math.log(p) for p in test["precisions"]) / 4)
        assert test["bleu"] == pytest.approx(test["bp"] * geo, abs=2e-3)
    assert result["sacrebleu_signature"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert "nw:2" in result["sacrebleu_signature"]["chrf++"]  # chrF++: word bigrams
    hyps = gzip.open(root / "results" / "transformer" / "seed1" / "hyp.long_heldout.txt.gz", "rt").read().splitlines()
    assert len(hyps) == json.load(open(root / "study" / "bpe" / "prepare.json"))["test_sizes"]["long_heldout"]


def test_the_page_has_every_row_and_one_seed_is_never_a_verdict(tiny_study):
    root, _ = tiny_study
    page = (root / "page.md").read_text()
    for c in CLAIMS:
        assert f"| {c.key} |" in page
    gpa1 = [line for line in page.splitlines() if line.startswith("| gpa-1 |")][-1]  # its GPA row, not the headline
    assert re.search(r"rPosNet [\d.]+ \(1 seed\) vs Transformer .* BLEU on `test`: Δ = [-+][\d.]+ "
                     r"\(no interval: 1 seed\)", gpa1)
    assert "inconclusive at this scale: 1 seed (3 needed)" in gpa1
    assert "not run yet" in next(line for line in page.splitlines() if line.startswith("| hc-1 |"))
    assert "## Lengths: what fails" in page and "## Every run" in page
    lengths = page.split("## Lengths: what fails")[1].split("\n## ")[0]
    assert "| `long` (" in lengths and "no checkpoint kept" in lengths  # no run here kept oracle-length hypotheses


def test_the_page_is_written_again_from_the_results_folder_alone(tiny_study, capsys):
    """No data, no study folder: the results folder's hypotheses, references and settings give the same page."""
    root, argv = tiny_study
    before = {p: p.read_bytes() for p in (root / "results").rglob("*") if p.is_file()}
    status, _, err = in_process(capsys, "--results", str(root / "results"), "--render-only", "--page",
                                str(root / "again.md"), "--out", str(root / "nowhere"))
    assert status == 0, err[-3000:]
    assert not (root / "nowhere").exists()
    after = {p: p.read_bytes() for p in (root / "results").rglob("*") if p.is_file()}
    assert after == before  # the page only: no result.json is written again
    first, again = (root / "page.md").read_text(), (root / "again.md").read_text()
    assert [line for line in first.splitlines() if line.startswith("| ")] == \
        [line for line in again.splitlines() if line.startswith("| ")]
    status, _, err = in_process(capsys, *[a if a != "120" else "200" for a in argv], "--plan")
    assert status == 2 and "holds a study with other settings (vocab_size: 120 there, 200 here)" in err


def test_a_run_records_its_fingerprint_and_decodes_at_the_references_lengths(tiny_study):
    """The fingerprint of the code that trained the run, and every test set decoded also at each reference's
    length (--match-target-len), kept as hyp.<set>.oracle.txt.gz: each hypothesis as many pieces as its
    reference."""
    from posmix_fairseq.harness.evaluation.claims.fingerprint import fingerprint, system_flags

    root, _ = tiny_study
    for key in ("transformer", "rposnet"):
        result = json.load(open(root / "results" / key / "seed1" / "result.json"))
        assert result["fingerprint"] == fingerprint(system_flags(key))["fingerprint"]
        assert len(result["fingerprint_outputs"]) == 36 and result["oracle_decode_seconds"] > 0
        for test in TEST_SETS:
            found = gzip.open(root / "results" / key / "seed1" / f"hyp.{test}.oracle.txt.gz", "rt").read().splitlines()
            refs = open(root / "study" / "bpe" / f"{test}.tgt", encoding="utf-8").read().splitlines()
            assert len(found) == len(refs)
            for line in found:
                i, _, hyp = line.split("\t", 2)
                assert len(hyp.split()) == len(refs[int(i[2:])].split()), (test, line)


def test_a_run_of_other_model_code_is_refused(tiny_study, tmp_path):
    """A seed whose model code's fingerprint differs from the system's runs in the results folder is not trained:
    the error names the system, both fingerprints and how to go on. Runs without a fingerprint are exempt."""
    import shutil

    root, argv = tiny_study
    shutil.copytree(root / "study", tmp_path / "study")
    shutil.copytree(root / "results", tmp_path / "results")
    kept = tmp_path / "results" / "transformer" / "seed1" / "result.json"
    result = json.load(open(kept))
    ours = result["fingerprint"]
    result.update(fingerprint="0123456789abcdef", commit="c0ffee", fingerprint_outputs=[
        v + 1e-3 for v in result["fingerprint_outputs"]])
    json.dump(result, open(kept, "w"))
    again = [a if a != str(root / "results") else str(tmp_path / "results") for a in argv]
    again = [a if a != "transformer,rposnet" else "transformer" for a in again]
    again[again.index("--seeds") + 1] = "2"
    r = subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.evaluation.claims", *again, "--out",
                        str(tmp_path / "study")], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert (f"transformer seed 2: this model code has fingerprint {ours}, but transformer seed 1 ({kept}) was "
            f"trained with fingerprint 0123456789abcdef (commit c0ffee)") in r.stderr, r.stderr[-3000:]
    assert "differ by up to 0.001, more than 1e-05" in r.stderr and "git worktree add DIR c0ffee" in r.stderr
    assert not (tmp_path / "study" / "systems" / "transformer" / "seed2" / "train.log").exists()


# ---- the committed study ----------------------------------------------------------------------------------

def committed_runs():
    return [json.load(open(os.path.join(RESULTS, key, seed, "result.json")))
            for key in sorted(os.listdir(RESULTS)) if os.path.isdir(os.path.join(RESULTS, key)) and key in SYSTEMS
            for seed in sorted(os.listdir(os.path.join(RESULTS, key)))]


def test_render_only_needs_neither_torch_nor_fairseq(tiny_study, tmp_path):
    root, _ = tiny_study
    code = ("import sys; from posmix_fairseq.harness.evaluation.claims import main; "
            f"main(['--results', {str(root / 'results')!r}, '--render-only', '--page', {str(tmp_path / 'p.md')!r}]); "
            "assert 'torch' not in sys.modules and 'fairseq' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "p.md").read_text().startswith("# The papers' claims, measured")


def test_render_only_names_a_damaged_result(tiny_study, tmp_path, capsys):
    import shutil
    root, _ = tiny_study
    results = tmp_path / "results"
    shutil.copytree(root / "results", results)
    damaged = results / "rposnet" / "seed1" / "result.json"
    damaged.write_text(damaged.read_text()[:40])
    status, _, err = in_process(capsys, "--results", str(results), "--render-only", "--page", str(tmp_path / "p.md"))
    assert status == 2 and str(damaged) in err and "damaged result.json" in err and "Traceback" not in err
    assert not (tmp_path / "p.md").exists()


@pytest.mark.parametrize("argv, option", [
    (["--data-dir", "somewhere"], "--data-dir"), (["--vocab-size", "200"], "--vocab-size"),
    (["--max-update", "10"], "--max-update"), (["--patience", "5"], "--patience"), (["--device", "cpu"], "--device"),
    (["--rows", "gpa-1"], "--rows"),
])
def test_render_only_refuses_the_options_it_would_not_use(tmp_path, capsys, argv, option):
    status, _, err = in_process(capsys, "--results", str(tmp_path), "--render-only", *argv)
    assert status == 2 and f"{option} would not be used" in err, err


def test_the_converged_column_renders_with_no_some_or_all_seeds(tiny_study, tmp_path, capsys):
    """An empty converged folder (a BPE model only), and one with runs: every BLEU row shows both columns; the
    verdict stays the 2,500-update one, labelled, until the row's systems have their seeds."""
    root, _ = tiny_study
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "spm.model").write_bytes((root / "results" / "spm.model").read_bytes())
    for folder, expected in ((empty, "no converged run yet"), (root / "results", "converged seeds so far: rPosNet 1 of 3")):
        status, _, err = in_process(capsys, "--results", str(root / "results"), "--converged-results", str(folder),
                                    "--render-only", "--page", str(tmp_path / "p.md"))
        assert status == 0, err[-3000:]
        page = (tmp_path / "p.md").read_text()
        headline = page.split("## Headline rows")[1].split("\n## ")[0]
        assert "ours at 2,500 updates (learning speed)" in headline and "ours converged" in headline
        gpa1 = next(line for line in page.splitlines() if line.startswith("| gpa-1 |"))
        assert expected in page and "| at 2,500 updates (learning speed): inconclusive" in gpa1
        assert "## Every run of the converged study" in page


def test_a_row_takes_the_converged_verdict_once_its_systems_have_their_seeds_and_says_when_it_changed():
    import numpy as np

    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    from posmix_fairseq.harness.evaluation.claims.page import Evidence, Run, combine, evaluate
    from posmix_fairseq.harness.evaluation.claims.statistics import corpus_scores
    rng = np.random.default_rng(0)
    total = np.array([12, 11, 10, 9])

    def trained(key, seed, rate):
        correct = rng.binomial(total, rate ** np.arange(1, 5), size=(300, 4))
        stats = np.column_stack([np.full((300, 2), 12.0), correct, np.tile(total, (300, 1))]).astype(float)
        return Run(key, seed, {"commit": "0" * 40}, {"test": stats}, {"test": corpus_scores(stats)})

    claims = [CLAIM_BY_KEY["recpe-1"]]  # MPRHead better than the Transformer
    early = [trained("mprhead", s, 0.62) for s in (1, 2, 3)] + [trained("transformer", s, 0.55) for s in range(1, 6)]
    late = [trained("mprhead", s, 0.55) for s in (1, 2, 3)] + [trained("transformer", s, 0.62) for s in range(1, 6)]
    rows = evaluate(claims, Evidence(early))
    assert rows[0].verdict == "holds"
    partial = Evidence(late[:2] + late[3:])
    conv = evaluate(claims, partial)
    combine(rows, conv, partial)
    assert rows[0].verdict == ("at 2,500 updates (learning speed): holds (converged seeds so far: MPRHead 2 of 3, "
                               "Transformer (sinusoidal, absolute) 5 of 5)")
    rows, full = evaluate(claims, Evidence(early)), Evidence(late)
    conv = evaluate(claims, full)
    combine(rows, conv, full)
    assert rows[0].verdict == ("does not hold at this scale (opposite sign) (changed from at 2,500 updates "
                               "(learning speed): holds)")


def test_the_committed_runs_record_what_a_reviewer_checks():
    runs = committed_runs()
    assert runs
    for r in runs:
        assert r["system"] in SYSTEMS and f"--seed {r['seed']} " in r["train_flags"]
        assert "commit" in r and "machine" in r and "load_1min_mean" in r
        assert "scores" in r and "test" in r["scores"], f"{r['system']} seed {r['seed']}: no scores (render the page)"


def test_the_page_and_the_choices_state_what_the_study_holds():
    """docs/reproduction.md is rendered from the committed results (its per-run BLEU equal result.json's scores);
    docs/choices.md states the study's cap, the pairs left out and the long test sentences as study.json has them."""
    study = json.load(open(os.path.join(RESULTS, "study.json")))["prepare"]
    page = open(os.path.join(ROOT, "docs", "reproduction.md"), encoding="utf-8").read().split("## Every run")[1]
    for r in committed_runs():
        row = f"| {SYSTEMS[r['system']].label} | {r['seed']} |"
        assert row in page and f"| {r['scores']['test']['bleu']:.2f} |" in page.split(row, 1)[1].splitlines()[0]
    choices = open(os.path.join(ROOT, "docs", "choices.md"), encoding="utf-8").read()
    left_out = 100 * (1 - study["train_pairs_kept"] / study["train_pairs"])
    for text in (f"{study['max_train_len']} pieces", f"{left_out:.1f}%", f"{study['test_sizes']['long']} sources",
                 f"{study['test_sizes']['long_heldout']:,}"):
        assert text in choices, text


def test_nothing_claims_a_convergence_that_was_not_reached():
    """Until a run of the converged study has stopped by patience (the first study's runs all stop at the update
    cap, and the main job trains a fixed number of updates), no text may say a model converged or reached a
    plateau. The converged study's names (its study, column, runs, seeds, grid, folder and options) name a
    design, not an outcome; the page says of each of its runs whether patience stopped it."""
    converged = os.path.join(ROOT, "examples", "claims", "results-converged")
    stopped = any(json.load(open(os.path.join(converged, key, seed, "result.json"))).get("stopped_by_patience")
                  for key in os.listdir(converged) if key in SYSTEMS for seed in os.listdir(os.path.join(converged, key))
                  if os.path.isfile(os.path.join(converged, key, seed, "result.json")))
    texts = {"README.md": open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(),
             "scripts/run_pipeline.py": open(os.path.join(ROOT, "scripts", "run_pipeline.py"), encoding="utf-8").read()}
    for name in os.listdir(os.path.join(ROOT, "docs")):
        if name.endswith(".md"):
            texts["docs/" + name] = open(os.path.join(ROOT, "docs", name), encoding="utf-8").read()
    names = re.compile(r"\bconverged (study|study's|column|runs?|seeds|grid)\b|ours converged|results-converged|"
                       r"converged-results|converged-grid|CONVERGED=1|not converged|never as converged", re.I)
    pattern = re.compile(r"\b(converged|convergence reached|validation plateau|its plateau)\b", re.I)
    assert names.sub("", "the converged study's column; ours converged; not converged") .count("converged") == 0
    assert pattern.search(names.sub("", "every model converged after 9,000 updates"))
    for name, text in texts.items():
        for line in text.splitlines():
            if pattern.search(names.sub("", line)) and not stopped:
                pytest.fail(f"{name}: {line.strip()[:160]}")


def test_the_readmes_headline_table_is_the_pages():
    """The README's rows of real-data verdicts are the page's headline rows, word for word."""
    page = open(os.path.join(ROOT, "docs", "reproduction.md"), encoding="utf-8").read()
    headline = page.split("## Headline rows")[1].split("\n## ")[0]
    rows = [line for line in headline.splitlines() if re.match(r"\| [a-z]+-\d+ \|", line)]
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    assert rows and [line for line in readme if line in rows] == rows


def test_a_row_that_finished_runs_cannot_fill_names_the_seeds_and_the_command():
    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    from posmix_fairseq.harness.evaluation.claims.page import Evidence, RowResult, Run, pending_text
    claim = CLAIM_BY_KEY["pea-7"]  # Shaw against the Transformer on long_heldout_far
    stats = {claim.test: None, "test": None}
    runs = ([Run("shaw", 1, {}, {"test": None})] + [Run("shaw", s, {}, dict(stats)) for s in (2, 3)]
            + [Run("transformer", 1, {}, {"test": None})]
            + [Run("transformer", s, {}, dict(stats)) for s in (2, 3, 4, 5)])
    text = pending_text([RowResult(claim)], Evidence(runs))
    # every system has its default seeds, but only two Shaw seeds scored the row's set: a fourth seed fills it
    assert text.startswith("Every system has its seeds. pea-7 reads `long_heldout_far`")
    assert "Shaw relative (PEA's: a^K and a^V) has 2 seeds scored on it" in text
    assert "`posmix-claims --data-dir $MULTI30K --rows pea-7 --seeds 4`" in text
    assert "Transformer" not in text  # 4 of its 5 seeds scored the set: enough for a verdict
    # with the third Shaw seed still to train, the default command fills the row: nothing more is said
    text = pending_text([RowResult(claim)], Evidence(runs[1:]))
    assert text == "Runs still to train (the command above trains them and keeps the finished ones): " \
                   "Shaw relative (PEA's: a^K and a^V): 1; 1 in all."


def test_holm_counts_two_rows_that_test_the_same_comparison_once():
    import numpy as np

    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    from posmix_fairseq.harness.evaluation.claims.page import Evidence, Run, evaluate
    from posmix_fairseq.harness.evaluation.claims.statistics import HOLDS, OPPOSITE, corpus_scores, holm
    rng = np.random.default_rng(0)
    total = np.array([12, 11, 10, 9])

    def trained(key, seed, rate):  # 300 sentences of 12 words; an n-gram is right with probability rate ** n
        correct = rng.binomial(total, rate ** np.arange(1, 5), size=(300, 4))
        stats = np.column_stack([np.full((300, 2), 12.0), correct, np.tile(total, (300, 1))]).astype(float)
        return Run(key, seed, {}, {"test": stats}, {"test": corpus_scores(stats)})

    runs = [trained(key, seed, rate) for key, rate in (("shaw", 0.62), ("transformer", 0.55), ("rposnet", 0.58),
                                                       ("hc_sa", 0.60)) for seed in (1, 2, 3)]
    # recpe-5 says Shaw beats the Transformer on `test`, posnet-6 that it does not: one null hypothesis
    rows = evaluate([CLAIM_BY_KEY[k] for k in ("recpe-5", "posnet-6", "gpa-6")], Evidence(runs), runs)
    assert rows[0].claim.hypothesis == rows[1].claim.hypothesis != rows[2].claim.hypothesis
    p = {r.claim.key: r.comparison.p for r in rows}
    two = holm({"shaw": p["recpe-5"], "gaussian": p["gpa-6"]})
    assert rows[0].p_holm == rows[1].p_holm == pytest.approx(two["shaw"])
    assert rows[2].p_holm == pytest.approx(two["gaussian"])
    # counted as three rows, the correction would be larger
    assert rows[0].p_holm < holm({"a": p["recpe-5"], "b": p["posnet-6"], "c": p["gpa-6"]})["a"]
    assert (rows[0].verdict, rows[1].verdict) == (HOLDS, OPPOSITE)
    assert "no commit recorded" in rows[0].seeds  # runs without a commit say so in their row


# ---- margins, claims as stated, quotes --------------------------------------------------------------------

def test_every_margin_is_fixed_in_the_catalogue_never_computed_from_results():
    """Every equivalence and no-worse row has its margin and reason in the catalogue; two studies whose seed
    spreads differ tenfold give the rows the same margin (the rule text) while their Δ differs."""
    import numpy as np

    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    from posmix_fairseq.harness.evaluation.claims.page import Evidence, Run, evaluate
    from posmix_fairseq.harness.evaluation.claims.statistics import corpus_scores
    for c in CLAIMS:
        if c.kind in ("bleu", "gap") and c.expect in ("same", "no_worse"):
            assert isinstance(c.margin, float) and c.margin > 0 and c.margin_source, c.key
    total = np.array([12, 11, 10, 9])

    def study(spread):
        rng = np.random.default_rng(1)
        runs = []
        for key, rate in (("rposnet", 0.58), ("transformer", 0.58), ("shaw", 0.6)):
            for seed in range(1, 6):
                r = rate + spread * rng.normal()
                correct = rng.binomial(total, r ** np.arange(1, 5), size=(200, 4))
                stats = np.column_stack([np.full((200, 2), 12.0), correct, np.tile(total, (200, 1))]).astype(float)
                runs.append(Run(key, seed, {}, {"test": stats}, {"test": corpus_scores(stats)}))
        return evaluate([CLAIM_BY_KEY["gpa-1"], CLAIM_BY_KEY["gpa-7"]], Evidence(runs), runs)

    narrow, wide = study(0.001), study(0.02)
    assert [r.rule for r in narrow] == [r.rule for r in wide]
    assert all("margin 1.00 BLEU" in r.rule for r in narrow)
    assert narrow[0].comparison.delta != wide[0].comparison.delta


def test_the_claims_are_coded_as_the_papers_state_them():
    """"Almost identical" and "loses nothing" are equivalence; "1-3 BLEU worse" and "the gap worsens" are
    directions, so a measured opposite sign reads as "does not hold (opposite sign)"."""
    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    from posmix_fairseq.harness.evaluation.claims.statistics import DOES_NOT_HOLD, OPPOSITE, Comparison, verdict
    hc1, hc3, hc5, pea5 = (CLAIM_BY_KEY[k] for k in ("hc-1", "hc-3", "hc-5", "pea-5"))
    assert (hc1.expect, hc1.margin) == ("same", 1.2) and (pea5.expect, pea5.margin) == ("same", 1.0)
    assert hc3.expect == "worse" and (hc5.kind, hc5.expect) == ("gap", "worse")

    def c(delta, lo, hi):
        width = (hi - lo) / 2
        return Comparison(delta, (lo, hi), (lo + 0.15 * width, hi - 0.15 * width), 0.001, width / 2.2, 10.0, (3, 5),
                          (0.4, 0.3))
    # HC-SA 2.26 better than BASE: not "almost identical"
    assert verdict(hc1.expect, hc1.margin, c(2.26, 1.3, 3.2), None).startswith(
        DOES_NOT_HOLD + ": better than the baseline by more than the margin")
    # SH-X better where HC says 1-3 BLEU worse; HC-ALL's gap shrinking where HC says it grows
    assert verdict(hc3.expect, 0.0, c(1.87, 0.9, 2.8), 0.01) == OPPOSITE
    assert verdict(hc5.expect, 0.0, c(2.62, 0.8, 4.4), 0.01) == OPPOSITE
    # sinusoidal Shaw better by more than the margin: it does not "lose nothing" in PEA's sense of "very similar"
    assert verdict(pea5.expect, pea5.margin, c(1.87, 1.1, 2.6), None).startswith(DOES_NOT_HOLD + ": better")


def test_the_quotes_give_the_papers_figure_for_the_comparison_each_row_makes():
    from posmix_fairseq.harness.evaluation.claims.catalogue import CLAIM_BY_KEY
    pea = paper_text(PAPER_CITATIONS["PEA"])
    # relative against absolute, both trained short: "4.4% to 11.9% BLEU" (abstract and conclusion)
    assert "(4.4% to 11.9% BLEU) when translating a sentence that is longer than any observed training" in pea
    for key in ("pea-6", "pea-7"):
        c = CLAIM_BY_KEY[key]
        assert (c.system, c.baseline) == ("shaw", "transformer") and not SYSTEMS["transformer"].uncapped
        assert "relative against absolute, both trained on ≤ 75 tokens" in c.paper_figure and "4.4% to 11.9%" in c.paper_figure
        assert "a very biased selection" in c.paper_figure and "a very biased selection" in pea
    # PEA's 6.2 is absolute on ≤ 75 against absolute on ≤ 100, never against relative
    assert "For sequences longer than 100 tokens this difference grows to 6.2% BLEU" in pea
    assert "absolute on ≤ 75 loses 6.2 against absolute on ≤ 100" in CLAIM_BY_KEY["pea-7"].paper_figure
    assert "trails it by 6.2" not in CLAIM_BY_KEY["pea-7"].paper_figure
    assert "conclude that it is most likely noise" in pea and "most likely noise" in CLAIM_BY_KEY["pea-5"].paper_figure
    hc = paper_text(PAPER_CITATIONS["HC"])
    assert "bins by reference length" in hc and "source length" in CLAIM_BY_KEY["hc-5"].paper_figure
    assert {c.key for c in CLAIMS if c.derived} == {"recpe-3", "posnet-5", "posnet-6"}
    from posmix_fairseq.harness.evaluation.claims.page import HEADLINE
    assert not {c.key for c in CLAIMS if c.derived} & set(HEADLINE)


def test_table8_arithmetic_is_the_models_own_count_and_gpas_figures():
    """gpa-5's figures at the paper's sizes come from Table 8's formula (the page needs no model): the formula
    equals the count of the Base rPosNet built on the meta device, and gives GPA's 23% and 24% at N = 128."""
    from posmix_fairseq.harness.evaluation.claims.catalogue import GPA_TABLE8_SIZES
    from posmix_fairseq.harness.evaluation.claims.page import table8_largest_positions, table8_saving
    from posmix_fairseq.harness.recipes.meta_model import meta_model
    d, h, k = GPA_TABLE8_SIZES["Base"]
    counts = []
    for frozen in ([], ["--encoder-frozen-energy-positions", "128", "--decoder-frozen-energy-positions", "128"]):
        layer = meta_model(["--arch", "rposnet_wmt_en_de", "--share-all-embeddings", *frozen], 1000).encoder.layers[0]
        counts.append(sum(p.numel() for p in layer.self_attn.parameters() if p.dim() >= 2))
    assert table8_saving(d, h, k, 128) == pytest.approx(100 * (1 - counts[1] / counts[0]), abs=1e-9)
    assert round(table8_saving(d, h, k, 128)) == 23 and int(table8_saving(*GPA_TABLE8_SIZES["Big"], 128)) == 24
    n = table8_largest_positions(d, h, k)
    assert table8_saving(d, h, k, n) > 20 >= table8_saving(d, h, k, n + 1)


def test_the_folders_a_page_reads_must_exist(tmp_path, capsys):
    """--render-only reads --results, and --converged-results is read in every mode: a missing folder, or a file
    in its place, is a usage error naming it before anything else is checked."""
    missing, a_file = tmp_path / "missing", tmp_path / "file"
    a_file.write_text("x")
    status, _, err = in_process(capsys, "--render-only", "--results", str(missing))
    assert status == 2 and f"--results {missing}: no such directory" in err, err
    status, _, err = in_process(capsys, "--results", RESULTS, "--converged-results", str(a_file), "--render-only")
    assert status == 2 and f"--converged-results {a_file}: is a file, not a results folder" in err, err
    status, _, err = in_process(capsys, "--converged-results", str(missing))
    assert status == 2 and f"--converged-results {missing}: no such directory" in err, err
