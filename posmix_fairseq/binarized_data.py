"""What the binarized data (``fairseq-preprocess --destdir``) says about sentence lengths: the shards
of a split as fairseq finds them, and the longest sentence of each side."""
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
