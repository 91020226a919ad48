"""The claims study's statistics: BLEU from sentence statistics equals sacreBLEU's, the two-level bootstrap
sees seed noise, Holm's correction, and the verdict rule pinned with constructed cases (an equality is
never read from a non-significant difference, a seed spread larger than Δ blocks a direction, Holm
applies, one seed is never a verdict, a gap that only the brevity penalty makes says so)."""
import os

import numpy as np
import pytest
import sacrebleu

from posmix_fairseq.harness.evaluation.claims.statistics import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Comparison,
                                                                  bleu_parts, compare, corpus_scores, holm,
                                                                  render_verdict_rule, sentence_stats, verdict)

REFS = ["a man in an orange hat looks at something .", "two dogs play in the snow near a fence .",
        "a woman is riding a red bicycle down the street .", "children are playing soccer on a green field .",
        "a cook prepares food in a small kitchen .", "the boy jumps into the blue water of the pool ."] * 5


def noisy(refs, rng, drop=0.2, cut=0.0):
    """Hypotheses made from the references: words dropped at random, and the last fraction ``cut`` removed."""
    out = []
    for r in refs:
        words = [w for w in r.split() if rng.random() > drop]
        out.append(" ".join(words[:max(1, int(len(words) * (1 - cut)))]))
    return out


def test_bleu_from_sentence_statistics_equals_sacrebleu():
    rng = np.random.default_rng(0)
    for drop, cut in ((0.1, 0.0), (0.3, 0.2), (0.6, 0.5)):
        hyps = noisy(REFS, rng, drop, cut)
        ours = corpus_scores(sentence_stats(hyps, REFS))
        theirs = sacrebleu.corpus_bleu(hyps, [REFS])
        assert ours["bleu"] == pytest.approx(theirs.score, abs=1e-9)
        assert ours["bp"] == pytest.approx(theirs.bp, abs=1e-9)
        assert ours["ratio"] == pytest.approx(theirs.sys_len / theirs.ref_len, abs=1e-9)
        assert ours["precisions"] == pytest.approx(theirs.precisions, abs=1e-9)
        assert ours["bleu_equal_length"] == pytest.approx(theirs.score / theirs.bp, abs=1e-9)


def test_zero_counts_are_smoothed_as_sacrebleu_does():
    hyps, refs = ["a b", "c"], ["a x y z", "q r s t"]  # no 2-, 3- or 4-gram matches
    assert corpus_scores(sentence_stats(hyps, refs))["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)


def test_the_bootstrap_sees_seed_noise_and_a_clear_gap():
    rng = np.random.default_rng(1)
    good = [sentence_stats(noisy(REFS, rng, 0.05), REFS) for _ in range(3)]
    bad = [sentence_stats(noisy(REFS, rng, 0.5), REFS) for _ in range(3)]
    c = compare([(good, bad, 1.0)], resamples=400)
    assert c.delta > 10 and c.ci95[0] > 0 and c.p < 0.01 and c.seeds == (3, 3)
    same = compare([(good, good, 1.0)], resamples=400)
    assert same.delta == 0 and same.ci95[0] < 0 < same.ci95[1]
    # seeds far apart: the two-level interval is wider than the sentence-only one of a single seed
    spread = [sentence_stats(noisy(REFS, rng, d), REFS) for d in (0.05, 0.3, 0.55)]
    two_level = compare([(spread, [good[0]], 1.0)], resamples=400)
    one_seed = compare([([spread[1]], [good[0]], 1.0)], resamples=400)
    assert two_level.ci95[1] - two_level.ci95[0] > 1.5 * (one_seed.ci95[1] - one_seed.ci95[0])


def test_a_gap_between_two_sets_is_the_difference_of_the_two_comparisons():
    rng = np.random.default_rng(2)
    a_short = [sentence_stats(noisy(REFS, rng, 0.1), REFS) for _ in range(3)]
    b_short = [sentence_stats(noisy(REFS, rng, 0.15), REFS) for _ in range(3)]
    a_long = [sentence_stats(noisy(REFS, rng, 0.1), REFS) for _ in range(3)]
    b_long = [sentence_stats(noisy(REFS, rng, 0.6), REFS) for _ in range(3)]
    long_ = compare([(a_long, b_long, 1.0)], resamples=200)
    short = compare([(a_short, b_short, 1.0)], resamples=200)
    gap = compare([(a_long, b_long, 1.0), (a_short, b_short, -1.0)], resamples=200)
    assert gap.delta == pytest.approx(long_.delta - short.delta)
    assert gap.ci95[0] > 0


def test_holm():
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.5, "b": 0.2}) == pytest.approx({"b": 0.4, "a": 0.5})  # never decreasing along the order


