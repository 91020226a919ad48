"""posmix-average, posmix-attention, posmix-decode-speed, posmix-contrastive, posmix-length-bins and
posmix-concat-testset, on one tiny HC-SA model trained here (a few updates on the toy corpus)."""
import glob
import json
import os
import random

import pytest
import sacrebleu
import torch
from fairseq.data import LanguagePairDataset
from fairseq.sequence_scorer import SequenceScorer
from test_cli_end_to_end import run_generate  # the shared CLI helper

from posmix_fairseq.evaluation import attention, average, concat_testset, contrastive, decode_speed, length_bins
from posmix_fairseq.evaluation.fairseq_loading import encode_lines, load_for_inference


@pytest.fixture(scope="module")
def trained(tiny_hc_sa):
    """HC-SA (hard-coded encoder heads at i-1, i+1; decoder heads at i-1, i), a checkpoint every 2 updates
    (conftest: trained once per session, shared with tests/test_figures.py)."""
    return tiny_hc_sa


def test_average_last_n_and_best_and_next_then_generate(trained, tmp_path):
    data, ckpt_dir = trained
    paths = average.list_checkpoints(ckpt_dir)
    assert [int(os.path.basename(p)[:-3].split("_")[2]) for p in paths] == [2, 4, 6, 8]  # ordered by updates
    out = tmp_path / "avg.pt"
    chosen = average.main(["--dir", ckpt_dir, "--last", "3", "--output", str(out)])
    assert chosen == paths[-3:]
    states = [torch.load(p, map_location="cpu", weights_only=False)["model"] for p in paths[-3:]]
    avg = torch.load(out, map_location="cpu", weights_only=False)["model"]
    for k, v in avg.items():  # the mean of the parameters, computed independently
        if v.is_floating_point():
            torch.testing.assert_close(v, sum(s[k] for s in states) / 3, rtol=1e-6, atol=1e-7)
    assert any(not torch.equal(avg[k], states[-1][k]) for k in avg)
    # best-and-next: the lowest stored validation loss and the checkpoints after it (else the last N)
    losses = [torch.load(p, map_location="cpu", weights_only=False)["extra_state"]["val_loss"] for p in paths]
    best = min(range(4), key=lambda i: (losses[i], i))
    chosen, how = average.select_best_and_next(paths, 2)
    assert chosen == (paths[best:best + 2] if best + 2 <= 4 else paths[-2:])
    with pytest.raises(SystemExit, match="--last 9: only 4 checkpoints"):
        average.main(["--dir", ckpt_dir, "--last", "9", "--output", str(tmp_path / "x.pt")])
    stdout, _ = run_generate(data, str(out))
    assert len([line for line in stdout.splitlines() if line.startswith("H-")]) == 20


def test_attention_argmax_distance_of_hard_coded_heads(trained, tmp_path):
    data, ckpt_dir = trained
    ckpt = os.path.join(ckpt_dir, "checkpoint_last.pt")
    rows, offdiag = attention.main([data, "--path", ckpt, "--out", str(tmp_path), "--heatmaps", "0"])
    _, task, _ = load_for_inference(data, ckpt)
    ds = task.dataset("test")
    n = len(ds)
    src_tokens = sum(int(ds.src_sizes[i]) for i in range(n))
    tgt_tokens = sum(int(ds.tgt_sizes[i]) for i in range(n))
    by = {(r["sublayer"], r["layer"], r["head"]): r for r in rows}
    # HC paper Appendix Table 6 layout: heads cycle through the offsets. Gaussians are cut at the borders
    # (not renormalised), so the first (last) token's i-1 (i+1) head has its argmax on itself: the exact
    # expected mean distance is -/+ (tokens - sentences) / tokens.
    expect_src = (src_tokens - n) / src_tokens
    expect_tgt = (tgt_tokens - n) / tgt_tokens
    for layer in (1, 2):
        assert by[("encoder_self", layer, 1)]["mean_argmax_distance"] == pytest.approx(-expect_src)
        assert by[("encoder_self", layer, 2)]["mean_argmax_distance"] == pytest.approx(expect_src)
        assert by[("decoder_self", layer, 1)]["mean_argmax_distance"] == pytest.approx(-expect_tgt)
        assert by[("decoder_self", layer, 2)]["mean_argmax_distance"] == pytest.approx(0.0)
        assert by[("encoder_self", layer, 1)]["off_diagonal_share"] == 0.0
    assert ("decoder_cross", 1, 4) in by  # learned cross heads are measured too
    assert sorted(offdiag["encoder_self"]) == list(range(n)) and set(offdiag["encoder_self"].values()) == {0.0}
    assert len(open(tmp_path / "offdiag.decoder_cross.txt").read().split()) == n
    pngs = glob.glob(str(tmp_path / "attention_maps" / "sentence0.*.png"))  # one per sublayer (tests/test_figures.py)
    assert len(pngs) == 3 and open(pngs[0], "rb").read(4) == b"\x89PNG"


