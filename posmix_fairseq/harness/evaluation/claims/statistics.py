"""The study's statistics: corpus scores from sentence statistics, Δ's interval over seeds and sentences,
Holm's correction, and the verdict rule.

**Scores.** Each hypothesis gets sacreBLEU's sufficient statistics: for BLEU (13a tokenisation) its length,
its reference's length, and the matched and total n-grams for n = 1..4; for chrF++ the hypothesis, reference
and matched counts of character 1-6-grams and word 1-2-grams. A corpus score over any selection of sentences
is the sum of those rows put through sacreBLEU's formula (:func:`bleu_parts`, :func:`chrf_from_sums`; equal to
``sacrebleu.corpus_bleu`` and ``corpus_chrf`` to 1e-9, tested). The length ratio (hypothesis / reference
tokens) and the truncation rate (the share of hypotheses shorter than :data:`TRUNCATION_FRACTION` of their
reference, in the same tokens) come from the BLEU rows.

**The interval.** A system trained with k seeds gives k corpus scores; its score is their mean, and
Δ = mean(system) − mean(baseline). Two sources of noise enter Δ: training (which seed) and the test set
(which sentences). Δ's variance is estimated as Welch's, from each system's own seed-to-seed variance
(s²/k; it already holds the part of the test-set noise that differs between seeds, and is never taken below
that part, which the sentences measure: a few seeds that agree by chance do not narrow Δ), plus the part of
the test-set noise that the seeds share, which seed-to-seed variance cannot see: the variance of the paired,
seed-averaged sentence contributions to Δ, less their seed-by-sentence part (already counted in s²/k).
Each run's sentence contributions are its jackknife influence values, (n − 1)(score − score without sentence
i), exact for a mean and the delta method's linearisation of a corpus score. The interval is t-based, with the
Welch-Satterthwaite degrees of freedom of the three variance parts; p is its two-sided t p-value (exact given
the model: nothing is resampled, so no verdict depends on a random seed). :func:`compare` gives Δ; two terms
with weights +1 and −1 on two sets ask whether a gap changes between them (the same seeds in both).
"""
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

#: the columns of a BLEU sentence-statistics row
SYS_LEN, REF_LEN, CORRECT, TOTAL = 0, 1, slice(2, 6), slice(6, 10)
MIN_SEEDS = 3  # a verdict needs at least this many seeds of each system
#: a hypothesis shorter than this fraction of its reference (13a tokens) counts as truncated
TRUNCATION_FRACTION = 0.6
CHRF_ORDERS = 8  # chrF++: character 1-6-grams and word 1-2-grams, (hypothesis, reference, match) each


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


def chrf_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(n, 24) sacreBLEU's chrF++ statistics (character 1-6-grams, word 1-2-grams): per order the hypothesis,
    reference and matched counts."""
    # sacreBLEU's public n-gram helpers (tenths of a second to import: only when sentences are scored)
    from sacrebleu.metrics.helpers import extract_all_char_ngrams, extract_word_ngrams

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")

    def ngrams(sentence: str) -> list:
        words = chrf_words(sentence)
        return extract_all_char_ngrams(sentence, 6) + [extract_word_ngrams(words, n) for n in (1, 2)]

    rows = []
    for h, r in zip(hyps, refs):
        row = []
        for hyp, ref in zip(ngrams(h), ngrams(r)):
            hyp_count = sum(hyp.values())
            row += [hyp_count if ref else 0, sum(ref.values()), sum(min(c, ref[g]) for g, c in hyp.items() if g in ref)]
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(hyps), 3 * CHRF_ORDERS)


#: the punctuation chrF++ separates from a word's ends before counting word n-grams (sacreBLEU's, from chrF's own
#: implementation by Popović)
CHRF_PUNCTUATION = set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~')


def chrf_words(sentence: str) -> List[str]:
    """chrF++'s words: whitespace tokens, one punctuation mark split off the end of a longer token, or else off
    its start (as sacreBLEU does: ``(hi)`` gives ``(hi`` and ``)``)."""
    words: List[str] = []
    for w in sentence.split():
        if len(w) > 1 and w[-1] in CHRF_PUNCTUATION:
            words += [w[:-1], w[-1]]
        elif len(w) > 1 and w[0] in CHRF_PUNCTUATION:
            words += [w[0], w[1:]]
        else:
            words.append(w)
    return words


def signatures() -> Dict[str, str]:
    """sacreBLEU's signatures of the two scores every claims figure uses."""
    import sacrebleu  # tenths of a second: only when a page is written

    out = {}
    for name, metric in (("bleu", sacrebleu.BLEU()), ("chrf++", sacrebleu.CHRF(word_order=2))):
        metric.corpus_score(["a"], [["a"]])  # one reference per sentence: the signature's nrefs is known after a score
        out[name] = str(metric.get_signature())
    return out


