"""The claims study's statistics: BLEU and chrF++ from sentence statistics equal sacreBLEU's; Δ's t interval
covers the true Δ in 93-97% of simulated studies at 3 and 5 seeds, where a two-level bootstrap does not;
no verdict depends on a random seed; Holm's correction; and the verdict rule pinned with constructed cases
(equivalence never read from a non-significant difference, a measured sign opposite to the paper's, the
seed-spread guard from the two systems' own spreads, too few seeds for a margin, one seed is never a verdict,
a length row decided by truncation says so)."""
import os

import numpy as np
import pytest
import sacrebleu

from posmix_fairseq.harness.evaluation.claims.statistics import (
    BLEU, CHRF, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, OPPOSITE, RATIO, TRUNCATION, Comparison, bleu_parts, chrf_from_sums,
    chrf_stats, compare, corpus_scores, estimate, holm, render_verdict_rule, score_and_influence, sentence_parts,
    sentence_stats, t_interval, truncation_finding, verdict, welch_t)

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


def test_bleu_and_chrf_from_sentence_statistics_equal_sacrebleu():
    rng = np.random.default_rng(0)
    for drop, cut in ((0.1, 0.0), (0.3, 0.2), (0.6, 0.5)):
        hyps = noisy(REFS, rng, drop, cut)
        ours = corpus_scores(sentence_stats(hyps, REFS))
        theirs = sacrebleu.corpus_bleu(hyps, [REFS])
        assert ours["bleu"] == pytest.approx(theirs.score, abs=1e-9)
        assert ours["bp"] == pytest.approx(theirs.bp, abs=1e-9)
        assert ours["ratio"] == pytest.approx(theirs.sys_len / theirs.ref_len, abs=1e-9)
        assert ours["precisions"] == pytest.approx(theirs.precisions, abs=1e-9)
        chrf = chrf_from_sums(chrf_stats(hyps, REFS).sum(0))
        assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [REFS], word_order=2).score, abs=1e-9)


