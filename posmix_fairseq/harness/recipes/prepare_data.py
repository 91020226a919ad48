"""Recipe stage "prepare": raw parallel text -> normalised, tokenised, subword-segmented files for
``fairseq-preprocess``, plus the raw test references for scoring.

Reads RAW/{train, valid|val|dev, test*}.{src,tgt}[.gz] (``posmix_fairseq.harness.raw_text`` layout), then, per
line: optional Moses punctuation normalisation + tokenisation (``sacremoses``, as the PosNet paper's
"tokenized via the scripts in Moses"), optional lowercasing (GPA paper 5.1, DE->EN), and subwords
with SentencePiece: ``--model-type bpe`` (byte pair encoding; the papers' BPE) with one joint model, or
``--model-type unigram --separate`` (PEA paper Zh->En: "unigram language model segmentation ... separate
vocabularies of size 32k"; ``--target-vocab-size`` gives the target its own size, as GPA's En-Zh 32k/45k).
``--romanian`` is Sennrich et al. (2016)'s WMT16 preprocessing, which the HC paper follows for En-Ro
(its footnote 13): Moses' Unicode punctuation replacement and non-printing character removal on both
sides, and on the Romanian side s/t-cedilla -> s/t-comma (normalise-romanian.py) then diacritics
removed (remove-diacritics.py), before tokenisation. Writes OUT/{train,valid,test}.{src,tgt},
OUT/spm.model (joint) or OUT/spm.{src,tgt}.model (separate), and OUT/raw/test.{src,tgt} (the test side
as read, for scoring; a Romanian reference gets the same Romanian normalisation, since the model never
sees diacritics: scoring against the reference with them would count every diacritic as an error).

    python -m posmix_fairseq.harness.recipes.prepare_data RAW OUT -s de -t en --lowercase --moses --vocab-size 10000
"""
import argparse
import os
from typing import Dict, List

import sentencepiece as spm

from ..command import add_language_options, check_languages, write_atomic
from ..raw_text import SPLIT_NAMES, find_split, read_lines
from ..command import NON_NEGATIVE_INT, Number


ROMANIAN_COMMA = str.maketrans({"\u015e": "\u0218", "\u015f": "\u0219", "\u0162": "\u021a", "\u0163": "\u021b"})
ROMANIAN_PLAIN = str.maketrans({"\u0218": "S", "\u0219": "s", "\u021a": "T", "\u021b": "t", "\u0102": "A",
                                "\u0103": "a", "\u00c2": "A", "\u00e2": "a", "\u00ce": "I", "\u00ee": "i"})


def romanian(line: str) -> str:
    """wmt16-scripts' normalise-romanian.py (cedilla -> comma below) then remove-diacritics.py."""
    return line.translate(ROMANIAN_COMMA).translate(ROMANIAN_PLAIN)


class Normaliser:
    def __init__(self, lang: str, moses: bool, lowercase: bool, sennrich_wmt16: bool = False):
        self.lowercase = lowercase
        self.moses = moses
        self.romanian = sennrich_wmt16 and lang == "ro"
        if moses:
            try:
                # sacremoses loads in half a second: only with --moses
                from sacremoses import MosesPunctNormalizer, MosesTokenizer
            except ImportError as e:
                raise SystemExit("--moses needs the 'sacremoses' package (scripts/setup.sh installs it)") from e
            self.norm = MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=sennrich_wmt16,
                                             post_remove_control_chars=sennrich_wmt16)
            self.tok = MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> str:
        if self.moses:
            line = self.norm.normalize(line)
        if self.romanian:
            line = romanian(line)
        if self.moses:
            line = self.tok.tokenize(line, escape=False, return_str=True)
        return line.lower() if self.lowercase else line