def bleu_parts(sums: np.ndarray) -> Dict[str, np.ndarray]:
    """sacreBLEU's corpus BLEU (exponential smoothing of zero counts; 0 where no n-gram matches at all, as
    sacreBLEU returns) from summed statistics of shape (..., 10): BLEU, its brevity penalty, the length ratio
    hypothesis / reference and the four precisions (%)."""
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
    no_match = (correct == 0).all(axis=-1)  # sacreBLEU's early stop: BLEU 0 and every precision 0
    return {"bleu": np.where(no_match, 0.0, bp * geo), "bp": bp, "ratio": ratio,
            "precisions": np.where(no_match[..., None], 0.0, precisions)}


def chrf_from_sums(sums: np.ndarray) -> np.ndarray:
    """sacreBLEU's chrF++ (beta 2, its default effective-order averaging) from summed statistics (..., 24)."""
    sums = np.asarray(sums, dtype=np.float64)
    hyp, ref, match = sums[..., 0::3], sums[..., 1::3], sums[..., 2::3]
    valid = (hyp > 0) & (ref > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(valid, match / np.where(hyp > 0, hyp, 1.0), 0.0)
        rec = np.where(valid, match / np.where(ref > 0, ref, 1.0), 0.0)
        order = valid.sum(axis=-1)
        avg_p = np.where(order > 0, prec.sum(-1) / np.maximum(order, 1), 0.0)
        avg_r = np.where(order > 0, rec.sum(-1) / np.maximum(order, 1), 0.0)
        factor = 4.0  # beta = 2
        denom = factor * avg_p + avg_r
        score = np.where(avg_p + avg_r > 0, 100 * (1 + factor) * avg_p * avg_r / np.where(denom > 0, denom, 1.0), 0.0)
    return score


# ---- the metrics a comparison reads: a corpus score as a function of summed sentence rows ------------------

@dataclass(frozen=True)
class Metric:
    """A corpus score: ``score(sums, n)`` of summed sentence rows of the kind ``rows`` ('bleu' or 'chrf'),
    vectorised over leading axes; n is the number of sentences summed."""
    name: str
    rows: str
    score: Callable[[np.ndarray, np.ndarray], np.ndarray]
    percent: bool = False  # shown as a percentage of sentences


def _truncated(rows: np.ndarray) -> np.ndarray:
    return (rows[..., SYS_LEN] < TRUNCATION_FRACTION * rows[..., REF_LEN]).astype(np.float64)


BLEU = Metric("BLEU", "bleu", lambda s, n: bleu_parts(s)["bleu"])
CHRF = Metric("chrF++", "chrf", lambda s, n: chrf_from_sums(s))
RATIO = Metric("length ratio", "bleu", lambda s, n: s[..., SYS_LEN] / s[..., REF_LEN])
#: the truncation rate reads a column of its own: the BLEU rows with the truncation flag appended (:func:`rows_of`)
TRUNCATION = Metric("truncation rate", "truncation", lambda s, n: 100 * s[..., 0] / n, percent=True)


def precision_metric(order: int) -> Metric:
    return Metric(f"{order}-gram precision", "bleu", lambda s, n: bleu_parts(s)["precisions"][..., order - 1])


def rows_of(metric: Metric, run_rows: Dict[str, np.ndarray]) -> np.ndarray:
    """The sentence rows a metric sums, from a run's rows by kind ('bleu', 'chrf')."""
    if metric.rows == "truncation":
        return _truncated(run_rows["bleu"])[..., None]
    return run_rows[metric.rows]


def score_and_influence(metric: Metric, rows: np.ndarray):
    """A run's corpus score on its n sentences and each sentence's jackknife influence on it,
    (n − 1)(score − score without the sentence): for a mean, the sentence's value minus the mean."""
    rows = np.asarray(rows, dtype=np.float64)
    n = len(rows)
    total = rows.sum(0)
    value = float(metric.score(total, np.float64(n)))
    if n < 2:
        return value, np.zeros(n)
    without = metric.score(total[None, :] - rows, np.float64(n - 1))
    return value, (n - 1) * (value - without)


def corpus_scores(stats: np.ndarray) -> dict:
    """BLEU and its parts for one run's selected sentences (plain floats, for result.json and the page)."""
    parts = bleu_parts(stats.sum(axis=0))
    return {"bleu": float(parts["bleu"]), "bp": float(parts["bp"]), "ratio": float(parts["ratio"]),
            "precisions": [float(p) for p in parts["precisions"]],
            "truncated": float(100 * _truncated(stats).mean()) if len(stats) else 0.0,
            "sys_len": int(stats[:, SYS_LEN].sum()), "ref_len": int(stats[:, REF_LEN].sum()), "sentences": len(stats)}


# ---- the interval ----------------------------------------------------------------------------------------------

def _t():
    from scipy import stats  # a second's import: only when a comparison is made

    return stats.t


def sentence_parts(psi_s: np.ndarray, psi_b: Optional[np.ndarray] = None) -> tuple:
    """From sentence influence values (..., k, n) of each system's seeds (one system alone when ``psi_b`` is
    None): (the test-set variance of Δ that the seeds share, each system's seed-by-sentence variance of one
    run's score). The latter is the variance over n of a seed's influences around the seeds' mean (unbiased
    over k seeds, divided by n); the former is the variance of the paired, seed-averaged influences divided by
    n, less that part of each system over its k seeds (which the seed-to-seed variance already holds), floored
    at 0. Vectorised over leading axes."""
    n = psi_s.shape[-1]

    def within(psi):
        k = psi.shape[-2]
        if k < 2:
            return np.zeros(psi.shape[:-2])
        centred = psi - psi.mean(-2, keepdims=True)
        return np.var(centred, axis=-1, ddof=1).sum(-1) / (k - 1) / n

    w_s = within(psi_s)
    w_b = within(psi_b) if psi_b is not None else None
    paired = psi_s.mean(-2) - (psi_b.mean(-2) if psi_b is not None else 0.0)
    shared = np.var(paired, axis=-1, ddof=1) / n - w_s / psi_s.shape[-2]
    if psi_b is not None:
        shared = shared - w_b / psi_b.shape[-2]
    return np.maximum(shared, 0.0), w_s, w_b


def shared_sentence_variance(psi_s: np.ndarray, psi_b: Optional[np.ndarray] = None) -> np.ndarray:
    """The first of :func:`sentence_parts`: the test-set variance of Δ that the seeds share."""
    return sentence_parts(psi_s, psi_b)[0]


def welch_t(values_s: np.ndarray, values_b: Optional[np.ndarray], sentence_var: np.ndarray, sentences: int,
            floor_s=None, floor_b=None):
    """Δ = mean(values_s) − mean(values_b) (or the mean of values_s alone), its standard error and the
    Welch-Satterthwaite degrees of freedom of the seed parts (s²/k each, k − 1 degrees) and the shared
    sentence part (n − 1 degrees). A system's seed variance is at least its seed-by-sentence variance
    (``floor_s``, ``floor_b``: measured over n sentences, so it counts n − 1 degrees where it is the larger):
    a few seeds that agree by chance cannot make Δ surer than the sentences allow. Vectorised over leading
    axes; needs 2 seeds of each system."""
    def seed_part(values, floor):
        k = values.shape[-1]
        var = np.var(values, axis=-1, ddof=1)
        if floor is None:
            return var / k, np.full(np.shape(var), k - 1.0)
        return np.maximum(var, floor) / k, np.where(var >= floor, k - 1.0, max(sentences - 1, 1))

    parts = [seed_part(values_s, floor_s)]
    delta = values_s.mean(-1)
    if values_b is not None:
        parts.append(seed_part(values_b, floor_b))
        delta = delta - values_b.mean(-1)
    parts.append((sentence_var, max(sentences - 1, 1)))
    v = sum(p for p, _ in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = v ** 2 / sum(p ** 2 / d for p, d in parts)
    df = np.where(v > 0, df, np.inf)
    return delta, np.sqrt(v), df


def t_interval(delta, se, df, level: float):
    q = _t().ppf(0.5 + level / 2, df)
    return delta - q * se, delta + q * se


@dataclass(frozen=True)
class Comparison:
    """system − baseline over seeds and sentences: Δ, its t intervals (None below 2 seeds of a system), the
    two-sided p, the seed spreads."""
    delta: float
    ci95: Optional[tuple]
    ci90: Optional[tuple]
    p: Optional[float]
    se: Optional[float]
    df: Optional[float]
    seeds: tuple                   # (system's, baseline's)
    sd: tuple                      # their seed standard deviations (None below 2 seeds)
    metric: str = "BLEU"

    @property
    def seed_spread(self) -> Optional[float]:
        """The seed part of Δ's standard error, √(sd_s²/k_s + sd_b²/k_b), from the two systems' own seeds."""
        if None in self.sd:
            return None
        return float(np.sqrt(self.sd[0] ** 2 / self.seeds[0] + self.sd[1] ** 2 / self.seeds[1]))

    def smallest_margin(self) -> Optional[float]:
        """The smallest equivalence margin these seeds could show if Δ were 0: the 90% interval's half-width."""
        if self.se is None:
            return None
        return float(_t().ppf(0.95, self.df) * self.se)


def _seed_sd(values: np.ndarray) -> Optional[float]:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def compare(terms: List[tuple], metric: Metric = BLEU) -> Comparison:
    """Δ = Σ weight · (mean score(system) − mean score(baseline)) over ``terms``, each (system runs, baseline
    runs, weight): per run, its sentence rows by kind ({'bleu': (n, 10), 'chrf': (n, 24)}) or a plain (n, 10)
    BLEU array; the same n sentences in the same order within a term. A gap row's two terms hold the same
    seeds; its per-seed values are the weighted sums over terms, and the terms' sentences are independent."""
    ks, kb = len(terms[0][0]), len(terms[0][1])
    if any(len(t[0]) != ks or len(t[1]) != kb for t in terms):
        raise ValueError("every term must hold the same seeds of each system")
    values_s, values_b = np.zeros(ks), np.zeros(kb)
    sentence_var, floor_s, floor_b, sentences = 0.0, 0.0, 0.0, None
    for system, baseline, weight in terms:
        n = len(_rows(system[0], metric))
        if any(len(_rows(r, metric)) != n for r in (*system, *baseline)):
            raise ValueError("every run of a comparison must score the same sentences")
        s = [score_and_influence(metric, _rows(r, metric)) for r in system]
        b = [score_and_influence(metric, _rows(r, metric)) for r in baseline]
        values_s += weight * np.array([v for v, _ in s])
        values_b += weight * np.array([v for v, _ in b])
        if ks >= 2 and kb >= 2:
            shared, w_s, w_b = sentence_parts(np.stack([p for _, p in s]), np.stack([p for _, p in b]))
            sentence_var += weight ** 2 * float(shared)
            floor_s, floor_b = floor_s + weight ** 2 * float(w_s), floor_b + weight ** 2 * float(w_b)
        sentences = n if sentences is None else min(sentences, n)
    delta = float(values_s.mean() - values_b.mean())
    sd = (_seed_sd(values_s), _seed_sd(values_b))
    if ks < 2 or kb < 2:
        return Comparison(delta, None, None, None, None, None, (ks, kb), sd, metric.name)
    d, se, df = welch_t(values_s, values_b, np.float64(sentence_var), sentences, floor_s, floor_b)
    se, df = float(se), float(df)
    if se == 0:
        p = 1.0 if delta == 0 else 0.0
        return Comparison(delta, (delta, delta), (delta, delta), p, se, df, (ks, kb), sd, metric.name)
    p = float(2 * _t().sf(abs(delta) / se, df))
    ci95 = tuple(float(x) for x in t_interval(delta, se, df, 0.95))
    ci90 = tuple(float(x) for x in t_interval(delta, se, df, 0.90))
    return Comparison(delta, ci95, ci90, p, se, df, (ks, kb), sd, metric.name)


def estimate(runs: List, metric: Metric = BLEU) -> tuple:
    """One system's mean score over its seeds and its 95% interval (None below 2 seeds), by the same model."""
    parts = [score_and_influence(metric, _rows(r, metric)) for r in runs]
    values = np.array([v for v, _ in parts])
    if len(values) < 2:
        return float(values.mean()), None
    n = len(parts[0][1])
    shared, floor, _ = sentence_parts(np.stack([p for _, p in parts]))
    mean, se, df = welch_t(values, None, shared, n, floor)
    if se == 0:
        return float(mean), (float(mean),) * 2
    lo, hi = (float(x) for x in t_interval(mean, se, df, 0.95))
    if metric.percent:  # a share: the interval within 0-100 (it covers as often)
        lo, hi = max(lo, 0.0), min(hi, 100.0)
    return float(mean), (lo, hi)


def _rows(run, metric: Metric) -> np.ndarray:
    if isinstance(run, dict):
        return rows_of(metric, run)
    return rows_of(metric, {"bleu": run})


def holm(p_values: Dict[str, float]) -> Dict[str, float]:
    """Holm's step-down adjusted p-values (Holm 1979): the i-th smallest of m is multiplied by m - i + 1, and
    adjusted values never decrease along that order."""
    order = sorted(p_values, key=p_values.get)
    m, running, adjusted = len(order), 0.0, {}
    for i, key in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[key]))
        adjusted[key] = running
    return adjusted


