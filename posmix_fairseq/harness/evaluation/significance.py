"""Paired significance tests: paired bootstrap resampling (Koehn 2004) and paired approximate
randomization (AR; Riezler and Maxwell 2005), as sacreBLEU implements them.

For BLEU/chrF/chrF++/TER, ``posmix-score`` calls sacreBLEU's own ``PairedTest`` (``test_type="bs"``
and ``"ar"``). For COMET/BLEURT, whose system score is the mean of segment scores, the functions here
run the same two procedures over per-segment statistics, with sacreBLEU's random draws (numpy's
``default_rng`` seeded from ``SACREBLEU_SEED``, default 12345):

- bootstrap: ``rng.choice(n, (n_samples, n))`` resamples the segments, the same index sets for the
  system and the baseline; the 95% interval is half the distance between the ``n_samples // 40``-th
  smallest and largest resampled system scores (sacreBLEU's ``estimate_ci``); the statistic is
  ``|system - baseline|`` per resample, centred by its mean over the resamples;
- AR: ``rng.integers(2, (n_trials, n), dtype=bool)`` swaps each segment's pair of statistics between
  the two systems with probability 1/2; the statistic is the absolute score difference of the two
  shuffled pseudo-systems.

Both: ``p = (c + 1) / (n + 1)``, with ``c`` the samples whose statistic reaches the observed absolute
difference. ``count_ties=True`` counts ``>=``, as Riezler and Maxwell (2005) and Koehn (2004) define the
test; sacreBLEU counts ``>`` (``count_ties=False``), which gives p = 1/(n+1) for two identical systems
and, in AR, leaves out every trial that swaps only segments on which both systems agree (those
reproduce the observed difference exactly). Ties are detected up to a relative 1e-9 (floating-point
sums in a different order).

Statistics are an ``(n_segments, k)`` array summed over the chosen segments, and an ``aggregate``
function maps each row of summed statistics to a score (what sacreBLEU's metrics do with their
sufficient statistics); a 1-D array of segment scores stands for ``(score, 1)`` rows whose aggregate
is the mean.
"""
import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

#: (m, k) summed statistics -> (m,) scores
Aggregate = Callable[[np.ndarray], np.ndarray]
TIE_TOLERANCE = 1e-9


@dataclass
class BootstrapResult:
    score: float
    mean: float
    ci: float                 # half-width of the 95% interval around ``mean``
    p_value: Optional[float]  # None without a baseline


def sacrebleu_seed() -> Optional[int]:
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


def mean_of_statistics(summed: np.ndarray) -> np.ndarray:
    """The aggregate of segment scores given as ``(score, 1)`` rows: their mean."""
    return summed[..., 0] / summed[..., 1]


def as_statistics(values, aggregate: Optional[Aggregate]):
    """(statistics (n, k), aggregate): 1-D segment scores become (score, 1) rows averaged."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        if aggregate is not None:
            raise ValueError("segment scores (1-D) are averaged; pass (n, k) statistics with an aggregate")
        return np.stack([arr, np.ones_like(arr)], axis=1), mean_of_statistics
    if aggregate is None:
        raise ValueError("(n, k) statistics need an aggregate function")
    return arr, aggregate


def _pair(system, baseline, aggregate):
    sys_stats, agg = as_statistics(system, aggregate)
    bl_stats = None
    if baseline is not None:
        bl_stats, _ = as_statistics(baseline, aggregate)
        if bl_stats.shape != sys_stats.shape:
            raise ValueError(f"paired test: the system has {len(sys_stats)} segments, the baseline {len(bl_stats)}")
    if len(sys_stats) < 1:
        raise ValueError("a paired test needs at least one segment")
    return sys_stats, bl_stats, agg


def p_value(samples: np.ndarray, observed: float, count_ties: bool = True) -> float:
    """(c + 1) / (n + 1): c = samples >= observed (count_ties) or > observed (sacreBLEU)."""
    samples = np.asarray(samples, dtype=np.float64)
    if count_ties:
        c = int(np.sum(samples >= observed - TIE_TOLERANCE * max(1.0, abs(observed))))
    else:
        c = int(np.sum(samples > observed))
    return (c + 1) / (len(samples) + 1)


def paired_bootstrap(system, baseline=None, aggregate: Optional[Aggregate] = None, n_samples: int = 1000,
                     seed: Optional[int] = None, count_ties: bool = True) -> BootstrapResult:
    """The system's score, resampled mean and 95% half-width; with a baseline, the p-value of
    ``|system - baseline|``."""
    if n_samples < 1:
        raise ValueError(f"--paired-bs-n must be >= 1 (got {n_samples})")
    sys_stats, bl_stats, agg = _pair(system, baseline, aggregate)
    rng = np.random.default_rng(sacrebleu_seed() if seed is None else seed)
    idx = rng.choice(len(sys_stats), size=(n_samples, len(sys_stats)), replace=True)
    sys_scores = agg(sys_stats[idx].sum(axis=1))
    score = float(agg(sys_stats.sum(axis=0)[None])[0])
    p = None
    if bl_stats is not None:
        diffs = np.abs(sys_scores - agg(bl_stats[idx].sum(axis=1)))
        observed = abs(score - float(agg(bl_stats.sum(axis=0)[None])[0]))
        p = p_value(diffs - diffs.mean(), observed, count_ties)
    from sacrebleu.significance import estimate_ci  # tenths of a second: where a bootstrap runs only

    # the 95% half-width: half the distance between the n//40-th smallest and largest resampled score
    return BootstrapResult(score=score, mean=float(sys_scores.mean()), ci=float(estimate_ci(sys_scores)[1]),
                           p_value=p)


def paired_approximate_randomization(system, baseline, aggregate: Optional[Aggregate] = None,
                                     n_trials: int = 10000, seed: Optional[int] = None,
                                     count_ties: bool = True) -> float:
    """The p-value of ``|system - baseline|`` under random swaps of each segment's pair."""
    if n_trials < 1:
        raise ValueError(f"--paired-ar-n must be >= 1 (got {n_trials})")
    sys_stats, bl_stats, agg = _pair(system, baseline, aggregate)
    if bl_stats is None:
        raise ValueError("approximate randomization compares two systems: give a baseline")
    rng = np.random.default_rng(sacrebleu_seed() if seed is None else seed)
    pos = rng.integers(2, size=(n_trials, len(sys_stats)), dtype=bool)
    neg = ~pos
    shuffled_a = pos @ bl_stats + neg @ sys_stats
    shuffled_b = neg @ bl_stats + pos @ sys_stats
    observed = abs(float(agg(bl_stats.sum(axis=0)[None])[0]) - float(agg(sys_stats.sum(axis=0)[None])[0]))
    return p_value(np.abs(agg(shuffled_a) - agg(shuffled_b)), observed, count_ties)