def test_decode_speed_counts_the_generated_tokens(trained):
    data, ckpt_dir = trained
    ckpt = os.path.join(ckpt_dir, "checkpoint_last.pt")
    r = decode_speed.measure_decode_speed(data, ckpt, runs=2, beam=4, warmup=False)
    stdout, _ = run_generate(data, ckpt)  # fairseq-generate, beam 4, same checkpoint
    hyps = [line.split("\t")[2] for line in stdout.splitlines() if line.startswith("H-")]
    assert r.sentences == len(hyps) == 20
    assert r.tokens == sum(len(h.split()) + 1 for h in hyps)  # + EOS
    assert len(r.tokens_per_s) == 2 and r.mean_tokens_per_s > 0 and r.var_tokens_per_s >= 0


def test_contrastive_scores_equal_fairseq_sequence_scorer(trained):
    data, ckpt_dir = trained
    ckpt = os.path.join(ckpt_dir, "checkpoint_last.pt")
    example = contrastive.EXAMPLE_SET  # the shipped example, in lingeval97.json's format
    scores, (by_cat, by_dist) = contrastive.evaluate(data, ckpt, example)
    with open(example, encoding="utf-8") as f:  # the pairs in evaluate.py's order, read independently
        entries = json.load(f)
    sources = [e["source"] for e in entries for _ in range(1 + len(e["errors"]))]
    targets = [t for e in entries for t in [e["reference"]] + [x["contrastive"] for x in e["errors"]]]
    _, task, models = load_for_inference(data, ckpt, subset="none")
    src = encode_lines(task.source_dictionary, sources)
    tgt = encode_lines(task.target_dictionary, targets)
    ds = LanguagePairDataset(src, [len(s) for s in src], task.source_dictionary, tgt, [len(t) for t in tgt],
                             task.target_dictionary)
    sample = ds.collater([ds[i] for i in range(len(src))])
    hypos = SequenceScorer(task.target_dictionary).generate(models, sample)
    expected = {int(i): h[0]["positional_scores"].sum().item() for i, h in zip(sample["id"], hypos)}
    assert scores == pytest.approx([expected[i] for i in range(len(src))], abs=1e-4)
    assert by_cat["subj_verb_agreement"][1] == 3 and set(by_dist["subj_verb_agreement"]) == {"1", "7"}


def test_contrastive_accuracy_from_known_scores():
    """Scores in Sennrich's evaluate.py order (per entry: reference, then variants); distances binned
    0 ... 15 and ">15" as evaluate.py bins them."""
    def entry(*errors):
        return {"source": "s", "reference": "r", "errors": [dict(e, contrastive="c") for e in errors]}
    items = [entry({"type": "agr", "distance": 2}, {"type": "neg"}),
             entry({"type": "agr", "distance": 2}),
             entry({"type": "agr", "distance": 5}),
             entry({"type": "agr", "distance": 23})]
    by_cat, by_dist = contrastive.accuracy(items, [-1.0, -2.0, -0.5, -3.0, -4.0, -2.0, -2.0, -1.0, -9.0])
    assert by_cat == {"agr": (3, 4), "neg": (0, 1)}  # a tie is not a correct decision
    assert by_dist == {"agr": {"2": (2, 2), "5": (0, 1), ">15": (1, 1)}}
    with pytest.raises(ValueError, match="8 scores for a set of 9"):
        contrastive.accuracy(items, [0.0] * 8)


