"""Raw parallel text -> SentencePiece-BPE tokenized files ready for fairseq-preprocess.

Reads DIR/{train, valid|val|dev, test*}.{lang}[.gz] (the layout of Multi30k's raw release and of
most WMT/IWSLT recipes) and trains one joint BPE model on the training split.
"""
import argparse
import glob
import os
from typing import Dict, List, Optional, Tuple

import sentencepiece as spm

from .command import read_text_lines, write_atomic
from .command import NON_NEGATIVE_INT, Number

SPLIT_NAMES = {"train": ["train"], "valid": ["valid", "val", "dev"], "test": ["test"]}


def read_lines(path: str, option: Optional[str] = None, allow_empty: bool = True) -> List[str]:
    """The lines of a UTF-8 text file (``.gz``: gunzipped; ``-``: stdin); errors name ``option``, the
    file and the line of a byte that is not UTF-8."""
    return read_text_lines(path, option, allow_empty)


def find_split(data_dir: str, names: List[str], lang: str) -> str:
    for name in names:
        for pattern in (f"{name}.{lang}", f"{name}.{lang}.gz", f"{name}_*.{lang}", f"{name}_*.{lang}.gz"):
            hits = sorted(glob.glob(os.path.join(data_dir, pattern)))
            if hits:
                return hits[0]
    raise FileNotFoundError(f"{data_dir}: no {'/'.join(names)} file for language '{lang}' "
                            f"(expected e.g. {names[0]}.{lang} or {names[0]}.{lang}.gz)")


def prepare_bpe(data_dir: str, src: str, tgt: str, out_dir: str, vocab_size: int = 8000,
                max_train: int = 0) -> Tuple[Dict[Tuple[str, str], List[str]], object]:
    """Write out_dir/{train,valid,test}.{src,tgt} as BPE pieces; returns (raw texts, processor)."""
    os.makedirs(out_dir, exist_ok=True)
    texts = {(s, lang): read_lines(find_split(data_dir, names, lang))
             for s, names in SPLIT_NAMES.items() for lang in (src, tgt)}
    if max_train:
        for lang in (src, tgt):
            texts[("train", lang)] = texts[("train", lang)][:max_train]
    joint = os.path.join(out_dir, "spm_train.txt")
    write_atomic(joint, lambda f: f.writelines((line + "\n").encode("utf-8") for lang in (src, tgt)
                                               for line in texts[("train", lang)]))
    spm.SentencePieceTrainer.train(input=joint, model_prefix=os.path.join(out_dir, "spm"), vocab_size=vocab_size,
                                   model_type="bpe", character_coverage=1.0, num_threads=2,
                                   bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "spm.model"))
    for (split, lang), lines in texts.items():
        write_atomic(os.path.join(out_dir, f"{split}.{lang}"),
                     lambda f: f.writelines((" ".join(sp.encode(line, out_type=str)) + "\n").encode("utf-8")
                                            for line in lines))
    return texts, sp


def main():
    p = argparse.ArgumentParser(description="raw parallel text -> SentencePiece BPE files for fairseq-preprocess")
    p.add_argument("raw_dir")
    p.add_argument("src")
    p.add_argument("tgt")
    p.add_argument("out_dir")
    p.add_argument("--vocab-size", type=Number(int, 100), default=8000)
    p.add_argument("--max-train-sentences", type=NON_NEGATIVE_INT, default=0)
    args = p.parse_args()
    prepare_bpe(args.raw_dir, args.src, args.tgt, args.out_dir, args.vocab_size, args.max_train_sentences)


if __name__ == "__main__":
    main()
