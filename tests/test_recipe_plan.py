"""PLAN=1 for every recipe, paper and size: the commands it would run and the plan (effective batch,
learning-rate schedule, checkpoints and disk, test lengths against the model's limits, unstated
settings, sources), on the CPU without data beyond the shared Multi30k (the test set whose lengths are
measured; tasks in other languages read it as en->de). Plans run in-process and share the meta-device
models and the SentencePiece models of the plan (about a minute for all of them), and one plan runs
through the shell entry point."""
import io
import os
import re
import shlex
import subprocess
import sys

import pytest

from posmix_fairseq.harness.recipes.plan import relevant_keys
from posmix_fairseq.harness.recipes.settings import SIZES, TASKS, resolve
from posmix_fairseq.harness.recipes.stages import DEFAULT_STAGES, run_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.environ.get("POSMIX_MULTI30K", os.path.join(ROOT, "..", "shared", "data", "multi30k"))
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(MULTI30K, "train.de.gz")),
                                reason=f"Multi30k not found at {MULTI30K} (set POSMIX_MULTI30K)")
MULTI30K_LANGS = {"en", "de", "fr"}


def combos():
    out = []
    for task, spec in TASKS.items():
        for paper in spec.papers:
            for size in SIZES:
                try:
                    resolve(task, {"PAPER": paper, "SIZE": size})
                except ValueError:
                    continue
                out.append((task, paper, size))
    return out


def plan(task, out_dir, **env):
    spec = TASKS[task]
    env.setdefault("RAW", MULTI30K)
    env.setdefault("OUT", str(out_dir))
    if not {spec.src, spec.tgt} <= MULTI30K_LANGS:
        env.setdefault("SRC", "en")
        env.setdefault("TGT", "de")
    recipe = resolve(task, {k: str(v) for k, v in env.items()})
    stream = io.StringIO()
    stages = run_recipe(recipe, plan=True, stream=stream)
    return recipe, stages, stream.getvalue()


def command(text, module):
    lines = [line[4:] for line in text.splitlines() if line.startswith("  $ ") and f" -m {module} " in line]
    assert lines, module
    return shlex.split(lines[0].split(" | tee ")[0])


def value_after(cmd, flag):
    return cmd[cmd.index(flag) + 1]


@pytest.mark.parametrize("task,paper,size", combos())
def test_plan_of_every_recipe_and_size(task, paper, size, tmp_path):
    recipe, stages, text = plan(task, tmp_path / "out", PAPER=paper, SIZE=size)
    assert not os.path.exists(tmp_path / "out"), "a plan writes nothing"
    for stage in DEFAULT_STAGES:
        assert f"] {stage}: " in text, stage
    train = command(text, "fairseq_cli.train")
    assert value_after(train, "--arch") == recipe["ARCH"]
    tokens, freq = int(value_after(train, "--max-tokens")), int(value_after(train, "--update-freq"))
    gpus = stages.facts["gpus"]
    assert f"{tokens} tokens x {gpus} GPU(s) x update-freq {freq} = {tokens * gpus * freq} tokens per update" in text
    assert value_after(train, "--lr-scheduler") == recipe["SCHEDULER"] and f"- {recipe['SCHEDULER']}" in text
    # disk: the window never keeps more than fairseq's keep-everything
    kept, every = re.search(r"the average\): about ([\d.]+ [MG]B).*keep all \d+ with optimizer state: about ([\d.]+ [MG]B)",
                            text, re.S).groups() if "(the average)" in text else (None, None)
    if kept:
        to_bytes = lambda s: float(s.split()[0]) * (1e9 if s.endswith("GB") else 1e6)  # noqa: E731
        assert to_bytes(kept) <= to_bytes(every)
    assert "longest test sentence: source" in text and "- generation: " in text
    unstated = {k for k in relevant_keys(recipe) if k in recipe.values and not recipe.values[k].stated}
    listed = set(re.findall(r"^- ([A-Z0-9_]+) = ", text.split("Settings the paper does not state")[1], re.M))
    assert listed == unstated
    assert re.search(r"^- (train|test) ", text.split("Data sources:")[1], re.M)
    score = command(text, "posmix_fairseq.harness.evaluation.score")
    assert value_after(score, "--tokenize") == recipe["TOKENIZE"]
    if paper == "hc":
        assert recipe["TOKENIZE"] == "intl"  # HC footnote 13, for every pair it reports


