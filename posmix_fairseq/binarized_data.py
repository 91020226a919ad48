"""What the binarized data (``fairseq-preprocess --destdir``) says about sentence lengths: the shards
of a split as fairseq finds them, the longest sentence of each side, and gamma, the length ratio of
cross-attention (GPA Section 4.2): average source length / average target length over the training set."""
import math
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
from fairseq.data import data_utils


def split_prefixes(data_dir: str, split: str, src: str, tgt: str) -> List[str]:
    """The binarized shards of ``split`` (train, train1, train2, ...), as fairseq finds them."""
    prefixes = []
    for k in range(1000):
        name = split + (str(k) if k > 0 else "")
        candidates = [os.path.join(data_dir, f"{name}.{a}-{b}.") for a, b in ((src, tgt), (tgt, src))]
        found = [p for p in candidates if os.path.exists(p + src + ".idx") and os.path.exists(p + tgt + ".idx")]
        if not found:
            break
        prefixes.append(found[0])
    return prefixes


def sentence_sizes(index_path_prefix: str) -> np.ndarray:
    """Tokens per sentence of one binarized file, the EOS fairseq-preprocess appends included."""
    dataset = data_utils.load_indexed_dataset(index_path_prefix, None)
    if dataset is None:
        raise FileNotFoundError(index_path_prefix)
    return np.asarray(dataset.sizes, dtype=np.int64)


def language_pair(data_dir: str, src: Optional[str], tgt: Optional[str]):
    """(src, tgt), inferred from the file names as fairseq does when not given."""
    if src is None or tgt is None:
        src, tgt = data_utils.infer_language_pair(data_dir) if os.path.isdir(data_dir) else (None, None)
    return src, tgt


def longest_sentences(data: str, src: Optional[str], tgt: Optional[str],
                      splits: Sequence[str] = ("train", "valid", "test")) -> Optional[Dict[str, int]]:
    """{"source": L_s, "target": L_t}: the longest sentence of each side over ``splits`` of every data
    directory of ``data`` (fairseq's ``dir1:dir2``), in tokens with EOS (a sentence of L tokens has
    positions 0..L-1), and the splits read; None when no split is at hand."""
    longest = {"source": 0, "target": 0}
    read = []
    for data_dir in data.split(os.pathsep):
        s, t = language_pair(data_dir, src, tgt)
        if not (s and t):
            continue
        for split in splits:
            for prefix in split_prefixes(data_dir, split, s, t):
                read.append(os.path.basename(prefix).split(".")[0])  # train, train1, valid, ...
                for role, lang in (("source", s), ("target", t)):
                    sizes = sentence_sizes(prefix + lang)
                    if sizes.size:
                        longest[role] = max(longest[role], int(sizes.max()))
    return dict(longest, splits=read) if read else None


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
