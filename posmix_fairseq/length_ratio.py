"""gamma, the length ratio of cross-attention (GPA Section 4.2):
average source length / average target length over the binarized training set."""
import logging
import os
from typing import Tuple

from .binarized_data import language_pair, sentence_sizes, split_prefixes

logger = logging.getLogger(__name__)


def token_counts(index_path_prefix: str) -> Tuple[int, int]:
    """(sentences, tokens without the EOS fairseq appends) of one binarized file."""
    sizes = sentence_sizes(index_path_prefix)
    return len(sizes), int(sizes.sum()) - len(sizes)


def training_length_ratio(data: str, src: str, tgt: str, split: str = "train") -> float:
    """gamma = mean source length / mean target length (tokens, EOS excluded) of ``split``."""
    data_dir = data.split(os.pathsep)[0]
    src, tgt = language_pair(data_dir, src, tgt)
    prefixes = split_prefixes(data_dir, split, src, tgt) if src and tgt else []
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