def cmp(delta, ci95, ci90, p=0.5, seeds=(3, 3), eq=None):
    eq = eq if eq is not None else ci95
    return Comparison(delta=delta, ci95=ci95, ci90=ci90, p=p, delta_equal_length=delta, ci95_equal_length=eq,
                      seeds=seeds, sd=(0.3, 0.3), resamples=1000)


@pytest.mark.parametrize("expect, margin, comparison, p_holm, spread, expected", [
    # equality: the 90% interval inside ±margin
    ("same", 0.5, cmp(0.1, (-0.5, 0.6), (-0.4, 0.45)), None, 0.3, HOLDS),
    # not significant but outside the margin: inconclusive, never holds
    ("same", 0.5, cmp(0.27, (-0.6, 1.1), (-0.45, 0.9)), None, 0.3, INCONCLUSIVE),
    # different: the 95% interval wholly outside ±margin, and the verdict says on which side
    ("same", 0.5, cmp(1.5, (0.8, 2.2), (0.9, 2.1)), None, 0.3,
     DOES_NOT_HOLD + ": better than the baseline by more than the margin (95% interval above +0.50)"),
    ("same", 0.5, cmp(-1.5, (-2.2, -0.8), (-2.1, -0.9)), None, 0.3,
     DOES_NOT_HOLD + ": worse than the baseline by more than the margin (95% interval below −0.50)"),
    # no worse: the one-sided lower bound above -margin
    ("no_worse", 0.5, cmp(-0.1, (-0.55, 0.35), (-0.45, 0.3)), None, 0.3, HOLDS),
    ("no_worse", 0.5, cmp(-0.23, (-1.27, 0.54), (-1.1, 0.4)), None, 0.3, INCONCLUSIVE),
    ("no_worse", 0.5, cmp(-2.0, (-2.8, -1.1), (-2.7, -1.2)), None, 0.3, DOES_NOT_HOLD),
    # better by more than the margin: no worse, but not "as good", and the verdict says so
    ("no_worse", 1.2, cmp(2.26, (1.39, 3.06), (1.54, 2.95)), None, 0.4,
     HOLDS + " as no worse; it is better by more than the margin (95% interval above +1.20)"),
    # better, the 95% interval above 0 but reaching into the margin: not worse at all (a claimed cost is not seen)
    ("no_worse", 3.0, cmp(1.87, (0.28, 2.87), (0.58, 2.7)), None, 0.44,
     HOLDS + " as no worse; it is not worse at all (95% interval above 0)"),
    # the 95% interval holds 0: plain "holds"
    ("no_worse", 1.2, cmp(0.6, (-0.1, 1.3), (0.0, 1.2)), None, 0.4, HOLDS),
    # a direction: Holm's p below 0.05 and |Δ| above the seed spread
    ("better", 0, cmp(1.6, (0.9, 2.3), (1.0, 2.2), p=0.002), 0.01, 0.4, HOLDS),
    ("better", 0, cmp(-1.3, (-2.0, -0.6), (-1.9, -0.7), p=0.002), 0.01, 0.4, DOES_NOT_HOLD),
    ("worse", 0, cmp(-5.9, (-7, -5), (-6.8, -5.1), p=0.001), 0.01, 0.4, HOLDS),
    # significant before Holm, not after
    ("better", 0, cmp(0.87, (0.1, 1.6), (0.2, 1.5), p=0.02), 0.08, 0.4, INCONCLUSIVE),
    # the seed spread is larger than Δ: blocked, however small p is
    ("better", 0, cmp(0.5, (0.2, 0.8), (0.25, 0.75), p=0.001), 0.004, 0.6, INCONCLUSIVE),
])
def test_verdict_rule(expect, margin, comparison, p_holm, spread, expected):
    assert verdict(expect, margin, comparison, p_holm, spread) == expected


