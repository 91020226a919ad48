"""gamma, the length ratio of cross-attention (Gated position-based attention, Section 4.2):
average source length / average target length over the binarized training set."""
import logging
import os
from typing import List, Tuple

import numpy as np

logger = logging.getLogger(__name__)


def _split_prefixes(data_dir: str, split: str, src: str, tgt: str) -> List[str]:
    """The binarized shards of ``split`` (train, train1, train2, ...), as fairseq finds them."""
    prefixes = []
    for k in range(1000):
        name = split + (str(k) if k > 0 else "")
        found = None
        for a, b in ((src, tgt), (tgt, src)):
            prefix = os.path.join(data_dir, f"{name}.{a}-{b}.")
            if os.path.exists(prefix + src + ".idx") and os.path.exists(prefix + tgt + ".idx"):
                found = prefix
                break
        if found is None:
            break
        prefixes.append(found)
    return prefixes


def token_counts(index_path_prefix: str) -> Tuple[int, int]:
    """(sentences, tokens without the EOS fairseq appends) of one binarized file."""
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(index_path_prefix, None)
    if dataset is None:
        raise FileNotFoundError(index_path_prefix)
    sizes = np.asarray(dataset.sizes, dtype=np.int64)
    return len(sizes), int(sizes.sum()) - len(sizes)


def training_length_ratio(data: str, src: str, tgt: str, split: str = "train") -> float:
    """gamma = mean source length / mean target length (tokens, EOS excluded) of ``split``."""
    data_dir = data.split(os.pathsep)[0]
    if src is None or tgt is None:
        from fairseq.data import data_utils

        src, tgt = data_utils.infer_language_pair(data_dir) if os.path.isdir(data_dir) else (None, None)
    prefixes = _split_prefixes(data_dir, split, src, tgt) if src and tgt else []
    if not prefixes:
        raise FileNotFoundError(
            f"--length-ratio was not given and cannot be computed: no binarized '{split}' split for "
            f"{src}-{tgt} in {data_dir!r}; pass --length-ratio explicitly"
        )
    n_src = n_tgt = tok_src = tok_tgt = 0
    for prefix in prefixes:
        n, t = token_counts(prefix + src)
        n_src, tok_src = n_src + n, tok_src + t
        n, t = token_counts(prefix + tgt)
        n_tgt, tok_tgt = n_tgt + n, tok_tgt + t
    if n_src != n_tgt or tok_tgt == 0:
        raise ValueError(f"cannot compute the length ratio from {prefixes}: mismatched or empty data")
    return (tok_src / n_src) / (tok_tgt / n_tgt)
