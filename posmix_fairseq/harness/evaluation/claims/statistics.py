"""The study's statistics: BLEU from sentence statistics, the two-level bootstrap over seeds and sentences,
Holm's correction, and the verdict rule.

**Scores.** Each hypothesis gets sacreBLEU's sufficient statistics (13a tokenisation): its length, its
reference's length, and the matched and total n-grams for n = 1..4. Corpus BLEU over any selection of
sentences is the sum of those rows put through sacreBLEU's formula (:func:`bleu_parts`; equal to
``sacrebleu.corpus_bleu`` to 1e-9, tested), so a resample costs a matrix product instead of a re-tokenisation.
BLEU's brevity penalty, length ratio and precisions come from the same sums; "BLEU at equal length" is BLEU
without its brevity penalty (the geometric mean of the four precisions), which separates a gap in what the
words are from a gap in when the model stops (PEA Tables 2-3 read length generalisation from BLEU alone).

**The test.** A system trained with k seeds gives k corpus BLEUs; its score is their mean. The difference
Δ = mean(system) - mean(baseline) is resampled at two levels, B times: first each system's seeds, drawn with
replacement from its own; then the sentences, drawn with replacement, the same draw for both systems (the
comparison is paired on sentences, as sacreBLEU's paired bootstrap is). So the interval sees the noise of
training (which seed) and of the test set (which sentences). With 3 to 5 seeds the seed level understates
training noise (the bootstrap of k values has (k-1)/k of their variance), which is why a direction must also
exceed the measured seed spread (:func:`verdict`). The p-value of a direction is the two-sided bootstrap
p-value, (1 + the resamples on the far side of 0) / (B + 1), doubled; Holm's step-down correction runs over
the page's directional rows, each comparison counted once (:func:`holm`).
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

#: the columns of a sentence-statistics row
SYS_LEN, REF_LEN, CORRECT, TOTAL = 0, 1, slice(2, 6), slice(6, 10)
MIN_SEEDS = 3  # a verdict needs at least this many seeds of each system


def sentence_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(n, 10) sacreBLEU sufficient statistics (13a): hypothesis length, reference length, correct and total
    1-4-grams."""
    import sacrebleu  # tenths of a second: only when sentences are scored

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    bleu = sacrebleu.BLEU(effective_order=True)  # changes a sentence's score, not its counts: no warning per line
    rows = []
    for h, r in zip(hyps, refs):
        s = bleu.sentence_score(h, [r])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.asarray(rows, dtype=np.float64).reshape(len(hyps), 10)


def bleu_parts(sums: np.ndarray) -> Dict[str, np.ndarray]:
    """sacreBLEU's corpus BLEU (exponential smoothing of zero counts) from summed statistics of shape (..., 10):
    BLEU, its brevity penalty, the length ratio hypothesis / reference, the four precisions (%), and BLEU at
    equal length (without the brevity penalty)."""
    sums = np.asarray(sums, dtype=np.float64)
    correct, total = sums[..., CORRECT], sums[..., TOTAL]
    zero = correct == 0
    smooth = np.cumprod(np.where(zero, 2.0, 1.0), axis=-1)  # sacreBLEU 'exp': 2, 4, 8 ... at each zero count
    with np.errstate(divide="ignore", invalid="ignore"):
        precisions = np.where(zero, 100.0 / (smooth * total), 100.0 * correct / total)
        precisions = np.where(total > 0, precisions, 0.0)
        geo = np.exp(np.mean(np.log(np.maximum(precisions, 1e-300)), axis=-1))
        geo = np.where((precisions > 0).all(axis=-1), geo, 0.0)
        sys_len, ref_len = sums[..., SYS_LEN], sums[..., REF_LEN]
        bp = np.where(sys_len >= ref_len, 1.0, np.where(sys_len > 0, np.exp(1 - ref_len / np.maximum(sys_len, 1e-300)), 0.0))
        ratio = sys_len / ref_len
    return {"bleu": bp * geo, "bp": bp, "ratio": ratio, "precisions": precisions, "bleu_equal_length": geo}


def corpus_scores(stats: np.ndarray) -> dict:
    """BLEU and its parts for one run's selected sentences (plain floats, for result.json and the page)."""
    parts = bleu_parts(stats.sum(axis=0))
    return {"bleu": float(parts["bleu"]), "bp": float(parts["bp"]), "ratio": float(parts["ratio"]),
            "precisions": [float(p) for p in parts["precisions"]], "bleu_equal_length": float(parts["bleu_equal_length"]),
            "sys_len": int(stats[:, SYS_LEN].sum()), "ref_len": int(stats[:, REF_LEN].sum()), "sentences": len(stats)}


