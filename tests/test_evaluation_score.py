"""posmix-score: sacreBLEU's metrics against the sacrebleu command line, detokenisation of real
fairseq-generate output (never twice), the paired tests against sacreBLEU's and an exact permutation
test, and the COMET family / BLEURT end to end with tiny random models built with the packages' own
classes (tests/tiny_learned_metrics.py)."""
import itertools
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu

from posmix_fairseq.harness.evaluation import length_bins
from posmix_fairseq.harness.evaluation import score as score_mod
from posmix_fairseq.harness.evaluation.significance import paired_approximate_randomization, paired_bootstrap

WORDS = "ein mann hund läuft über die straße frau kind spielt im park mit einem ball rot blau".split()


def _corpus(n=40, seed=0):
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(n)]
    refs = [r.capitalize() + " ." if i % 3 else r for i, r in enumerate(refs)]
    srcs = [r.upper() for r in refs]
    good = [r if i % 4 else " ".join(r.split()[:-1] + ["kind"]) for i, r in enumerate(refs)]
    good = [g.lower() if i % 5 == 0 else g for i, g in enumerate(good)]  # case errors: TER's case matters
    bad = [" ".join(rng.sample(r.split(), len(r.split()))) for r in refs]  # shuffled words
    return srcs, refs, good, bad


def _bpe(line):  # subword-nmt style: split every word longer than 3 after 2 characters
    return " ".join(w[:2] + "@@ " + w[2:] if len(w) > 3 else w for w in line.split())


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(x + "\n" for x in lines)
    return str(path)


def _write_gen(path, srcs, refs, hyps):
    order = list(range(len(hyps)))
    random.Random(1).shuffle(order)  # fairseq prints in batch order, not id order
    with open(path, "w", encoding="utf-8") as f:
        f.write("2024-01-01 | INFO | fairseq_cli.generate | S-looking log line\n")
        for i in order:
            f.write(f"S-{i}\t{_bpe(srcs[i])}\nT-{i}\t{_bpe(refs[i])}\nH-{i}\t-0.25\t{_bpe(hyps[i])}\n"
                    f"D-{i}\t-0.25\t{hyps[i]}\nP-{i}\t-0.1 -0.2\n")
    return str(path)