# ---- the verdict rule ------------------------------------------------------------------------------------------

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold at this scale", "inconclusive at this scale"
OPPOSITE = "does not hold at this scale (opposite sign)"

#: The verdict rule in words, one line a case: :func:`verdict` implements it, the page's header and
#: docs/choices.md print it (tests/test_claims_statistics.py checks the latter's copy).
VERDICT_RULE = (
    f"*{HOLDS}* and *{DOES_NOT_HOLD}* need at least {MIN_SEEDS} seeds of each system; everything else is "
    f"*{INCONCLUSIVE}*, a verdict of its own.",
    "Δ's intervals are t intervals over the seeds (Welch, each system's own seed variance, never below its "
    "seed-by-sentence variance) with the test set's shared sentence variance added; p is their two-sided t "
    "p-value. Nothing is resampled, so no verdict depends on a random seed.",
    "Every margin is fixed in the catalogue before the data, with its reason: the paper's own gap, or 1.0 BLEU "
    "(and 1.0 chrF++) for \"as good as\". When an equivalence or \"no worse\" row is inconclusive and the "
    "smallest margin its seeds could show (the 90% interval's half-width at Δ = 0) is not below the margin, it "
    "says \"too few seeds for ±margin\".",
    "\"Same\", \"almost identical\", \"loses nothing\" (equivalence: two one-sided tests at 5%) hold when the 90% "
    "interval of Δ lies inside ±margin, and do not hold when the 95% interval lies wholly outside it, saying on "
    "which side.",
    "\"No worse\" holds when the one-sided 95% lower bound (the 90% interval's lower end) is above −margin, and "
    "says so when the system is better by more than the margin (its 95% interval above +margin) or not worse at "
    "all (its 95% interval above 0); it does not hold when the one-sided 95% upper bound is below −margin.",
    "A direction (\"better\", \"worse\") holds when Holm's p < 0.05 over the page's directional rows (each "
    "comparison counted once), Δ has the claimed sign and |Δ| exceeds the seed part of its standard error "
    "(√(sd²/k + sd²/k) of the two systems' own seeds); on the same evidence with the other sign it does not "
    "hold (opposite sign). An inconclusive direction whose Δ has the other sign says so.",
    f"A length row (`long`, `concat`, held-out lengths) is decided by BLEU as the papers read it, and shows "
    f"chrF++, the length ratio and the truncation rate (the share of outputs under {TRUNCATION_FRACTION:.0%} of "
    "their reference's tokens), each with its interval. Where the truncation rates differ (the 95% interval of "
    "their Δ excludes 0) on the side of the BLEU gap, the verdict names it as the finding: which model stops "
    "early, and on what share of the set (an inconclusive row names it as what differs).",
)