def test_zero_counts_are_smoothed_as_sacrebleu_does():
    hyps, refs = ["a b", "c"], ["a x y z", "q r s t"]  # no 2-, 3- or 4-gram matches
    assert corpus_scores(sentence_stats(hyps, refs))["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)


def test_no_matching_ngram_at_all_is_bleu_zero_as_in_sacrebleu():
    hyps, refs = ["p q r", "s"], ["a b c d", "e f g h"]
    theirs = sacrebleu.corpus_bleu(hyps, [refs])
    ours = corpus_scores(sentence_stats(hyps, refs))
    assert theirs.score == 0.0 and ours["bleu"] == 0.0 and ours["precisions"] == [0.0] * 4


def test_the_truncation_rate_counts_outputs_under_the_stated_share_of_their_reference():
    refs = ["one two three four five six seven eight nine ten"] * 4
    hyps = ["one two three four five", "one two three four five six", "one", "one two three four five six seven"]
    scores = corpus_scores(sentence_stats(hyps, refs))
    assert scores["truncated"] == pytest.approx(50.0)  # 5 and 1 of 10 words are under 60%; 6 and 7 are not


# ---- the interval's coverage ---------------------------------------------------------------------------------

def simulate(rng, studies, ks, kb, n, sd_seed, sd_pair, sd_inter, delta):
    """Studies with known variances: a sentence's score is the true mean + a sentence difficulty both systems
    share + a system's own sentence effect (sd_pair between the systems) + a seed's offset (sd_seed) + seed-by-
    sentence noise (sd_inter). Returns each run's sentence scores, (studies, k, n) per system."""
    shared = rng.normal(0, 5.0, (studies, 1, n))
    own = rng.normal(0, sd_pair / np.sqrt(2), (2, studies, 1, n))
    ys = 30 + delta + shared + own[0] + rng.normal(0, sd_seed[0], (studies, ks, 1)) + rng.normal(0, sd_inter, (studies, ks, n))
    yb = 30 + shared + own[1] + rng.normal(0, sd_seed[1], (studies, kb, 1)) + rng.normal(0, sd_inter, (studies, kb, n))
    return ys, yb


def our_interval(ys, yb):
    """The page's interval, vectorised over studies (the score is a mean: its influence is the centred score)."""
    vs, vb = ys.mean(-1), yb.mean(-1)
    shared, w_s, w_b = sentence_parts(ys - vs[..., None], yb - vb[..., None])
    return t_interval(*welch_t(vs, vb, shared, ys.shape[-1], w_s, w_b), 0.95)


def two_level_bootstrap(rng, ys, yb, resamples=400, chunk=50):
    """The alternative interval: the two-level percentile bootstrap (each system's seeds with replacement,
    then the sentences, the same for both systems), vectorised over studies."""
    studies, ks, n = ys.shape
    kb = yb.shape[1]
    lo, hi = np.empty(studies), np.empty(studies)
    for c in range(0, studies, chunk):
        s, b = ys[c:c + chunk], yb[c:c + chunk]
        counts = rng.multinomial(n, np.full(n, 1 / n), size=(len(s), resamples)).astype(float)
        ms, mb = np.einsum("brn,bkn->brk", counts, s) / n, np.einsum("brn,bkn->brk", counts, b) / n
        d = (np.take_along_axis(ms, rng.integers(ks, size=(len(s), resamples, ks)), 2).mean(2)
             - np.take_along_axis(mb, rng.integers(kb, size=(len(s), resamples, kb)), 2).mean(2))
        lo[c:c + len(s)], hi[c:c + len(s)] = np.percentile(d, 2.5, axis=1), np.percentile(d, 97.5, axis=1)
    return lo, hi


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_interval_covers_the_true_delta_in_93_to_97_percent_of_simulated_studies(seeds):
    """1,000 simulated studies whose training noise dominates (seed sd 0.6 BLEU; this study's seed spreads
    are 0.1-0.6 on `test`) with test-set noise beside it: the t interval covers the true Δ in 93-97% of them; a
    two-level bootstrap covers it in fewer than 93% (resampling k seeds shows (k − 1)/k of their variance)."""
    rng = np.random.default_rng(7)
    delta = 0.7
    ys, yb = simulate(rng, 1000, seeds, seeds, 60, (0.6, 0.6), 0.8, 0.8, delta)
    lo, hi = our_interval(ys, yb)
    ours = np.mean((lo < delta) & (delta < hi))
    assert 0.93 <= ours <= 0.97, ours
    lo, hi = two_level_bootstrap(rng, ys, yb)
    assert np.mean((lo < delta) & (delta < hi)) < 0.93


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_interval_covers_where_the_seed_by_sentence_noise_dominates(seeds):
    """The study's own mix (measured on `test`: a run's seed-by-sentence sd 0.29 BLEU, the Transformer's seed sd
    0.32, the shared sentence sd 0.1-0.2): covered in 93-97% too, the floor on each seed variance included."""
    rng = np.random.default_rng(7)
    ys, yb = simulate(rng, 1000, seeds, seeds, 60, (0.13, 0.13), 1.16, 2.25, 0.7)
    lo, hi = our_interval(ys, yb)
    assert 0.93 <= np.mean((lo < 0.7) & (0.7 < hi)) <= 0.97


def test_the_influence_of_a_mean_is_its_centred_value_and_bleus_sees_the_sentences():
    rng = np.random.default_rng(4)
    stats = sentence_stats(noisy(REFS, rng, 0.3, 0.2), REFS)
    value, psi = score_and_influence(TRUNCATION, (stats[:, :1] < 0.6 * stats[:, 1:2]).astype(float))
    assert psi == pytest.approx(100 * (stats[:, 0] < 0.6 * stats[:, 1]) - value)
    value, psi = score_and_influence(BLEU, stats)
    assert value == pytest.approx(corpus_scores(stats)["bleu"])
    # the delta method's variance is that of the sentence bootstrap, to within its own Monte Carlo error
    draws = rng.integers(len(stats), size=(4000, len(stats)))
    boot = bleu_parts(stats[draws].sum(1))["bleu"]
    assert np.var(psi, ddof=1) / len(stats) == pytest.approx(np.var(boot), rel=0.15)


# ---- comparisons --------------------------------------------------------------------------------------------

def test_a_comparison_sees_a_clear_gap_and_wider_seed_spreads():
    rng = np.random.default_rng(1)
    good = [sentence_stats(noisy(REFS, rng, 0.05), REFS) for _ in range(3)]
    bad = [sentence_stats(noisy(REFS, rng, 0.5), REFS) for _ in range(3)]
    c = compare([(good, bad, 1.0)])
    assert c.delta > 10 and c.ci95[0] > 0 and c.p < 0.01 and c.seeds == (3, 3)
    same = compare([(good, good, 1.0)])
    assert same.delta == 0 and same.ci95[0] <= 0 <= same.ci95[1] and same.p == 1.0
    spread = [sentence_stats(noisy(REFS, rng, d), REFS) for d in (0.05, 0.3, 0.55)]
    wide = compare([(spread, bad, 1.0)])
    assert wide.ci95[1] - wide.ci95[0] > 2 * (c.ci95[1] - c.ci95[0])
    one = compare([(good[:1], bad, 1.0)])
    assert one.ci95 is None and one.p is None and one.seeds == (1, 3)


def test_chrf_ratio_and_truncation_compare_by_the_same_model():
    rng = np.random.default_rng(5)
    full = [{"bleu": sentence_stats(h, REFS), "chrf": chrf_stats(h, REFS)} for h in
            (noisy(REFS, rng, 0.1) for _ in range(3))]
    cut = [{"bleu": sentence_stats(h, REFS), "chrf": chrf_stats(h, REFS)} for h in
           (noisy(REFS, rng, 0.1, 0.5) for _ in range(3))]
    for metric in (BLEU, CHRF, RATIO):
        c = compare([(cut, full, 1.0)], metric)
        assert c.delta < 0 and c.ci95[1] < 0, metric.name
    trunc = compare([(cut, full, 1.0)], TRUNCATION)
    assert trunc.delta > 50 and trunc.ci95[0] > 0
    mean, ci = estimate(cut, TRUNCATION)
    assert ci[0] <= mean <= ci[1]


def test_a_gap_between_two_sets_is_the_difference_of_the_two_comparisons():
    rng = np.random.default_rng(2)
    a_short = [sentence_stats(noisy(REFS, rng, 0.1), REFS) for _ in range(3)]
    b_short = [sentence_stats(noisy(REFS, rng, 0.15), REFS) for _ in range(3)]
    a_long = [sentence_stats(noisy(REFS, rng, 0.1), REFS) for _ in range(3)]
    b_long = [sentence_stats(noisy(REFS, rng, 0.6), REFS) for _ in range(3)]
    long_ = compare([(a_long, b_long, 1.0)])
    short = compare([(a_short, b_short, 1.0)])
    gap = compare([(a_long, b_long, 1.0), (a_short, b_short, -1.0)])
    assert gap.delta == pytest.approx(long_.delta - short.delta)
    assert gap.ci95[0] > 0


def test_no_verdict_depends_on_a_random_seed():
    """Over 5 seeds of numpy's random state the comparison is the same to the last bit (nothing is resampled),
    where a two-level bootstrap's p at 2,000 resamples crosses 0.05 as its seed changes."""
    rng = np.random.default_rng(3)
    a = [sentence_stats(noisy(REFS, rng, 0.2), REFS) for _ in range(3)]
    b = [sentence_stats(noisy(REFS, rng, 0.3), REFS) for _ in range(3)]
    results = []
    for seed in range(5):
        np.random.seed(seed)
        results.append(compare([(a, b, 1.0)]))
    assert all(r == results[0] for r in results)
    ys, yb = simulate(np.random.default_rng(0), 1, 3, 3, 60, (0.5, 0.5), 1.0, 1.0, 0.3)
    ps = []
    for seed in range(5):
        sub = np.random.default_rng(seed)
        counts = sub.multinomial(60, np.full(60, 1 / 60), size=2000).astype(float)
        d = (((counts @ ys[0].T) / 60)[np.arange(2000)[:, None], sub.integers(3, size=(2000, 3))].mean(1)
             - ((counts @ yb[0].T) / 60)[np.arange(2000)[:, None], sub.integers(3, size=(2000, 3))].mean(1))
        ps.append(2 * (1 + min((d <= 0).sum(), (d >= 0).sum())) / 2001)
    assert min(ps) < 0.05 < max(ps)  # the bootstrap's verdict at 5% turns on its seed


def test_holm():
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.5, "b": 0.2}) == pytest.approx({"b": 0.4, "a": 0.5})  # never decreasing along the order