def _sacrebleu_cli(ref, hyp, *flags):
    out = subprocess.run([sys.executable, "-m", "sacrebleu", ref, "-i", hyp, "-w", "6", *flags], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    return {d["name"]: d for d in (data if isinstance(data, list) else [data])}


@pytest.mark.parametrize("ours, cli", [
    ([], []),
    (["--lowercase"], ["-lc", "--chrf-lowercase"]),
    (["--ter-case-sensitive", "--tokenize", "intl"], ["--ter-case-sensitive", "-tok", "intl"]),
], ids=["defaults", "lowercase", "ter-cased-intl"])
def test_sacrebleu_metrics_equal_the_sacrebleu_command_line(tmp_path, ours, cli):
    """Every sacreBLEU metric, score and signature, equals `sacrebleu REF -i HYP -m ...` on the same files."""
    _, refs, good, _ = _corpus()
    ref, hyp = _write(tmp_path / "ref.txt", refs), _write(tmp_path / "hyp.txt", good)
    scores = score_mod.main(["--hyp", hyp, "--ref", ref, "--metrics", "bleu,chrf,chrf++,ter", "--paired-bs-n", "0",
                             "--paired-ar-n", "0", *ours])
    expected = {**_sacrebleu_cli(ref, hyp, "-m", "bleu", "chrf", "ter", *cli),
                **_sacrebleu_cli(ref, hyp, "-m", "chrf", "--chrf-word-order", "2", *cli)}
    assert set(expected) == {"BLEU", "chrF2", "chrF2++", "TER"}
    for label, e in expected.items():
        assert scores.cells["hyp"][label].score == pytest.approx(e["score"], abs=1e-5), label
        assert scores.signatures[label] == e["signature"], label
    if not ours:  # sacreBLEU's (and TERCom's) default TER is case-insensitive
        assert "case:lc" in scores.signatures["TER"] and "case:mixed" in scores.signatures["BLEU"]
        assert scores.cells["hyp"]["TER"].score < sacrebleu.TER(case_sensitive=True).corpus_score(good, [refs]).score


def test_detokenisation_and_paired_tests(tmp_path):
    srcs, refs, good, bad = _corpus()
    g = _write_gen(tmp_path / "good.txt", srcs, refs, good)
    b = _write_gen(tmp_path / "bad.txt", srcs, refs, bad)
    out_json, out_csv = tmp_path / "s.json", tmp_path / "s.csv"
    scores = score_mod.main([g, "--remove-bpe", "--baseline", b, "--metrics", "bleu,chrf++,chrf,ter",
                             "--paired-bs-n", "200", "--paired-ar-n", "500", "--json", str(out_json),
                             "--csv", str(out_csv)])
    cells, sigs = scores.cells, scores.signatures
    # independent reference: sacreBLEU on the raw (never BPE'd) text, the refs from the T- lines
    assert cells["good"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(good, [refs]).score)
    assert cells["bad"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(bad, [refs]).score)
    assert cells["good"]["chrF2++"].score == pytest.approx(sacrebleu.CHRF(word_order=2).corpus_score(good, [refs]).score)
    assert cells["good"]["TER"].score == pytest.approx(sacrebleu.corpus_ter(good, [refs]).score)
    # a much better system is significantly better than the baseline under both tests; the CI brackets the score
    for m in ("BLEU", "chrF2++", "TER"):
        c = cells["good"][m]
        assert c.p_bootstrap["bad"] < 0.05 and c.p_ar["bad"] < 0.05
        assert c.mean - 3 * c.ci <= c.score <= c.mean + 3 * c.ci
    assert "tok:13a" in sigs["BLEU"] and "bs:200|ar:500|seed:12345" in sigs["BLEU"] and "nw:2" in sigs["chrF2++"]
    data = json.loads(out_json.read_text())
    assert {r["metric"] for r in data["rows"]} == {"BLEU", "chrF2++", "chrF2", "TER"}
    assert "remove-bpe" in data["decoding"][0]
    assert out_csv.read_text().splitlines()[0] == "system,path,baseline,metric,score,mean,ci95,vs,p_bootstrap,p_ar"
    # --tokenize zh and D- lines reach sacreBLEU
    ref = _write(tmp_path / "ref.txt", refs)
    scores = score_mod.main([g, "--use-detok-lines", "--ref", ref, "--metrics", "bleu", "--tokenize", "zh",
                             "--paired-bs-n", "0", "--paired-ar-n", "0"])
    assert scores.cells["good"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(good, [refs], tokenize="zh").score)
    assert "tok:zh" in scores.signatures["BLEU"]


@pytest.fixture(scope="module")
def spm_generate(tmp_path_factory):
    """A real fairseq-generate run on SentencePiece pieces of the toy corpus (a 1-update model), with
    --score-reference so that the H- lines are the references (several words each), printed with
    --bpe sentencepiece (S-/T-/D- decoded, H- pieces) and with --post-process sentencepiece (all decoded)."""
    import sentencepiece as spm
    from fairseq import options
    from fairseq_cli import generate
    from helpers import binarize, run_train

    import posmix_fairseq
    from posmix_fairseq.harness.toy_corpus import write_corpus

    root = tmp_path_factory.mktemp("spm_generate")
    raw, pieces = root / "raw", root / "pieces"
    write_corpus(str(raw), sizes={"train": 200, "valid": 10, "test": 12})
    spm.SentencePieceTrainer.train(input=[str(raw / "train.src"), str(raw / "train.tgt")], model_prefix=str(root / "spm"),
                                   vocab_size=100, model_type="bpe", character_coverage=1.0, bos_id=-1, eos_id=-1,
                                   pad_id=-1, unk_id=0, minloglevel=2)
    model = str(root / "spm.model")
    sp = spm.SentencePieceProcessor(model_file=model)
    pieces.mkdir()
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            lines = (raw / f"{split}.{side}").read_text().splitlines()
            _write(pieces / f"{split}.{side}", [" ".join(sp.encode(x, out_type=str)) for x in lines])
    binarize(str(pieces), str(root / "bin"))
    run_train(str(root / "bin"), str(root / "ckpt"), ["--arch", "posmix_transformer_iwslt_de_en"], updates=1)
    outputs = {}
    for name, flags in (("bpe", ["--bpe", "sentencepiece", "--sentencepiece-model", model]),
                        ("post_process", ["--post-process", "sentencepiece"])):
        args = options.parse_args_and_arch(options.get_generation_parser(), [
            str(root / "bin"), "--user-dir", posmix_fairseq.USER_DIR, "--path", str(root / "ckpt" / "checkpoint_last.pt"),
            "--gen-subset", "test", "--score-reference", "--cpu", "--required-batch-size-multiple", "1",
            "--max-tokens", "4000", "--results-path", str(root / name), *flags])
        generate.main(args)
        outputs[name] = str(root / name / "generate-test.txt")
    return {"spm": model, "raw": raw, "pieces": pieces, **outputs}


def test_lines_fairseq_generate_decoded_are_never_decoded_twice(spm_generate, tmp_path):
    raw_refs = (spm_generate["raw"] / "test.tgt").read_text().splitlines()
    raw_srcs = (spm_generate["raw"] / "test.src").read_text().splitlines()
    ref_file = str(spm_generate["raw"] / "test.tgt")
    lines = {k: open(spm_generate[k], encoding="utf-8").read() for k in ("bpe", "post_process")}
    assert "\u2581" in lines["bpe"].split("\nH-")[1] and "\u2581" not in lines["post_process"]  # what fairseq did
    for name in ("bpe", "post_process"):
        gen = spm_generate[name]
        # --score-reference: the hypotheses are the references, so every correct path scores BLEU 100
        for extra in (["--ref", ref_file], []):  # the raw references, or the T- lines
            scores = score_mod.main([gen, "--spm-model", spm_generate["spm"], "--metrics", "bleu,ter",
                                     "--paired-bs-n", "0", "--paired-ar-n", "0", *extra])
            assert scores.cells["generate-test"]["BLEU"].score == pytest.approx(100.0), (name, extra)
            assert scores.cells["generate-test"]["TER"].score == 0.0
        systems, refs, srcs, notes = score_mod.load_inputs(
            score_mod.build_parser().parse_intermixed_args([gen, "--spm-model", spm_generate["spm"]]), [(gen, False, False)], "t")
        assert systems[0].hyps == raw_refs and refs == raw_refs and srcs == raw_srcs
        hyp_note = "(H- lines): sentencepiece" if name == "bpe" else "(H- lines): as they are (sentencepiece not applied"
        assert hyp_note in notes[0] and "T- lines of" in notes[0] and ": as they are (sentencepiece not applied" in notes[0]
    # D- lines of --bpe are plain text
    scores = score_mod.main([spm_generate["bpe"], "--use-detok-lines", "--ref", ref_file, "--metrics", "bleu",
                             "--paired-bs-n", "0", "--paired-ar-n", "0"])
    assert scores.cells["generate-test"]["BLEU"].score == pytest.approx(100.0)
    # pieces that no asked-for step removes are an error, not a score
    with pytest.raises(SystemExit, match="H- lines of .* hold SentencePiece pieces.*--spm-model"):
        score_mod.main([spm_generate["bpe"], "--ref", ref_file, "--metrics", "bleu"])
    with pytest.raises(SystemExit, match=r"--ref .* hold SentencePiece pieces.*raw text"):
        score_mod.main([spm_generate["post_process"], "--ref", str(spm_generate["pieces"] / "test.tgt")])
    # length bins in pieces need lines that still hold pieces
    with pytest.raises(SystemExit, match="hold no subword pieces.*--count words"):
        length_bins.main([spm_generate["bpe"], "--spm-model", spm_generate["spm"], "--count", "pieces"])


def test_bad_input_errors(tmp_path, capsys):
    from posmix_fairseq.harness.command import UsageError

    srcs, refs, good, _ = _corpus(5)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    with pytest.raises(UsageError, match="--metrics: unknown"):  # bad option values: usage errors, exit status 2
        score_mod.main([g, "--metrics", "bleu,meteor"])
    with pytest.raises(UsageError, match="--tokenize 'foo': valid values are 13a, intl, zh"):
        score_mod.main([g, "--tokenize", "foo"])
    with pytest.raises(SystemExit) as usage:
        score_mod.main([g, "--paired-ar-n", "-1"])
    assert usage.value.code == 2
    assert "argument --paired-ar-n: -1 is out of range: must be an integer >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # fairseq's values only: a file after it is a usage error
        score_mod.main(["--remove-bpe", g])
    assert usage.value.code == 2
    with pytest.raises(SystemExit, match="H- lines of .* hold subword-nmt markers.*--remove-bpe"):
        score_mod.main([g, "--metrics", "bleu"])
    with pytest.raises(SystemExit, match="D- lines .* hold subword-nmt markers"):
        score_mod.main([_write(tmp_path / "d.txt", [f"H-{i}\t-1\ta@@ b\nD-{i}\t-1\ta@@ b" for i in range(5)]),
                        "--use-detok-lines", "--ref", _write(tmp_path / "r.txt", refs)])
    (tmp_path / "short.txt").write_text("a\nb\n")
    with pytest.raises(SystemExit, match="2 hypotheses but 5 references"):
        score_mod.main([g, "--remove-bpe", "--hyp", str(tmp_path / "short.txt"), "--metrics", "bleu"])
    missing = tmp_path / "missing.txt"
    missing.write_text("".join(line for line in open(g) if not line.startswith(("H-2\t", "D-2\t"))))
    with pytest.raises(SystemExit, match=r"ids \[2\] are missing.*required-batch-size-multiple 1"):
        score_mod.main([str(missing), "--remove-bpe"])
    with pytest.raises(SystemExit) as usage:
        score_mod.main([g, "--remove-bpe", "--metrics", "bleu,comet", "--gpus", "2"])
    assert usage.value.code == 2
    assert "argument --gpus: 2 is out of range: must be an integer from 0 to 1" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="--gpus 1: no CUDA GPU is visible"):
            score_mod.main([g, "--remove-bpe", "--metrics", "comet", "--gpus", "1"])


