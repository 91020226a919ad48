"""gamma, the length ratio of cross-attention (GPA Section 4.2):
average source length / average target length over the binarized training set."""
import math
import os

import numpy as np

from .binarized_data import language_pair, sentence_sizes, split_prefixes

LENGTH_RATIO_RANGE = (0.01, 100.0)
"""The gamma accepted. Real language pairs lie within about 0.3-3; a gamma outside this range maps every
target position past the first few to one clipped source distance (inf and 1e300 overflow floor(gamma n)
to INT64_MIN), so attention silently stops depending on position."""


def check_length_ratio(gamma, where: str = "--length-ratio") -> float:
    """``gamma`` when it is a finite number within :data:`LENGTH_RATIO_RANGE`, else a ValueError naming
    ``where`` and the valid range."""
    low, high = LENGTH_RATIO_RANGE
    try:
        x = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"{where} {gamma!r}: not a number") from None
    if not math.isfinite(x) or not low <= x <= high:
        raise ValueError(f"{where} {gamma!r}: gamma (mean source / mean target length) must be a finite number "
                         f"from {low:g} to {high:g}")
    return x


def training_length_ratio(data: str, src: str, tgt: str, split: str = "train") -> float:
    """gamma = mean source length / mean target length (tokens, EOS excluded) of ``split``."""
    data_dir = data.split(os.pathsep)[0]
    src, tgt = language_pair(data_dir, src, tgt)
    prefixes = split_prefixes(data_dir, split, src, tgt) if src and tgt else []
    if not prefixes:
        raise FileNotFoundError(f"--length-ratio was not given and cannot be computed: no binarized '{split}' "
                                f"split for {src}-{tgt} in {data_dir!r}; pass --length-ratio explicitly")
    src_sizes, tgt_sizes = (np.concatenate([sentence_sizes(p + lang) for p in prefixes]) for lang in (src, tgt))
    n_src, n_tgt = len(src_sizes), len(tgt_sizes)
    tok_src, tok_tgt = int(src_sizes.sum()) - n_src, int(tgt_sizes.sum()) - n_tgt  # the EOS of each sentence excluded
    if n_src != n_tgt or tok_tgt == 0:
        raise ValueError(f"cannot compute the length ratio from {prefixes}: mismatched or empty data")
    return check_length_ratio((tok_src / n_src) / (tok_tgt / n_tgt),
                              f"the length ratio of the binarized '{split}' data in {data_dir!r} (pass --length-ratio)")