def train_spm(lines: List[str], prefix: str, vocab_size: int, model_type: str, lang_chars: float = 1.0):
    path = prefix + ".input.txt"
    write_atomic(path, lambda f: f.writelines((x + "\n").encode("utf-8") for x in lines))
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, vocab_size=vocab_size, model_type=model_type,
                                   character_coverage=lang_chars, num_threads=2, bos_id=-1, eos_id=-1, pad_id=-1,
                                   unk_id=0, minloglevel=2, input_sentence_size=2_000_000, shuffle_input_sentence=True,
                                   hard_vocab_limit=False)
    os.remove(path)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def prepare(raw: str, out: str, src: str, tgt: str, vocab_size: int, model_type: str = "bpe", separate=False,
            moses=False, lowercase=False, max_train=0, max_eval=0, test_name: str = "", target_vocab_size: int = 0,
            sennrich_wmt16: bool = False) -> Dict[str, str]:
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    texts = {}
    split_names = dict(SPLIT_NAMES, test=[test_name]) if test_name else SPLIT_NAMES
    for split, names in split_names.items():
        for lang in (src, tgt):
            lines = read_lines(find_split(raw, names, lang))
            if split == "train" and max_train:
                lines = lines[:max_train]
            if split != "train" and max_eval:
                lines = lines[:max_eval]
            texts[(split, lang)] = lines
        if len(texts[(split, src)]) != len(texts[(split, tgt)]):
            raise SystemExit(f"{raw}: {split} has {len(texts[(split, src)])} {src} lines but "
                             f"{len(texts[(split, tgt)])} {tgt} lines")
    for lang in (src, tgt):
        lines = texts[("test", lang)]
        if sennrich_wmt16 and lang == "ro":
            lines = [romanian(x) for x in lines]
        write_atomic(os.path.join(out, "raw", f"test.{lang}"),
                     lambda f: f.writelines((x + "\n").encode("utf-8") for x in lines))
    norm = {lang: Normaliser(lang, moses, lowercase, sennrich_wmt16) for lang in (src, tgt)}
    texts = {(s, lang): [norm[lang](x) for x in lines] for (s, lang), lines in texts.items()}
    cover = 0.9995 if {src, tgt} & {"zh", "ja"} else 1.0
    if separate:
        sizes = {src: vocab_size, tgt: target_vocab_size or vocab_size}
        models = {lang: train_spm(texts[("train", lang)], os.path.join(out, f"spm.{lang}"), sizes[lang], model_type, cover)
                  for lang in (src, tgt)}
    else:
        joint = train_spm(texts[("train", src)] + texts[("train", tgt)], os.path.join(out, "spm"), vocab_size,
                          model_type, cover)
        models = {src: joint, tgt: joint}
    for (split, lang), lines in texts.items():
        write_atomic(os.path.join(out, f"{split}.{lang}"),
                     lambda f: f.writelines((" ".join(models[lang].encode(x, out_type=str)) + "\n").encode("utf-8")
                                            for x in lines))
    return {lang: (os.path.join(out, f"spm.{lang}.model") if separate else os.path.join(out, "spm.model"))
            for lang in (src, tgt)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("raw")
    p.add_argument("out")
    add_language_options(p, required=True, dests=("src", "tgt"))
    p.add_argument("--vocab-size", type=Number(int, 50), default=32000)
    p.add_argument("--model-type", choices=["bpe", "unigram"], default="bpe")
    p.add_argument("--separate", action="store_true", help="one subword model per language")
    p.add_argument("--target-vocab-size", type=NON_NEGATIVE_INT, default=0, help="with --separate: the target's size (default: "
                                                                    "--vocab-size)")
    p.add_argument("--romanian", action="store_true", help="Sennrich et al. (2016)'s WMT16 En-Ro preprocessing")
    p.add_argument("--moses", action="store_true", help="Moses punctuation normalisation + tokenisation")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--max-train-sentences", type=NON_NEGATIVE_INT, default=0, help="keep the first N training pairs (0: all)")
    p.add_argument("--test-name", default="", help="RAW/<NAME>.{src,tgt} as the test set (e.g. newstest_all)")
    p.add_argument("--max-eval-sentences", type=NON_NEGATIVE_INT, default=0, help="keep the first N valid/test pairs (0: all)")
    a = p.parse_args()
    check_languages(p, a)
    if a.target_vocab_size and not a.separate:
        p.error("--target-vocab-size needs --separate (one joint model has one size)")
    models = prepare(a.raw, a.out, a.src, a.tgt, a.vocab_size, a.model_type, a.separate, a.moses, a.lowercase,
                     a.max_train_sentences, a.max_eval_sentences, a.test_name, a.target_vocab_size, a.romanian)
    print(f"prepare: {a.raw} -> {a.out} (subword models: {models})")


if __name__ == "__main__":
    main()