def _sacrebleu_paired(metric_cls, sys_hyps, base_hyps, refs, test_type, n):
    from sacrebleu.significance import PairedTest

    _, results = PairedTest([("base", base_hyps), ("sys", sys_hyps)], {"m": metric_cls()}, references=[refs],
                            test_type=test_type, n_samples=n)()
    return next(v for k, v in results.items() if k != "System")[1]


@pytest.mark.parametrize("metric_cls", [sacrebleu.TER, sacrebleu.BLEU], ids=["TER", "BLEU"])
def test_paired_tests_reproduce_sacrebleu_over_its_statistics(metric_cls):
    """The segment-level tests (shared by COMET/BLEURT) run over sacreBLEU's own sufficient statistics
    give sacreBLEU's p-values, means and intervals exactly: same draws, pairing, centring and counting."""
    rng = random.Random(0)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(60)]
    a = [" ".join(w if rng.random() > .3 else rng.choice(WORDS) for w in r.split()) for r in refs]
    b = [" ".join(w if rng.random() > .35 else rng.choice(WORDS) for w in r.split()) for r in refs]
    m = metric_cls()
    sys_stats = np.array(m._extract_corpus_statistics(a, [refs]), dtype=np.float64)
    base_stats = np.array(m._extract_corpus_statistics(b, [refs]), dtype=np.float64)

    def aggregate(summed, dtype=np.float64):  # sacreBLEU sums bootstrap statistics in float32
        return np.array([m._compute_score_from_stats(list(s.astype(dtype))).score for s in summed])

    expected = _sacrebleu_paired(metric_cls, a, b, refs, "ar", 2000)
    assert paired_approximate_randomization(sys_stats, base_stats, aggregate, 2000, count_ties=False) == expected.p_value
    # counting ties (>=, Riezler and Maxwell 2005) never gives a smaller p
    assert paired_approximate_randomization(sys_stats, base_stats, aggregate, 2000) >= expected.p_value
    expected = _sacrebleu_paired(metric_cls, a, b, refs, "bs", 500)
    ours = paired_bootstrap(sys_stats, base_stats, lambda s: aggregate(s, np.float32), 500, count_ties=False)
    assert (ours.p_value, ours.mean, ours.ci) == (expected.p_value, expected.mean, expected.ci)