def test_pea_plan_validates_8_times_per_epoch_and_shows_the_decay_points(tmp_path):
    recipe, stages, text = plan("wmt19_de_en", tmp_path / "out")
    interval = stages.facts["validate_interval"]
    updates, _ = stages.facts["updates_per_epoch"]
    assert interval == -(-updates // 8)
    train = command(text, "fairseq_cli.train")
    assert value_after(train, "--save-interval-updates") == value_after(train, "--validate-interval-updates") == str(interval)
    assert value_after(train, "--lr-shrink") == "0.9" and value_after(train, "--lr-patience") == "6"
    assert "--share-all-embeddings" not in train and value_after(train, "--max-source-positions") == "100"
    assert f"the earliest decay at update {7 * interval}" in text
    assert "reduce_lr_on_plateau would step once per epoch" in text
    # models trained on <= 100 positions extrapolate: generation raises the limits
    assert "source: no position table: it extrapolates (trained with at most 100 positions)" in text


def test_posnet_plan_names_what_the_paper_states_and_what_comes_from_its_code(tmp_path):
    recipe, _, text = plan("wmt14_en_de", tmp_path / "out", PAPER="posnet", VARIANT="posnet_embed")
    assert value_after(command(text, "posmix_fairseq.harness.recipes.prepare_data"), "--vocab-size") == "40000"
    assert recipe.values["VOCAB"].stated and recipe.values["BEAM"].stated and recipe.values["LENPEN"].stated
    assert re.search(r"^- AVG = last 5: released code: .*the paper states no averaging", text, re.M)
    train = command(text, "fairseq_cli.train")
    assert value_after(train, "--update-freq") == "8" and value_after(train, "--adam-eps") == "1e-9"
    # PosNet-Embed's kernel table (256) bounds both sides: generation stops there, not at 1024
    assert "a position table stops it at 256 tokens (--encoder-posnet-embed-max-positions" in text


def test_hc_trains_its_own_transformer_baseline_at_its_small_size(tmp_path):
    recipe, _, text = plan("iwslt16_en_de", tmp_path / "out", VARIANT="posmix_transformer")
    assert recipe["ARCH"] == "posmix_transformer_iwslt_small"
    assert "model: 12," in text or "model: 13," in text  # 288/507/4 heads/5 layers with a 16k vocabulary
    assert value_after(command(text, "fairseq_cli.train"), "--lr-scheduler") == "polynomial_decay"


def test_hc_en_ro_uses_sennrichs_romanian_normalisation(tmp_path):
    _, _, text = plan("wmt16_en_ro", tmp_path / "out")
    assert "--romanian" in command(text, "posmix_fairseq.harness.recipes.prepare_data")
    assert "object.pouta.csc.fi/OPUS-SETIMES" in text


def test_hc_en_fr_trains_on_its_subset_only(tmp_path):
    _, _, text = plan("wmt14_en_fr", tmp_path / "out", PAPER="hc", VARIANT="hc_sa")
    sources = text.split("Data sources:")[1]
    assert "europarl-v7" in sources and "commoncrawl" in sources and "giga" not in sources and "undoc" not in sources
    assert "HC footnote 10" in sources


def test_gpa_en_zh_has_separate_unshared_vocabularies_matching_table_7(tmp_path):
    """GPA Table 1: 32k/45k; Table 7's 107M Transformer needs them unshared (source and target embeddings
    and the output projection: 44.1M + (32k + 2 x 45k) x 512)."""
    _, _, text = plan("wmt18_en_zh", tmp_path / "out", VARIANT="posmix_transformer")
    prepare = command(text, "posmix_fairseq.harness.recipes.prepare_data")
    assert "--separate" in prepare and value_after(prepare, "--target-vocab-size") == "45000"
    assert "--share-all-embeddings" not in command(text, "fairseq_cli.train")
    params = int(re.search(r"model: ([\d,]+) parameters", text).group(1).replace(",", ""))
    assert round(params / 1e6) == 107


def test_recpe_has_unshared_embeddings_near_its_parameter_count(tmp_path):
    _, _, text = plan("wmt14_en_de", tmp_path / "out", PAPER="recpe", VARIANT="posmix_transformer")
    assert "--share-all-embeddings" not in command(text, "fairseq_cli.train")
    params = int(re.search(r"model: ([\d,]+) parameters", text).group(1).replace(",", ""))
    assert abs(params / 97.35e6 - 1) < 0.01


def test_plan_counts_the_test_sentences_a_position_table_cannot_take(tmp_path):
    """A learned-position model limited to 20 tokens: the plan's count equals the sentences whose
    pieces + EOS exceed 20 on the prepared test set (written here with known lengths)."""
    prep = tmp_path / "out" / "prep"
    prep.mkdir(parents=True)
    lengths = [3, 19, 20, 25, 40, 7]
    (prep / "test.de").write_text("".join(" ".join(["x"] * n) + "\n" for n in lengths))
    (prep / "test.en").write_text("".join("y\n" for _ in lengths))
    _, _, text = plan("iwslt14_de_en", tmp_path / "out", VARIANT="learnedpe",
                      TRAIN_FLAGS="--max-source-positions 20 --max-target-positions 20")
    assert "exact: the prepared test set" in text
    too_long = sum(1 for n in lengths if n + 1 > 20)
    assert (f"{too_long} of {len(lengths)} test sentences longer than the model's limit (20 source tokens with EOS, "
            "--max-source-positions): not translated; scores over the rest") in text


def test_plan_through_the_shell_entry_point(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PLAN="1", RAW=MULTI30K, OUT=str(out), PYTHON=sys.executable, PYTHONPATH=ROOT)
    proc = subprocess.run(["bash", os.path.join(ROOT, "examples", "wmt14_en_de", "run.sh")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## Plan: wmt14_en_de" in proc.stdout and " -m fairseq_cli.train " in proc.stdout
    assert not out.exists()


def test_every_task_has_its_run_script():
    for task in TASKS:
        script = open(os.path.join(ROOT, "examples", task, "run.sh")).read()
        assert f"TASK={task}\n" in script and "run_recipe" in script


def test_the_plan_estimates_test_lengths_only_on_data_it_is_named(tmp_path):
    """No default corpus stands in: without a test set in RAW the lengths are not measured (the plan says how
    to name one); PLAN_TEST_DATA names a raw corpus whose test set gives the estimate, marked as a stand-in."""
    no_raw = str(tmp_path / "no-raw")
    _, _, text = plan("iwslt14_de_en", tmp_path / "out", RAW=no_raw)
    assert f"not measured: no de-en test set in RAW ({no_raw}); run the download stage, give RAW, or name any raw " \
           "corpus with a test set in PLAN_TEST_DATA=DIR for an estimate" in text
    _, _, text = plan("iwslt14_de_en", tmp_path / "out", RAW=no_raw, PLAN_TEST_DATA=MULTI30K)
    assert "estimate: PLAN_TEST_DATA's (a stand-in: not the paper's test set) test set " + MULTI30K in text


def test_raw_and_out_default_to_the_callers_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = resolve("wmt14_en_de", {})
    assert recipe["RAW"] == str(tmp_path / "data" / "wmt14_en_de" / "raw")
    assert recipe["OUT"] == str(tmp_path / "runs" / "wmt14_en_de")


@pytest.mark.parametrize("old,new", [("ape", "pea"), ("rpe", "recpe")])
def test_earlier_paper_names_are_accepted_and_show_the_new_one(old, new):
    task = "wmt19_de_en" if new == "pea" else "wmt14_en_de"
    recipe = resolve(task, {"PAPER": old})
    assert recipe.paper == new and recipe.values["PAPER"].source == f"environment (PAPER={old}, the earlier name of {new})"
    assert resolve(task, {"PAPER": new}).values == {**recipe.values, "PAPER": resolve(task, {"PAPER": new}).values["PAPER"]}
    with pytest.raises(ValueError, match="PAPER=apex: valid values are gpa, hc, pea, recpe, posnet"):
        resolve(task, {"PAPER": "apex"})


def test_the_plan_lists_sentencepiece_as_a_deviation_from_the_papers_bpe(tmp_path):
    """PEA 4.1: BPE with 50k joint merge operations; the recipe: SentencePiece BPE with 50k pieces. HC En-Ja
    uses SentencePiece itself (footnote 13): no deviation there."""
    _, _, text = plan("wmt19_de_en", tmp_path / "out")
    deviations = text.split("Deviations from the paper:")[1].split("Data sources:")[0]
    assert "- subwords: SentencePiece bpe, one joint vocabulary of 50000 pieces (prepare_data.py); the paper: BPE " \
           "(Sennrich et al., 2016) with 50k joint merge operations (PEA 4.1)" in deviations
    _, _, text = plan("iwslt17_en_ja", tmp_path / "out")
    assert "Deviations from the paper:" not in text


def test_every_stated_subword_scheme_belongs_to_a_recipe():
    from posmix_fairseq.harness.recipes.settings import PAPER_SUBWORDS, subword_deviation

    for task, paper in PAPER_SUBWORDS:
        assert paper in TASKS[task].papers, (task, paper)
        assert "SentencePiece" in subword_deviation(resolve(task, {"PAPER": paper}))


def test_the_settings_table_names_the_subword_deviation(capsys):
    from posmix_fairseq.harness.recipes import settings

    settings.main(["--task", "wmt19_de_en"])
    assert "\ndeviation from the paper: subwords: SentencePiece bpe, one joint vocabulary of 50000 pieces" \
           in capsys.readouterr().out
    settings.main(["--task", "iwslt17_en_ja"])  # HC's En-Ja is SentencePiece in the paper too
    assert "deviation" not in capsys.readouterr().out


def test_a_bare_pea_run_trains_the_shaw_layout_pea_uses(tmp_path):
    """PAPER=pea without VARIANT trains Shaw et al.'s own layout (a^K and a^V shared by the heads, PEA Section 3.2),
    not GPA's (the shaw archs); an explicit VARIANT, ARCH or TRAIN_FLAGS is taken as given."""
    recipe, _, text = plan("wmt19_de_en", tmp_path, PAPER="pea", STAGES="train")
    train = command(text, "fairseq_cli.train")
    assert value_after(train, "--arch") == "shaw_wmt_en_de"
    for flag, value in (("--encoder-self-shaw-value-term", "on"), ("--decoder-self-relative-embedding-heads", "shared")):
        assert value_after(train, flag) == value
    assert "PEA Section 3.2" in recipe.values["TRAIN_FLAGS"].source
    assert not resolve("wmt19_de_en", {"PAPER": "pea", "VARIANT": "shaw"}).get("TRAIN_FLAGS")
    assert not resolve("wmt19_de_en", {"ARCH": "posmix_transformer_wmt_en_de"}).get("TRAIN_FLAGS")


@pytest.mark.parametrize("mtdata", ["1", "0"])
def test_mtdata_is_turned_on_from_the_recipe(mtdata, tmp_path):
    _, _, text = plan("wmt14_en_de", tmp_path, RAW=str(tmp_path / "raw"), STAGES="download", MTDATA=mtdata)
    download = command(text, "posmix_fairseq.harness.recipes.download")
    assert ("--mtdata" in download) == (mtdata == "1")