# ---- the verdict rule ---------------------------------------------------------------------------------------

def cmp(delta, ci95, ci90, p=0.5, seeds=(3, 3), sd=(0.3, 0.3), se=None, df=10.0):
    se = se if se is not None else (ci95[1] - ci95[0]) / 4.46  # t(0.975, 10) = 2.23
    return Comparison(delta=delta, ci95=ci95, ci90=ci90, p=p, se=se, df=df, seeds=seeds, sd=sd)


@pytest.mark.parametrize("expect, margin, comparison, p_holm, expected", [
    # equality: the 90% interval inside ±margin
    ("same", 1.0, cmp(0.1, (-0.5, 0.6), (-0.4, 0.45)), None, HOLDS),
    # not significant but outside the margin: inconclusive, never holds
    ("same", 1.0, cmp(0.27, (-1.2, 1.9), (-0.9, 1.5), se=0.3), None, INCONCLUSIVE),
    # different: the 95% interval wholly outside ±margin, and the verdict says on which side
    ("same", 1.0, cmp(2.5, (1.8, 3.2), (1.9, 3.1)), None,
     DOES_NOT_HOLD + ": better than the baseline by more than the margin (95% interval above +1.00)"),
    ("same", 1.0, cmp(-2.5, (-3.2, -1.8), (-3.1, -1.9)), None,
     DOES_NOT_HOLD + ": worse than the baseline by more than the margin (95% interval below −1.00)"),
    # no worse: the one-sided lower bound above -margin
    ("no_worse", 1.0, cmp(-0.1, (-0.9, 0.7), (-0.8, 0.6)), None, HOLDS),
    ("no_worse", 1.0, cmp(-0.9, (-2.5, 0.7), (-2.2, 0.4), se=0.3), None, INCONCLUSIVE),
    ("no_worse", 1.0, cmp(-3.0, (-3.8, -2.1), (-3.7, -2.2)), None, DOES_NOT_HOLD),
    ("no_worse", 1.0, cmp(2.26, (1.39, 3.06), (1.54, 2.95)), None,
     HOLDS + " as no worse; it is better by more than the margin (95% interval above +1.00)"),
    ("no_worse", 3.0, cmp(1.87, (0.28, 2.87), (0.58, 2.7)), None,
     HOLDS + " as no worse; it is not worse at all (95% interval above 0)"),
    # a direction: Holm's p below 0.05 and the claimed sign
    ("better", 0, cmp(1.6, (0.9, 2.3), (1.0, 2.2), p=0.002), 0.01, HOLDS),
    ("worse", 0, cmp(-5.9, (-7, -5), (-6.8, -5.1), p=0.001), 0.01, HOLDS),
    # the other sign on the same evidence: does not hold, and says the sign is the opposite
    ("better", 0, cmp(-1.3, (-2.0, -0.6), (-1.9, -0.7), p=0.002), 0.01, OPPOSITE),
    # significant before Holm, not after; the measured sign opposite is said
    ("better", 0, cmp(0.87, (0.1, 1.6), (0.2, 1.5), p=0.02), 0.08, INCONCLUSIVE),
    ("worse", 0, cmp(0.87, (0.1, 1.6), (0.2, 1.5), p=0.02), 0.08,
     INCONCLUSIVE + "; the measured sign is opposite to the paper's"),
])
def test_verdict_rule(expect, margin, comparison, p_holm, expected):
    assert verdict(expect, margin, comparison, p_holm) == expected