@pytest.mark.parametrize("n", [1, 2, 39, 40, 41, 79, 80, 500, 1000])
def test_the_bootstrap_interval_is_sacrebleus_estimate_ci(n):
    """The 95% half-width is half the distance between the n//40-th smallest and largest of n resampled scores
    (sacreBLEU's estimate_ci, which paired_bootstrap calls), at every n, ties included."""
    from sacrebleu.significance import estimate_ci

    rng = np.random.default_rng(n)
    scores = np.round(rng.normal(30, 2, n), 1)  # rounded: ties
    ordered, low = np.sort(scores), n // 40
    assert float(estimate_ci(scores)[1]) == float(0.5 * (ordered[n - low - 1] - ordered[low]))
    segments = rng.normal(0.5, 0.2, 12)
    resampled = segments[np.random.default_rng(7).choice(12, size=(n, 12), replace=True)].mean(axis=1)
    ordered = np.sort(resampled)
    expected = 0.5 * (ordered[n - low - 1] - ordered[low])
    assert paired_bootstrap(segments, n_samples=n, seed=7).ci == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_removing_subword_units_is_fairseqs_post_process():
    """detok.py repeats fairseq's post_process (so that posmix-score on text loads no torch): the same text for
    subword-nmt markers and SentencePiece pieces, at the ends of lines, doubled and spaced oddly."""
    from fairseq.data.data_utils import post_process
    from posmix_fairseq.harness.evaluation.detok import join_pieces, remove_subword_nmt

    lines = ["ein Mann@@ s@@ chaft geht", "end@@", "@@ start", "a @@ b@@  c", "", "  spaced  out@@ ", "x@@@@ y",
             "\u2581Ein \u2581Mann \u2581ge ht .", "\u2581\u2581a  b\u2581", " \u2581lead ing ", "no pieces"]
    for line in lines:
        assert remove_subword_nmt(line) == post_process(line, "subword_nmt"), line
        assert join_pieces(line) == post_process(line, "sentencepiece"), line