def test_contrastive_set_errors_name_what_is_missing(tmp_path):
    bad = tmp_path / "set.json"
    bad.write_text(json.dumps([{"source": "s", "reference": "r", "errors": [{"type": "agr"}]}]))
    with pytest.raises(ValueError, match=r"entry 0 lacks errors\[0\]\.contrastive"):
        contrastive.read_contrastive_set(str(bad))
    with pytest.raises(ValueError, match="no such file"):
        contrastive.read_contrastive_set(str(tmp_path / "missing.json"))


def _gen_file(path, refs, hyps, srcs):
    with open(path, "w") as f:
        for i in random.Random(0).sample(range(len(refs)), len(refs)):
            f.write(f"S-{i}\t{srcs[i]}\nT-{i}\t{refs[i]}\nH-{i}\t-1.0\t{hyps[i]}\n")


def test_length_bins_match_sacrebleu_on_each_bin(tmp_path, capsys):
    rng = random.Random(3)
    words = "a b c d e f g h i j".split()
    srcs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(60)]
    refs = [s.upper() for s in srcs]
    hyps = [r if i % 3 else r.lower() for i, r in enumerate(refs)]
    base = [r if i % 2 else "X" for i, r in enumerate(refs)]
    _gen_file(tmp_path / "sys.txt", refs, hyps, srcs)
    _gen_file(tmp_path / "base.txt", refs, base, srcs)
    result = length_bins.main([str(tmp_path / "sys.txt"), "--baseline", str(tmp_path / "base.txt"), "--by", "src",
                               "--bins", "3,6", "--metrics", "bleu,chrf"])
    assert [r["bin"] for r in result] == ["<= 3", "4-6", "> 6"]
    for r, (lo, hi) in zip(result, [(0, 3), (4, 6), (7, 99)]):
        idx = [i for i, s in enumerate(srcs) if lo <= len(s.split()) <= hi]
        assert r["sentences"] == len(idx)
        assert r["sys/BLEU"] == pytest.approx(sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score)
        assert r["base/chrF2"] == pytest.approx(sacrebleu.corpus_chrf([base[i] for i in idx], [[refs[i] for i in idx]]).score)
    assert "sys - base BLEU" in capsys.readouterr().out
    assert length_bins.parse_bins("quantiles:4", list(range(1, 101))) == [25, 50, 75]
    with pytest.raises(ValueError, match="strictly increasing"):
        length_bins.parse_bins("5,3", [1])


def test_concat_testset_joins_consecutive_pairs_and_groups(tmp_path):
    src = [" ".join(["w"] * n) for n in (3, 4, 20, 10, 30, 30, 1)]  # 7 lines: the last is dropped
    tgt = [f"t{i}" for i in range(7)]
    (tmp_path / "s.de").write_text("\n".join(src) + "\n")
    (tmp_path / "t.en").write_text("\n".join(tgt) + "\n")
    out = tmp_path / "out"
    cs, ct, counts = concat_testset.main(["--src-file", str(tmp_path / "s.de"), "--tgt-file", str(tmp_path / "t.en"),
                                          "--src", "de", "--tgt", "en", "--out", str(out), "--bins", "25,50"])
    assert ct == ["t0 t1", "t2 t3", "t4 t5"] and [len(s.split()) for s in cs] == [7, 30, 60]
    assert counts == {"G0-25": 1, "G26-50": 1, "G51-inf": 1}
    assert (out / "concat.G26-50.en").read_text() == "t2 t3\n"
