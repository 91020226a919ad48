"""Paired bootstrap resampling (Koehn 2004), as sacreBLEU implements it.

For BLEU/chrF/chrF++/TER, ``posmix-score`` calls sacreBLEU's own ``PairedTest(test_type="bs")``.
For metrics with segment scores (COMET, BLEURT), whose system score is the mean of segment scores,
``paired_bootstrap_segments`` applies the same procedure to those means: the same resampled index
sets for baseline and system, the test statistic |mean_sys - mean_base| centred over the resamples,
p = (c + 1) / (n + 1) with c the resamples whose centred statistic reaches the observed difference
(``>=``; sacreBLEU counts ``>``, which gives p = 1/(n+1) for two identical systems; with ``>=`` they get
p = 1),
and the 95% interval from the 2.5/97.5 percentiles of the system's resampled means (half-width, as
sacreBLEU's ``estimate_ci``). The seed follows sacreBLEU (``SACREBLEU_SEED``, default 12345).
"""
import os
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np


@dataclass
class BootstrapResult:
    score: float
    mean: float
    ci: float                 # half-width of the 95% interval around ``mean``
    p_value: Optional[float]  # None for the baseline itself


def _seed() -> Optional[int]:
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


def resample_indices(n_items: int, n_samples: int, seed: Optional[int] = None) -> np.ndarray:
    if n_items < 1:
        raise ValueError("bootstrap needs at least one segment")
    if n_samples < 1:
        raise ValueError(f"--bootstrap-samples must be >= 1 (got {n_samples})")
    rng = np.random.default_rng(_seed() if seed is None else seed)
    return rng.choice(n_items, size=(n_samples, n_items), replace=True)


def ci_half_width(samples: np.ndarray) -> float:
    """sacreBLEU's estimate_ci: half the distance between the n//40-th smallest and largest sample."""
    s = np.sort(np.asarray(samples))
    lo = len(s) // 40
    return float(0.5 * (s[len(s) - lo - 1] - s[lo]))


def paired_bootstrap_segments(system: Sequence[float], baseline: Optional[Sequence[float]],
                              n_samples: int = 1000, seed: Optional[int] = None) -> BootstrapResult:
    sys_scores = np.asarray(system, dtype=np.float64)
    idx = resample_indices(len(sys_scores), n_samples, seed)
    sys_means = sys_scores[idx].mean(axis=1)
    p_value = None
    if baseline is not None:
        bl = np.asarray(baseline, dtype=np.float64)
        if bl.shape != sys_scores.shape:
            raise ValueError(f"paired bootstrap: the system has {len(sys_scores)} segments, the baseline {len(bl)}")
        diffs = np.abs(sys_means - bl[idx].mean(axis=1))
        stats = diffs - diffs.mean()
        observed = abs(sys_scores.mean() - bl.mean())
        p_value = float((np.sum(stats >= observed) + 1) / (n_samples + 1))
    return BootstrapResult(score=float(sys_scores.mean()), mean=float(sys_means.mean()),
                           ci=ci_half_width(sys_means), p_value=p_value)