def test_segment_tests_on_known_cases_and_an_exact_permutation_test():
    rng = np.random.default_rng(0)
    sys_scores, base_scores = rng.normal(0.3, 1, 10), rng.normal(0, 1, 10)
    # the exact two-sided paired permutation test: all 2^10 swap patterns
    observed = abs(sys_scores.mean() - base_scores.mean())
    diffs = sys_scores - base_scores
    exact = np.mean([abs(np.dot(signs, diffs)) / 10 >= observed - 1e-12
                     for signs in itertools.product([1, -1], repeat=10)])
    p_ar = paired_approximate_randomization(sys_scores, base_scores, n_trials=20000)
    assert p_ar == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 20000) + 1e-4)
    # identical systems are never significantly different (ties count, unlike sacreBLEU)
    same = [0.1, 0.5, 0.9, 0.3]
    assert paired_bootstrap(same, same, n_samples=300).p_value == 1.0
    assert paired_approximate_randomization(same, same, n_trials=300) == 1.0
    const = paired_bootstrap([2.0] * 10, n_samples=50)
    assert (const.score, const.mean, const.ci) == (2.0, 2.0, 0.0)
    base = rng.normal(0, 1, 200)
    better = paired_bootstrap(base + 0.5, base, n_samples=500)
    assert better.p_value < 0.01 and better.score == pytest.approx(base.mean() + 0.5)
    assert paired_approximate_randomization(base + 0.5, base, n_trials=500) < 0.01
    with pytest.raises(ValueError, match="the system has 3 segments, the baseline 2"):
        paired_approximate_randomization([1, 2, 3], [1, 2])


