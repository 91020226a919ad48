"""posmix-score: sacreBLEU metrics against sacreBLEU called directly, detokenisation, paired bootstrap,
and the COMET/BLEURT paths end to end with tiny random models built here with the packages' own classes."""
import json
import os
import random

import numpy as np
import pytest
import sacrebleu

from posmix_fairseq.evaluation import score as score_mod
from posmix_fairseq.evaluation.significance import paired_bootstrap_segments

WORDS = "ein mann hund läuft über die straße frau kind spielt im park mit einem ball rot blau".split()


def _corpus(n=40, seed=0):
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(n)]
    srcs = [r.upper() for r in refs]
    good = [r if i % 4 else " ".join(r.split()[:-1] + ["kind"]) for i, r in enumerate(refs)]
    bad = [" ".join(rng.sample(r.split(), len(r.split()))) for r in refs]  # shuffled words
    return srcs, refs, good, bad


def _bpe(line):  # subword-nmt style: split every word longer than 3 after 2 characters
    return " ".join(w[:2] + "@@ " + w[2:] if len(w) > 3 else w for w in line.split())


def _write_gen(path, srcs, refs, hyps):
    order = list(range(len(hyps)))
    random.Random(1).shuffle(order)  # fairseq prints in batch order, not id order
    with open(path, "w", encoding="utf-8") as f:
        f.write("2024-01-01 | INFO | fairseq_cli.generate | S-looking log line\n")
        for i in order:
            f.write(f"S-{i}\t{_bpe(srcs[i])}\nT-{i}\t{_bpe(refs[i])}\nH-{i}\t-0.25\t{_bpe(hyps[i])}\n"
                    f"D-{i}\t-0.25\t{hyps[i]}\nP-{i}\t-0.1 -0.2\n")
    return str(path)


@pytest.fixture(scope="session")
def tiny_learned_metrics(tmp_path_factory):
    """Built once per session (~6 s): a RegressionMetric COMET and a BLEURT, random weights."""
    from posmix_fairseq.evaluation.tiny_learned_metrics import build_tiny_bleurt, build_tiny_comet

    d = tmp_path_factory.mktemp("learned_metrics")
    return build_tiny_comet(str(d / "comet")), build_tiny_bleurt(str(d / "bleurt"))


def test_sacrebleu_metrics_detok_and_bootstrap(tmp_path):
    srcs, refs, good, bad = _corpus()
    g = _write_gen(tmp_path / "good.txt", srcs, refs, good)
    b = _write_gen(tmp_path / "bad.txt", srcs, refs, bad)
    out_json, out_csv = tmp_path / "s.json", tmp_path / "s.csv"
    cells, sigs, skipped = score_mod.main([g, "--baseline", b, "--remove-bpe", "--metrics", "bleu,chrf++,chrf,ter",
                                           "--bootstrap-samples", "200", "--json", str(out_json), "--csv", str(out_csv)])
    # independent reference: sacreBLEU on the raw (never BPE'd) text
    assert cells["good"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(good, [refs]).score)
    assert cells["bad"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(bad, [refs]).score)
    assert cells["good"]["chrF2++"].score == pytest.approx(sacrebleu.CHRF(word_order=2).corpus_score(good, [refs]).score)
    assert cells["good"]["chrF2"].score == pytest.approx(sacrebleu.corpus_chrf(good, [refs]).score)
    assert cells["good"]["TER"].score == pytest.approx(sacrebleu.corpus_ter(good, [refs]).score)
    # a much better system is significantly better than the baseline; the CI brackets the score
    for m in ("BLEU", "chrF2++", "TER"):
        c = cells["good"][m]
        assert c.p_values["bad"] < 0.05
        assert c.mean - 3 * c.ci <= c.score <= c.mean + 3 * c.ci
    assert "tok:13a" in sigs["BLEU"] and "bs:200" in sigs["BLEU"] and "nw:2" in sigs["chrF2++"]
    data = json.loads(out_json.read_text())
    assert {r["metric"] for r in data["rows"]} == {"BLEU", "chrF2++", "chrF2", "TER"}
    assert out_csv.read_text().splitlines()[0].startswith("system,path,baseline,metric,score")
    # --tokenize zh and D- lines reach sacreBLEU
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    cells, sigs, _ = score_mod.main([g, "--use-detok-lines", "--ref", str(tmp_path / "ref.txt"), "--metrics", "bleu", "--tokenize", "zh",
                                     "--bootstrap-samples", "0"])
    assert cells["good"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(good, [refs], tokenize="zh").score)
    assert "tok:zh" in sigs["BLEU"]


