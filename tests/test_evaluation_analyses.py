"""posmix-average, posmix-attention, posmix-decode-speed, posmix-contrastive, posmix-length-bins and
posmix-concat-testset, on one tiny HC-SA model trained here (a few updates on the toy corpus)."""
import glob
import json
import os
import random

import pytest
import sacrebleu
import torch
from test_cli_end_to_end import run_generate  # the shared CLI helper

from posmix_fairseq.harness.evaluation import attention, average, concat_testset, contrastive, decode_speed, length_bins
from posmix_fairseq.harness.fairseq_loading import encode_lines, load_for_inference

#: a hand-written 4-reference, 5-variant example in lingeval97.json's format (tests/data/lingeval97_tiny.md)
LINGEVAL97_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lingeval97_tiny.json")


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
    rows, offdiag = attention.main([data, "--path", ckpt, "--out", str(tmp_path), "--heatmaps", "0", "--formats", "png"])
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


def _teacher_forced_log_probs(models, task, sources, targets):
    """Summed target log-probabilities (EOS included) from one batched forward pass per model, written
    out here independently of fairseq's SequenceScorer: left-padded sources, right-padded targets,
    ensemble = mean of the probabilities."""
    from fairseq.data import data_utils

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src_tokens = data_utils.collate_tokens(sources, src_dict.pad(), src_dict.eos(), left_pad=True)
    tgt_tokens = data_utils.collate_tokens(targets, tgt_dict.pad(), tgt_dict.eos(), left_pad=False)
    prev = data_utils.collate_tokens(targets, tgt_dict.pad(), tgt_dict.eos(), left_pad=False, move_eos_to_beginning=True)
    with torch.inference_mode():
        probs = [m.get_normalized_probs(m(src_tokens, torch.tensor([len(x) for x in sources]), prev), log_probs=False)
                 for m in models]
    lprobs = torch.stack(probs).mean(0).log().gather(-1, tgt_tokens.unsqueeze(-1)).squeeze(-1).double()
    mask = tgt_tokens.ne(tgt_dict.pad())
    return (lprobs * mask).sum(1), mask.sum(1)


def test_contrastive_scores_equal_a_teacher_forced_forward_pass(trained):
    from fairseq.sequence_scorer import SequenceScorer

    data, ckpt_dir = trained
    ckpt, other = os.path.join(ckpt_dir, "checkpoint_last.pt"), average.list_checkpoints(ckpt_dir)[0]
    scores, (by_cat, by_dist) = contrastive.evaluate(data, ckpt, LINGEVAL97_EXAMPLE)
    ensemble, _ = contrastive.evaluate(data, f"{ckpt}:{other}", LINGEVAL97_EXAMPLE)  # ':'-separated, as --path
    with open(LINGEVAL97_EXAMPLE, encoding="utf-8") as f:  # the pairs in evaluate.py's order, read independently
        entries = json.load(f)
    sources = [e["source"] for e in entries for _ in range(1 + len(e["errors"]))]
    targets = [t for e in entries for t in [e["reference"]] + [x["contrastive"] for x in e["errors"]]]
    _, task, both = load_for_inference(data, f"{ckpt}:{other}", subset="none")
    src, tgt = encode_lines(task.source_dictionary, sources), encode_lines(task.target_dictionary, targets)
    sums, lengths = _teacher_forced_log_probs(both[:1], task, src, tgt)
    assert scores == pytest.approx(sums.tolist(), rel=1e-5)
    per_token = contrastive.score_pairs(both[:1], task, SequenceScorer(task.target_dictionary), src, tgt, per_token=True,
                                        batch_size=4)
    assert per_token == pytest.approx((sums / lengths).tolist(), rel=1e-5)
    assert ensemble == pytest.approx(_teacher_forced_log_probs(both, task, src, tgt)[0].tolist(), rel=1e-5)
    assert ensemble != pytest.approx(scores, rel=1e-5)
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
    assert [r["bin"] for r in result["bins"]] == ["<= 3", "4-6", "> 6"]
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    for metric in (bleu, chrf):
        metric.corpus_score(hyps, [refs])
    assert result["signatures"] == {"BLEU": str(bleu.get_signature()), "chrF2": str(chrf.get_signature())}
    for r, (lo, hi) in zip(result["bins"], [(0, 3), (4, 6), (7, 99)]):
        idx = [i for i, s in enumerate(srcs) if lo <= len(s.split()) <= hi]
        assert r["sentences"] == len(idx)
        assert r["sys/BLEU"] == pytest.approx(sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]]).score)
        assert r["base/chrF2"] == pytest.approx(sacrebleu.corpus_chrf([base[i] for i in idx], [[refs[i] for i in idx]]).score)
    assert "sys - base BLEU" in capsys.readouterr().out
    assert length_bins.parse_bins("quantiles:4", list(range(1, 101))) == [25, 50, 75]


def test_quantile_bins_hold_about_equal_shares():
    """quantiles:K edges are the i/K empirical quantiles (the smallest value with at least i/K of the
    values at or below it), worked out by hand; ties merge edges; bin k holds E_{k-1} < x <= E_k."""
    values = [7, 1, 10, 4, 2, 9, 3, 8, 6, 5]
    edges = length_bins.parse_bins("quantiles:3", values)  # i/K * n = 3.33, 6.67: the 4th and 7th smallest
    assert edges == [4, 7]
    assert length_bins.assign(values, edges) == [1, 0, 2, 0, 0, 2, 0, 2, 1, 1]  # 4, 3 and 3 sentences
    assert length_bins.bin_labels(edges, integer=True) == ["<= 4", "5-7", "> 7"]
    ties = [1] * 8 + [2, 3]
    assert length_bins.parse_bins("quantiles:4", ties) == [1]  # the 3rd, 5th and 8th smallest are all 1
    assert length_bins.parse_bins("quantiles:10", ties) == [1, 2]
    assert length_bins.parse_bins("quantiles:1", values) == [] and length_bins.bin_labels([], True) == ["all"]
    with pytest.raises(ValueError, match="quantiles:K with K >= 1"):
        length_bins.parse_bins("quantiles:0", values)
    with pytest.raises(ValueError, match="strictly increasing"):
        length_bins.parse_bins("5,3", [1])


def test_concat_testset_joins_consecutive_pairs_and_groups(tmp_path):
    src = [" ".join(["w"] * n) for n in (3, 4, 20, 10, 30, 30, 1)]  # 7 lines: the last is dropped
    tgt = [f"t{i}" for i in range(7)]
    (tmp_path / "s.de").write_text("\n".join(src) + "\n")
    (tmp_path / "t.en").write_text("\n".join(tgt) + "\n")
    out = tmp_path / "out"
    cs, ct, counts = concat_testset.main(["--src", str(tmp_path / "s.de"), "--tgt", str(tmp_path / "t.en"),
                                          "-s", "de", "-t", "en", "--out", str(out), "--bins", "25,50"])
    assert ct == ["t0 t1", "t2 t3", "t4 t5"] and [len(s.split()) for s in cs] == [7, 30, 60]
    assert counts == {"G0-25": 1, "G26-50": 1, "G51-inf": 1}
    assert (out / "concat.G26-50.en").read_text() == "t2 t3\n"