def _predict(model_dir, samples):
    from comet import load_from_checkpoint

    pred = load_from_checkpoint(os.path.join(model_dir, "checkpoints", "model.ckpt")).predict(
        samples, batch_size=4, gpus=0, progress_bar=False)
    return pred


def test_comet_family_and_bleurt_end_to_end(tmp_path, tiny_learned_metrics):
    models = tiny_learned_metrics
    srcs, refs, good, bad = _corpus(12)
    g = _write_gen(tmp_path / "good.txt", srcs, refs, good)
    b = _write_gen(tmp_path / "bad.txt", srcs, refs, bad)
    # three ways to name a model: the directory, its checkpoints folder, its .ckpt
    specs = [models["comet"], os.path.join(models["cometkiwi"], "checkpoints"),
             os.path.join(models["xcomet"], "checkpoints", "model.ckpt")]
    out_json = tmp_path / "s.json"
    scores = score_mod.main([g, "--baseline", b, "--remove-bpe", "--metrics", "bleu,comet,bleurt",
                             *[x for s in specs for x in ("--comet-model", s)], "--bleurt-checkpoint", models["bleurt"],
                             "--paired-bs-n", "100", "--paired-ar-n", "200", "--json", str(out_json)])
    assert scores.skipped == {}
    assert list(scores.signatures) == ["BLEU", "COMET", "CometKiwi", "XCOMET", "BLEURT"]
    assert scores.signatures["COMET"].startswith("model:comet|class:RegressionMetric|inputs:mt+src+ref|case:mixed")
    assert scores.signatures["CometKiwi"].startswith("model:cometkiwi|class:UnifiedMetric|inputs:mt+src|")
    assert scores.signatures["XCOMET"].endswith("bs:100|ar:200|seed:12345|version:comet-2.2.7")
    # independent reference: the packages' own loading and scoring, called directly
    import torch
    from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer

    full = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(srcs, good, refs)]
    pred = _predict(models["comet"], full)
    assert scores.cells["good"]["COMET"].score == pytest.approx(100 * float(np.mean(pred.scores)), abs=1e-4)
    kiwi = _predict(models["cometkiwi"], [{"src": s, "mt": h} for s, h in zip(srcs, good)])  # no reference
    assert scores.cells["good"]["CometKiwi"].score == pytest.approx(100 * float(np.mean(kiwi.scores)), abs=1e-4)
    xcomet = _predict(models["xcomet"], full)
    assert scores.cells["good"]["XCOMET"].score == pytest.approx(100 * float(np.mean(xcomet.scores)), abs=1e-4)
    spans = json.loads(out_json.read_text())["details"]["good"]["XCOMET"]["error_spans"]
    assert len(spans) == 12 and spans == json.loads(json.dumps(list(xcomet.metadata.error_spans)))
    tok, model = BleurtTokenizer.from_pretrained(models["bleurt"]), BleurtForSequenceClassification.from_pretrained(models["bleurt"])
    with torch.no_grad():
        direct = model.eval()(**tok(refs, bad, padding="longest", return_tensors="pt")).logits.flatten()
    assert scores.cells["bad"]["BLEURT"].score == pytest.approx(100 * direct.mean().item(), abs=1e-4)
    for label in ("COMET", "CometKiwi", "XCOMET", "BLEURT"):
        c = scores.cells["good"][label]
        assert 0 < c.p_bootstrap["bad"] <= 1 and 0 < c.p_ar["bad"] <= 1 and c.ci >= 0
    # CometKiwi never sees the references; --lowercase reaches the learned metrics (the tiny encoder is cased)
    shuffled = _write(tmp_path / "shuffled.txt", refs[::-1])
    again = score_mod.main([g, "--remove-bpe", "--ref", shuffled, "--metrics", "comet", "--lowercase",
                            "--comet-model", models["cometkiwi"], "--paired-bs-n", "0", "--paired-ar-n", "0"])
    lower_kiwi = _predict(models["cometkiwi"], [{"src": s.lower(), "mt": h.lower()} for s, h in zip(srcs, good)])
    assert again.cells["good"]["CometKiwi"].score == pytest.approx(100 * float(np.mean(lower_kiwi.scores)), abs=1e-4)
    assert again.cells["good"]["CometKiwi"].score != pytest.approx(scores.cells["good"]["CometKiwi"].score, abs=1e-3)
    assert "case:lc" in again.signatures["CometKiwi"]