@dataclass(frozen=True)
class Comparison:
    """system - baseline over seeds and sentences: Δ (point estimate), its intervals, p, the seed spreads."""
    delta: float
    ci95: tuple
    ci90: tuple
    p: float
    delta_equal_length: float     # the same comparison without the brevity penalty
    ci95_equal_length: tuple
    seeds: tuple                   # (system's, baseline's)
    sd: tuple                      # their seed standard deviations of BLEU (None below 2 seeds)
    resamples: int


def _seed_sd(values: np.ndarray) -> Optional[float]:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def compare(terms: List[tuple], resamples: int = 1000, seed: int = 12345) -> Comparison:
    """The two-level bootstrap of Δ = Σ weight · (mean BLEU(system) - mean BLEU(baseline)) over ``terms``, each
    (system runs, baseline runs, weight): one (n, 10) statistics array per training seed, the same n sentences
    in the same order within a term. One term is a plain comparison; two terms with weights +1 and -1 on two
    sets ask whether a gap changes between them (the same models: the seeds are drawn once for both sets,
    the sentences of each set on their own)."""
    rng = np.random.default_rng(seed)
    ks, kb = len(terms[0][0]), len(terms[0][1])
    if any(len(t[0]) != ks or len(t[1]) != kb for t in terms):
        raise ValueError("every term must hold the same seeds of each system")
    pick_s, pick_b = rng.integers(ks, size=(resamples, ks)), rng.integers(kb, size=(resamples, kb))
    d = np.zeros(resamples)
    d_eq = np.zeros(resamples)
    delta = delta_eq = 0.0
    for system, baseline, weight in terms:
        n = len(system[0])
        if any(len(s) != n for s in (*system, *baseline)):
            raise ValueError("every run of a comparison must score the same sentences")
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)  # sentence draws

        def per_seed(runs):  # (B, k): BLEU and BLEU at equal length of every seed on every sentence draw
            parts = bleu_parts(np.stack([counts @ s for s in runs], axis=1))
            return parts["bleu"], parts["bleu_equal_length"]

        (sys_bleu, sys_eq), (base_bleu, base_eq) = per_seed(system), per_seed(baseline)
        d += weight * (np.take_along_axis(sys_bleu, pick_s, 1).mean(1) - np.take_along_axis(base_bleu, pick_b, 1).mean(1))
        d_eq += weight * (np.take_along_axis(sys_eq, pick_s, 1).mean(1) - np.take_along_axis(base_eq, pick_b, 1).mean(1))
        full = {name: [bleu_parts(s.sum(0)) for s in runs] for name, runs in (("s", system), ("b", baseline))}
        delta += weight * (np.mean([p["bleu"] for p in full["s"]]) - np.mean([p["bleu"] for p in full["b"]]))
        delta_eq += weight * (np.mean([p["bleu_equal_length"] for p in full["s"]])
                              - np.mean([p["bleu_equal_length"] for p in full["b"]]))
    first_s = np.array([float(bleu_parts(s.sum(0))["bleu"]) for s in terms[0][0]])
    first_b = np.array([float(bleu_parts(s.sum(0))["bleu"]) for s in terms[0][1]])
    below, above = int((d <= 0).sum()), int((d >= 0).sum())
    return Comparison(delta=float(delta), ci95=(float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))),
                      ci90=(float(np.percentile(d, 5)), float(np.percentile(d, 95))),
                      p=min(1.0, 2 * (1 + min(below, above)) / (resamples + 1)),
                      delta_equal_length=float(delta_eq),
                      ci95_equal_length=(float(np.percentile(d_eq, 2.5)), float(np.percentile(d_eq, 97.5))),
                      seeds=(ks, kb), sd=(_seed_sd(first_s), _seed_sd(first_b)), resamples=resamples)


def holm(p_values: Dict[str, float]) -> Dict[str, float]:
    """Holm's step-down adjusted p-values (Holm 1979): the i-th smallest of m is multiplied by m - i + 1, and
    adjusted values never decrease along that order."""
    order = sorted(p_values, key=p_values.get)
    m, running, adjusted = len(order), 0.0, {}
    for i, key in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[key]))
        adjusted[key] = running
    return adjusted


HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold at this scale", "inconclusive at this scale"