def render_verdict_rule(indent: str = "") -> str:
    """:data:`VERDICT_RULE` as a Markdown list, each line prefixed by ``indent``."""
    return "\n".join(f"{indent}- {case}" for case in VERDICT_RULE)


def too_few_seeds(c: Comparison, margin: float) -> str:
    smallest = c.smallest_margin()
    if smallest is not None and smallest >= margin:
        return (f"{INCONCLUSIVE}: too few seeds for ±{margin:.2f} (the smallest margin these seeds could show is "
                f"±{smallest:.2f})")
    return INCONCLUSIVE


def verdict(expect: str, margin: float, c: Comparison, p_holm: Optional[float]) -> str:
    """The verdict of a claim on Δ = system − baseline (its t intervals, Holm's p), by the rule
    :data:`VERDICT_RULE` states (the page's header and docs/choices.md print that text)."""
    if min(c.seeds) < MIN_SEEDS or c.ci95 is None:
        return f"{INCONCLUSIVE}: {min(c.seeds)} seed{'s' if min(c.seeds) > 1 else ''} ({MIN_SEEDS} needed)"
    lo95, hi95 = c.ci95
    lo90, hi90 = c.ci90
    if expect == "same":
        if -margin < lo90 and hi90 < margin:
            return HOLDS
        if lo95 > margin:
            return f"{DOES_NOT_HOLD}: better than the baseline by more than the margin (95% interval above +{margin:.2f})"
        if hi95 < -margin:
            return f"{DOES_NOT_HOLD}: worse than the baseline by more than the margin (95% interval below −{margin:.2f})"
        return too_few_seeds(c, margin)
    if expect == "no_worse":
        if lo95 > margin:
            return f"{HOLDS} as no worse; it is better by more than the margin (95% interval above +{margin:.2f})"
        if lo95 > 0:
            return f"{HOLDS} as no worse; it is not worse at all (95% interval above 0)"
        if lo90 > -margin:
            return HOLDS
        if hi90 < -margin:
            return DOES_NOT_HOLD
        return too_few_seeds(c, margin)
    sign = 1 if expect == "better" else -1
    spread = c.seed_spread or 0.0
    if p_holm is not None and p_holm < 0.05 and abs(c.delta) > spread:
        return HOLDS if c.delta * sign > 0 else OPPOSITE
    if c.delta * sign < 0:
        return f"{INCONCLUSIVE}; the measured sign is opposite to the paper's"
    return INCONCLUSIVE


def truncation_finding(bleu: Comparison, truncation: Comparison, labels: tuple, rates: tuple, scoring: str,
                       ratios: Optional[tuple] = None) -> str:
    """The words a length row adds when the truncation rates differ on the side of the BLEU gap: which model
    stops early, how often, and (given ``ratios``) how long its outputs are ('' when the rates do not differ)."""
    if truncation.ci95 is None or not (truncation.ci95[0] > 0 or truncation.ci95[1] < 0):
        return ""
    if bleu.delta * truncation.delta >= 0:  # the system that truncates more must be the one with less BLEU
        return ""
    early, other = (0, 1) if truncation.delta > 0 else (1, 0)
    lengths = (f"; its outputs are {ratios[early]:.2f} of the reference's length, {labels[other]}'s {ratios[other]:.2f}"
               if ratios else "")
    return (f"the finding is when the models stop: {labels[early]} stops early (under {TRUNCATION_FRACTION:.0%} of "
            f"the reference's tokens) on {rates[early]:.1f}% of `{scoring}`, {labels[other]} on {rates[other]:.1f}% "
            f"(Δ {truncation.delta:+.1f} points [{truncation.ci95[0]:+.1f}, {truncation.ci95[1]:+.1f}]){lengths}")
