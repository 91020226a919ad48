"""The study's data: one joint BPE model, the length-capped training split, the test sets, and their
references kept beside the results (so that the page is scored again from the results folder alone).

The cap is a length in SentencePiece pieces: training pairs longer than it on either side are left out
(PEA trains with a length cap to test positions never seen in training). The test sets:

- ``test``: the test split; ``seen`` / ``long``: its pairs whose source fits the cap / is longer;
- ``concat``: consecutive test pairs joined (PEA Section 4.2's concatenated test set);
- ``long_heldout``: the training pairs the cap left out whose source is longer than the cap. No system
  trained on the capped split has seen them, so they add unseen lengths to the 69 of ``long``, up to
  twice the cap and more (PEA's unseen groups run a third past its cap and beyond).
"""
import gzip
import json
import os
import shutil
from typing import Dict, List

from ...command import UsageError
from .systems import TEST_SETS


class Layout:
    """The study's folder: data, and one folder per (system, seed)."""

    def __init__(self, out: str):
        self.out = os.path.abspath(out)
        self.raw = os.path.join(self.out, "raw")
        self.bpe = os.path.join(self.out, "bpe")
        self.data_bin = os.path.join(self.out, "data-bin")
        self.data_bin_uncapped = os.path.join(self.out, "data-bin-uncapped")
        self.spm = os.path.join(self.bpe, "spm.model")
        self.info = os.path.join(self.bpe, "prepare.json")

    def run_dir(self, key: str, seed: int) -> str:
        return os.path.join(self.out, "systems", key, f"seed{seed}")

    def gen(self, key: str, seed: int, test: str, frozen: bool = False, oracle: bool = False) -> str:
        """fairseq-generate's output on ``test``: of the averaged model, of its search-time model (``frozen``),
        or of the averaged model at each reference's length (``oracle``: ``--match-target-len``)."""
        tail = ".frozen" if frozen else ".oracle" if oracle else ""
        return os.path.join(self.run_dir(key, seed), f"generate.{test}{tail}.txt")

    def result(self, key: str, seed: int) -> str:
        return os.path.join(self.run_dir(key, seed), "result.json")


def subset_index(name: str) -> str:
    """fairseq-preprocess names the test prefixes test, test1, test2, ..."""
    i = TEST_SETS.index(name)
    return "test" if i == 0 else f"test{i}"


def prepare(opts, lay: Layout) -> dict:
    """BPE, the capped and uncapped training splits and the test sets; returns (and stores) their statistics."""
    if os.path.isfile(lay.info):
        with open(lay.info) as f:
            info = json.load(f)
        if set(info.get("source_lengths", {})) >= set(TEST_SETS):
            return info
    # sentencepiece (imported by concat_testset) only in the step that encodes text
    from ..concat_testset import concatenate_pairs

    texts, sp = bpe_texts(opts, lay)

    def pieces(line):
        return sp.encode(line, out_type=str)

    train_src, train_tgt = texts[("train", opts.src)], texts[("train", opts.tgt)]
    src_len = [len(pieces(s)) for s in train_src]
    tgt_len = [len(pieces(t)) for t in train_tgt]
    longest = sorted(max(a, b) for a, b in zip(src_len, tgt_len))
    cap = opts.max_train_len or longest[int(0.9 * (len(longest) - 1))]
    keep = [i for i, (a, b) in enumerate(zip(src_len, tgt_len)) if a <= cap and b <= cap]
    heldout = [i for i, a in enumerate(src_len) if a > cap]
    test_src, test_tgt = texts[("test", opts.src)], texts[("test", opts.tgt)]
    test_src_len = [len(pieces(s)) for s in test_src]
    concat_src, concat_tgt = concatenate_pairs(test_src, test_tgt)
    subsets = {
        "test": (test_src, test_tgt),
        "seen": tuple([side[i] for i in range(len(test_src)) if test_src_len[i] <= cap] for side in (test_src, test_tgt)),
        "long": tuple([side[i] for i in range(len(test_src)) if test_src_len[i] > cap] for side in (test_src, test_tgt)),
        "concat": (concat_src, concat_tgt),
        "long_heldout": ([train_src[i] for i in heldout], [train_tgt[i] for i in heldout]),
    }
    if not subsets["long"][0]:
        raise UsageError(f"--max-train-len {cap}: no test source is longer, so nothing tests unseen lengths; "
                         "give a smaller cap")
    os.makedirs(lay.raw, exist_ok=True)

    def write(path, lines):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    for lang, side in ((opts.src, 0), (opts.tgt, 1)):
        write(os.path.join(lay.bpe, f"train.capped.{lang}"), [" ".join(pieces(texts[("train", lang)][i])) for i in keep])
        for name, sides in subsets.items():
            write(os.path.join(lay.raw, f"{name}.{lang}"), sides[side])
            write(os.path.join(lay.bpe, f"{name}.{lang}"), [" ".join(pieces(x)) for x in sides[side]])
    source_lengths = {name: [len(pieces(s)) for s in sides[0]] for name, sides in subsets.items()}
    info = {"max_train_len": cap, "train_pairs": len(src_len), "train_pairs_kept": len(keep),
            "longest_train_source": max(src_len[i] for i in keep),
            "test_sizes": {k: len(v[0]) for k, v in subsets.items()},
            "concat_longer_than_cap": sum(n > cap for n in source_lengths["concat"]), "vocab_size": opts.vocab_size,
            "source_lengths": source_lengths}
    with open(lay.info, "w") as f:
        json.dump(info, f)
    return info