def test_bad_input_errors(tmp_path):
    srcs, refs, good, _ = _corpus(5)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    with pytest.raises(SystemExit, match="--metrics: unknown"):
        score_mod.main([g, "--metrics", "bleu,meteor"])
    with pytest.raises(SystemExit, match="--tokenize 'foo': valid values are 13a, intl, zh"):
        score_mod.main([g, "--tokenize", "foo"])
    (tmp_path / "short.txt").write_text("a\nb\n")
    with pytest.raises(SystemExit, match="2 hypotheses but 5 references"):
        score_mod.main([g, "--hyp", str(tmp_path / "short.txt"), "--metrics", "bleu"])
    missing = tmp_path / "missing.txt"
    missing.write_text("".join(line for line in open(g) if not line.startswith(("H-2\t", "D-2\t"))))
    with pytest.raises(SystemExit, match=r"ids \[2\] are missing.*required-batch-size-multiple 1"):
        score_mod.main([str(missing)])


def test_segment_bootstrap_known_cases():
    same = paired_bootstrap_segments([0.1, 0.5, 0.9, 0.3], [0.1, 0.5, 0.9, 0.3], n_samples=300)
    assert same.p_value == 1.0  # identical systems are never significantly different
    const = paired_bootstrap_segments([2.0] * 10, None, n_samples=50)
    assert (const.score, const.mean, const.ci) == (2.0, 2.0, 0.0)
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, 200)
    better = paired_bootstrap_segments(base + 0.5, base, n_samples=500)
    assert better.p_value < 0.01 and better.score == pytest.approx(base.mean() + 0.5)


def test_comet_and_bleurt_end_to_end(tmp_path, tiny_learned_metrics):
    comet_ckpt, bleurt_dir = tiny_learned_metrics
    srcs, refs, good, bad = _corpus(12)
    g = _write_gen(tmp_path / "good.txt", srcs, refs, good)
    b = _write_gen(tmp_path / "bad.txt", srcs, refs, bad)
    cells, sigs, skipped = score_mod.main([g, "--baseline", b, "--remove-bpe", "--metrics", "bleu,comet,bleurt",
                                           "--comet-model", os.path.dirname(os.path.dirname(comet_ckpt)),
                                           "--bleurt-checkpoint", bleurt_dir, "--bootstrap-samples", "100"])
    assert skipped == {}
    # independent reference: the packages' own loading and scoring, called directly
    import torch
    from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer
    from comet import load_from_checkpoint

    data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(srcs, good, refs)]
    pred = load_from_checkpoint(comet_ckpt).predict(data, batch_size=4, gpus=0, progress_bar=False)
    assert cells["good"]["COMET"].score == pytest.approx(100 * float(np.mean(pred.scores)), abs=1e-4)
    tok, model = BleurtTokenizer.from_pretrained(bleurt_dir), BleurtForSequenceClassification.from_pretrained(bleurt_dir)
    with torch.no_grad():
        direct = model.eval()(**tok(refs, bad, padding="longest", return_tensors="pt")).logits.flatten()
    assert cells["bad"]["BLEURT"].score == pytest.approx(100 * direct.mean().item(), abs=1e-4)
    assert 0 < cells["good"]["COMET"].p_values["bad"] <= 1 and cells["good"]["BLEURT"].ci >= 0


def test_missing_learned_models_are_skipped_not_fatal(tmp_path, capsys):
    srcs, refs, good, _ = _corpus(6)
    g = _write_gen(tmp_path / "g.txt", srcs, refs, good)
    cells, sigs, skipped = score_mod.main([g, "--remove-bpe", "--metrics", "bleu,comet,bleurt",
                                           "--bleurt-checkpoint", str(tmp_path / "nowhere"), "--bootstrap-samples", "0"])
    assert cells["g"]["BLEU"].score == pytest.approx(sacrebleu.corpus_bleu(good, [refs]).score)
    assert "--comet-model PATH" in skipped["COMET"] and "--bleurt-checkpoint" in skipped["BLEURT"]
    table = capsys.readouterr().out
    assert "**COMET skipped**" in table and "**BLEURT skipped**" in table and "| g | " in table