def test_comet_model_from_the_hugging_face_cache_and_missing_hparams(tmp_path, tiny_learned_metrics, monkeypatch):
    """A model name resolves in the local Hugging Face cache (what `comet-score --model NAME` leaves there) and
    the signature names its revision; a checkpoint without hparams.yaml two levels up ends the command with
    the reason."""
    import shutil

    import huggingface_hub.constants

    snapshot = tmp_path / "hub" / "models--Unbabel--wmt22-cometkiwi-da" / "snapshots" / "abc123"
    shutil.copytree(tiny_learned_metrics["cometkiwi"], snapshot)
    (tmp_path / "hub" / "models--Unbabel--wmt22-cometkiwi-da" / "refs").mkdir()
    (tmp_path / "hub" / "models--Unbabel--wmt22-cometkiwi-da" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    bare = tmp_path / "bare" / "checkpoints"
    bare.mkdir(parents=True)
    shutil.copy(os.path.join(tiny_learned_metrics["comet"], "checkpoints", "model.ckpt"), bare / "model.ckpt")
    srcs, refs, good, _ = _corpus(4)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    common = [g, "--remove-bpe", "--metrics", "comet", "--paired-bs-n", "0", "--paired-ar-n", "0", "--gpus", "0"]
    scores = score_mod.main(common + ["--comet-model", "Unbabel/wmt22-cometkiwi-da"])
    assert scores.signatures["CometKiwi"].startswith("model:Unbabel/wmt22-cometkiwi-da@abc123|class:UnifiedMetric")
    assert "device:cpu" in scores.signatures["CometKiwi"]
    with pytest.raises(SystemExit) as e:
        score_mod.main(common + ["--comet-model", "Unbabel/wmt22-cometkiwi-da",
                                 "--comet-model", str(bare / "model.ckpt")])
    assert "cannot be computed" in str(e.value.code) and "two levels above the checkpoint" in str(e.value.code)


def test_missing_learned_models_end_the_command_with_the_reason(tmp_path, capsys):
    srcs, refs, good, _ = _corpus(6)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    with pytest.raises(SystemExit) as e:
        score_mod.main([g, "--remove-bpe", "--metrics", "bleu,bleurt", "--gpus", "0",
                        "--bleurt-checkpoint", str(tmp_path / "nowhere"), "--paired-bs-n", "0"])
    assert "BLEURT was asked for (--metrics) and cannot be computed" in str(e.value.code)
    assert "--bleurt-checkpoint" in str(e.value.code) and capsys.readouterr().out == ""


def sacrebleu_private_uses(source: str):
    """Attribute accesses ``X._name`` (not dunder) where X is a name imported from sacreBLEU, a call of one,
    or a variable assigned such a call: uses of sacreBLEU's private API."""
    import ast

    tree = ast.parse(source)
    names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").startswith("sacrebleu") for alias in node.names}
    names |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
              for alias in node.names if alias.name.startswith("sacrebleu")}

    def from_sacrebleu(node):
        if isinstance(node, ast.Call):
            node = node.func
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in names

    for node in ast.walk(tree):  # variables holding a sacreBLEU object
        if isinstance(node, ast.Assign) and from_sacrebleu(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return sorted(f"line {node.lineno}: .{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and from_sacrebleu(node.value))


def test_the_commands_use_only_sacrebleus_public_api():
    """sacreBLEU is required as >= 2 without an upper bound: its private methods may change in any release,
    so no command calls them (the example: per-order chrF through CHRF's private statistics is caught)."""
    import glob

    old = "counter = CHRF(char_order=8)\nstats = counter._extract_corpus_statistics(h, r)\nCHRF()._compute_f_score(s)\n"
    assert sacrebleu_private_uses("from sacrebleu.metrics import CHRF\n" + old) == [
        "line 3: ._extract_corpus_statistics", "line 4: ._compute_f_score"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in glob.glob(os.path.join(repo, "posmix_fairseq", "**", "*.py"), recursive=True):
        assert sacrebleu_private_uses(open(path, encoding="utf-8").read()) == [], path


def test_ngram_orders_per_order_with_sacrebleus_signatures(tmp_path, capsys):
    """Identical text (up to case, with --lowercase): 100 at every order; a changed word: below 100 at every order;
    each order's sacreBLEU signature is recorded (case:lc for chrF and BLEU alike)."""
    from sacrebleu.metrics import BLEU, CHRF

    from posmix_fairseq.harness.evaluation import ngram_orders

    refs = ["the cat sat on the mat", "a dog ran in the park"]

    def generated(name, hyps):
        (tmp_path / name).write_text("".join(f"S-{i}\tx\nT-{i}\t{ref}\nH-{i}\t-1.0\t{hyp}\n"
                                             for i, (ref, hyp) in enumerate(zip(refs, hyps))))
        return str(tmp_path / name)

    same, other = generated("same.txt", [r.upper() for r in refs]), generated("other.txt", ["the cat sat on the rug", refs[1]])
    result = ngram_orders.main([same, "--baseline", other, "--names", "same", "other", "--lowercase", "--char-orders",
                                "1,6,12", "--word-orders", "1-3", "--bleu-orders", "1,4"])
    for key in ("chrf_char_orders", "chrf_word_orders", "bleu_orders"):
        assert result[key]["scores"]["same"] == pytest.approx([100.0] * len(result[key]["orders"])), key
        assert all(0 < x < 100 for x in result[key]["scores"]["other"]), key
    expected = {"chrf_char_orders": [CHRF(char_order=n, word_order=2, lowercase=True) for n in (1, 6, 12)],
                "chrf_word_orders": [CHRF(char_order=6, word_order=n, lowercase=True) for n in (1, 2, 3)],
                "bleu_orders": [BLEU(max_ngram_order=n, lowercase=True) for n in (1, 4)]}
    for key, metrics in expected.items():
        for metric in metrics:
            metric.corpus_score(refs, [refs])
        assert result[key]["signatures"] == [str(metric.get_signature()) for metric in metrics], key
        assert all("case:lc" in signature and "nrefs:1" in signature for signature in result[key]["signatures"])
    assert f"sacreBLEU signature at n = 1: {result['bleu_orders']['signatures'][0]}" in capsys.readouterr().out