#: The verdict rule in words, one line a case: :func:`verdict` implements it, the page's header and
#: docs/choices.md print it (tests/test_claims_statistics.py checks the latter's copy).
VERDICT_RULE = (
    f"*{HOLDS}* and *{DOES_NOT_HOLD}* need at least {MIN_SEEDS} seeds of each system; everything else is "
    f"*{INCONCLUSIVE}*, a verdict of its own.",
    "\"Same\" (equivalence: two one-sided tests at 5%) holds when the 90% interval of Δ lies inside ±margin, and "
    "does not hold when the 95% interval lies wholly outside it, and says on which side.",
    "\"No worse\" holds when the one-sided 95% lower bound (the 90% interval's lower end) is above −margin, and "
    "says so when the system is better by more than the margin (its 95% interval above +margin: no worse, but "
    "not \"as good\" or \"almost identical\"), or not worse at all (its 95% interval above 0: a claimed cost "
    "within the margin is not seen); it does not hold when the one-sided 95% upper bound is below −margin.",
    "A direction (\"better\", \"worse\") holds when Holm's p < 0.05 over the page's directional rows (each "
    "comparison counted once) and |Δ| exceeds the seed spread (the largest seed sd of the two systems and the "
    "Transformer on that set), with the claimed sign; it does not hold on the same evidence with the other sign.",
    "A length row (`long`, `concat`, held-out lengths) whose decided direction BLEU at equal length (without the "
    "brevity penalty) does not share is inconclusive, and says why: only the brevity penalty makes the gap "
    "significant (at equal length the 95% interval holds 0), or the brevity penalty makes the gap and at equal "
    "length it reverses. So is a length row whose \"same\" or \"no worse\" fails by a gap beyond the margin "
    "that BLEU at equal length does not share (its 95% interval not wholly beyond the margin on that side).",
)


def render_verdict_rule(indent: str = "") -> str:
    """:data:`VERDICT_RULE` as a Markdown list, each line prefixed by ``indent``."""
    return "\n".join(f"{indent}- {case}" for case in VERDICT_RULE)


def verdict(expect: str, margin: float, c: Comparison, p_holm: Optional[float], spread: float,
            length_row: bool = False) -> str:
    """The verdict of a BLEU claim (Δ = system - baseline, its bootstrap intervals, Holm's p, the seed spread),
    by the rule :data:`VERDICT_RULE` states (the page's header and docs/choices.md print that text)."""
    if min(c.seeds) < MIN_SEEDS:
        return f"{INCONCLUSIVE}: {min(c.seeds)} seed{'s' if min(c.seeds) > 1 else ''} ({MIN_SEEDS} needed)"
    lo95, hi95 = c.ci95
    lo90, hi90 = c.ci90
    if expect == "same":
        if -margin < lo90 and hi90 < margin:
            return HOLDS
        if not (lo95 > margin or hi95 < -margin):
            return INCONCLUSIVE
        side = (f"better than the baseline by more than the margin (95% interval above +{margin:.2f})" if lo95 > margin
                else f"worse than the baseline by more than the margin (95% interval below −{margin:.2f})")
        return _unless_brevity_penalty(f"{DOES_NOT_HOLD}: {side}", c, margin, length_row)
    if expect == "no_worse":
        if lo95 > margin:
            return f"{HOLDS} as no worse; it is better by more than the margin (95% interval above +{margin:.2f})"
        if lo95 > 0:
            return f"{HOLDS} as no worse; it is not worse at all (95% interval above 0)"
        if lo90 > -margin:
            return HOLDS
        return _unless_brevity_penalty(DOES_NOT_HOLD, c, margin, length_row) if hi90 < -margin else INCONCLUSIVE
    sign = 1 if expect == "better" else -1
    if p_holm is None or p_holm >= 0.05 or abs(c.delta) <= spread:
        return INCONCLUSIVE
    decided = HOLDS if c.delta * sign > 0 else DOES_NOT_HOLD
    return _unless_brevity_penalty(decided, c, 0.0, length_row)


def _unless_brevity_penalty(decided: str, c: Comparison, margin: float, length_row: bool) -> str:
    """A verdict decided by a gap beyond ±margin (0 for a direction), unless on a length row BLEU at equal length
    (its 95% interval) does not lie beyond the margin on the gap's side: then inconclusive, saying why."""
    if not length_row:
        return decided
    lo, hi = c.ci95_equal_length
    if (hi < -margin) if c.delta < 0 else (lo > margin):
        return decided
    if (lo > 0) if c.delta < 0 else (hi < 0):
        return f"{INCONCLUSIVE}: the brevity penalty makes the gap (at equal length it reverses)"
    if margin == 0:
        return (f"{INCONCLUSIVE}: only the brevity penalty makes the gap significant (at equal length its interval "
                "holds 0)")
    return (f"{INCONCLUSIVE}: only the brevity penalty puts the gap beyond the margin (at equal length its "
            f"interval reaches inside ±{margin:.2f})")