def bpe_texts(opts, lay: Layout):
    """prepare_bpe's BPE files and (raw texts, processor); with a stored results folder's spm.model, that
    model encodes the splits (a study continued elsewhere keeps its segmentation and dictionary)."""
    # sentencepiece only in the step that encodes text (raw_text imports it too)
    import sentencepiece as spm
    from ...raw_text import SPLIT_NAMES, find_split, prepare_bpe, read_lines

    stored = os.path.join(opts.results, "spm.model") if opts.results else None
    if not (stored and os.path.isfile(stored)):
        texts, sp = prepare_bpe(opts.data_dir, opts.src, opts.tgt, lay.bpe, opts.vocab_size)
        if opts.results:
            os.makedirs(opts.results, exist_ok=True)
            shutil.copyfile(lay.spm, stored)
        return texts, sp
    os.makedirs(lay.bpe, exist_ok=True)
    shutil.copyfile(stored, lay.spm)
    sp = spm.SentencePieceProcessor(model_file=lay.spm)
    texts = {(split, lang): read_lines(find_split(opts.data_dir, names, lang))
             for split, names in SPLIT_NAMES.items() for lang in (opts.src, opts.tgt)}
    for (split, lang), lines in texts.items():
        with open(os.path.join(lay.bpe, f"{split}.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines)
    return texts, sp


# ---- the references beside the results ---------------------------------------------------------------

def references_dir(results: str) -> str:
    return os.path.join(results, "references")


def store_references(opts, lay: Layout, info: dict) -> None:
    """Each test set's reference text (gzipped) and its sources' lengths in pieces, in the results folder."""
    target = references_dir(opts.results)
    os.makedirs(target, exist_ok=True)
    for test in TEST_SETS:
        with open(os.path.join(lay.raw, f"{test}.{opts.tgt}"), encoding="utf-8") as f:
            data = f.read().encode("utf-8")
        path = os.path.join(target, f"{test}.{opts.tgt}.gz")
        with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:  # mtime 0: the same bytes each time
            f.write(data)
    with open(os.path.join(target, "source_lengths.json"), "w") as f:
        json.dump({"max_train_len": info["max_train_len"], "lengths": info["source_lengths"]}, f)


def load_references(results: str, tgt: str) -> Dict[str, List[str]]:
    refs = {}
    for test in TEST_SETS:
        path = os.path.join(references_dir(results), f"{test}.{tgt}.gz")
        if os.path.isfile(path):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                refs[test] = f.read().splitlines()
    return refs


def load_source_lengths(results: str) -> dict:
    with open(os.path.join(references_dir(results), "source_lengths.json")) as f:
        return json.load(f)