@pytest.mark.parametrize("expect", ["same", "no_worse", "better", "worse"])
def test_fewer_than_three_seeds_is_never_a_verdict(expect):
    strong = cmp(-8.0, (-9, -7), (-8.8, -7.2), p=0.001, seeds=(1, 5))
    assert verdict(expect, 0.5, strong, 0.001, 0.3).startswith(INCONCLUSIVE + ": 1 seed")


def test_a_length_gap_decided_by_the_brevity_penalty_says_which_way():
    bp_only = cmp(1.34, (0.5, 2.1), (0.6, 2.0), p=0.001, eq=(-0.6, 0.4))
    text = verdict("better", 0, bp_only, 0.004, 0.4, length_row=True)
    assert text.startswith(INCONCLUSIVE) and "brevity penalty" in text and "holds 0" in text
    reversed_at_equal_length = cmp(1.34, (0.5, 2.1), (0.6, 2.0), p=0.001, eq=(-2.6, -0.4))
    text = verdict("better", 0, reversed_at_equal_length, 0.004, 0.4, length_row=True)
    assert text.startswith(INCONCLUSIVE) and "reverses" in text
    both = cmp(2.3, (1.0, 3.6), (1.2, 3.4), p=0.001, eq=(0.5, 3.0))
    assert verdict("better", 0, both, 0.004, 0.4, length_row=True) == HOLDS
    assert verdict("better", 0, bp_only, 0.004, 0.4, length_row=False) == HOLDS


@pytest.mark.parametrize("expect", ["same", "no_worse"])
def test_a_length_gap_beyond_the_margin_decided_by_the_brevity_penalty_says_so(expect):
    # K-only against Shaw on `concat`: 1.4 BLEU below, beyond a 0.32 margin, but better at equal length
    below = dict(delta=-1.43, ci95=(-2.39, -0.49), ci90=(-2.23, -0.64))
    reverses = verdict(expect, 0.32, cmp(**below, eq=(2.09, 6.77)), None, 0.3, length_row=True)
    assert reverses == INCONCLUSIVE + ": the brevity penalty makes the gap (at equal length it reverses)"
    inside = verdict(expect, 0.32, cmp(**below, eq=(-1.5, 0.2)), None, 0.3, length_row=True)
    assert inside.startswith(INCONCLUSIVE + ": only the brevity penalty") and "inside ±0.32" in inside
    # the gap beyond the margin at equal length too, or a row that is not about lengths: it does not hold
    said = DOES_NOT_HOLD + (": worse than the baseline by more than the margin (95% interval below −0.32)"
                            if expect == "same" else "")
    assert verdict(expect, 0.32, cmp(**below, eq=(-3.0, -0.6)), None, 0.3, length_row=True) == said
    assert verdict(expect, 0.32, cmp(**below, eq=(2.09, 6.77)), None, 0.3, length_row=False) == said
    if expect == "same":  # better by more than the margin, but only through the brevity penalty
        above = cmp(1.5, (0.8, 2.2), (0.9, 2.1), eq=(-0.4, 1.1))
        assert verdict(expect, 0.32, above, None, 0.3, length_row=True).startswith(INCONCLUSIVE + ": only the")


def test_bleu_parts_is_vectorised_over_resamples():
    rng = np.random.default_rng(3)
    stats = sentence_stats(noisy(REFS, rng, 0.3), REFS)
    sums = np.stack([stats.sum(0), stats[:10].sum(0)])
    parts = bleu_parts(sums)
    assert parts["bleu"].shape == (2,)
    assert parts["bleu"][1] == pytest.approx(corpus_scores(stats[:10])["bleu"])


def test_the_choices_page_states_the_verdict_rule_the_code_implements():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "choices.md"), encoding="utf-8") as f:
        assert render_verdict_rule(indent="  ") in f.read(), "docs/choices.md: copy VERDICT_RULE's text again"