def test_the_seed_spread_guard_reads_the_two_systems_own_spreads_of_a_mean():
    c = cmp(0.5, (0.2, 0.8), (0.25, 0.75), p=0.001, seeds=(3, 5), sd=(0.6, 0.9))
    assert c.seed_spread == pytest.approx(np.sqrt(0.6 ** 2 / 3 + 0.9 ** 2 / 5))  # the seed part of Δ's error
    assert verdict("better", 0, c, 0.004) == INCONCLUSIVE  # |Δ| 0.5 below it: blocked, however small p is
    wide = cmp(0.5, (0.2, 0.8), (0.25, 0.75), p=0.001, seeds=(3, 5), sd=(0.3, 0.3))
    assert verdict("better", 0, wide, 0.004) == HOLDS  # smaller spreads: their mean's error is below |Δ|


def test_an_inconclusive_equivalence_says_when_the_seeds_are_too_few_for_the_margin():
    c = cmp(0.2, (-1.5, 1.9), (-1.1, 1.5), se=0.76, df=4.0)
    text = verdict("same", 1.0, c, None)
    assert text.startswith(INCONCLUSIVE + ": too few seeds for ±1.00") and f"±{c.smallest_margin():.2f}" in text
    small = cmp(0.9, (-0.1, 1.9), (0.1, 1.7), se=0.2, df=4.0)
    assert verdict("same", 1.0, small, None) == INCONCLUSIVE  # the seeds could show ±1, this Δ does not


@pytest.mark.parametrize("expect", ["same", "no_worse", "better", "worse"])
def test_fewer_than_three_seeds_is_never_a_verdict(expect):
    strong = cmp(-8.0, (-9, -7), (-8.8, -7.2), p=0.001, seeds=(1, 5))
    assert verdict(expect, 0.5, strong, 0.001).startswith(INCONCLUSIVE + ": 1 seed")


def test_a_length_row_decided_by_truncation_says_so_as_its_finding():
    bleu = cmp(2.66, (1.2, 4.1), (1.5, 3.8), p=0.001)
    trunc = cmp(-22.7, (-30.0, -15.0), (-28.0, -17.0))
    text = truncation_finding(bleu, trunc, ("Shaw", "Transformer"), (9.0, 31.7), "concat")
    assert text.startswith("the finding is when the models stop: Transformer stops early") and "31.7% of `concat`" in text
    with_lengths = truncation_finding(bleu, trunc, ("Shaw", "Transformer"), (9.0, 31.7), "concat", (0.72, 0.62))
    assert with_lengths.endswith("; its outputs are 0.62 of the reference's length, Shaw's 0.72")
    assert truncation_finding(bleu, cmp(-1.0, (-3.0, 1.0), (-2.5, 0.5)), ("a", "b"), (1, 2), "long") == ""
    assert truncation_finding(bleu, cmp(5.0, (3.0, 7.0), (3.5, 6.5)), ("a", "b"), (9, 4), "long") == ""


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
