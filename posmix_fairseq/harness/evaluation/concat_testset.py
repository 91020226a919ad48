"""``posmix-concat-testset``: the concatenated test set of the PEA paper (Section 4.2, Tables 3-4).

"we take consecutive sentence pairs from newstest all and concatenate their source respectively target
sides. This yields a new test set concat seq with 14k sentence pairs" (from 28k): pairs (1, 2), (3, 4),
... are joined with a space (an odd last pair is dropped), then grouped by source length into
G_0:25, G_26:50, ... as in Table 2 (``--bins``: inclusive upper edges, see ``posmix-length-bins``).
Lengths count whitespace tokens of the given text: pass tokenised/subworded text (as the paper counts)
or ``--spm-model`` to count SentencePiece pieces of raw text.

Writes OUT/concat.SRC_LANG, OUT/concat.TGT_LANG and OUT/concat.G<lo>-<hi>.{SRC_LANG,TGT_LANG} per non-empty
group.

    posmix-concat-testset --src newstest_all.de --tgt newstest_all.en -s de -t en --out concat/
"""
import os
from typing import List, Optional, Tuple

from ..raw_text import read_lines
from .length_bins import assign
from ..command import (POSITIVE_INT, NumberList, build_parser as command_parser, check_input_file, check_output_dir,
                      console, load_sentencepiece, replace_file)


def concatenate_pairs(src: List[str], tgt: List[str]) -> Tuple[List[str], List[str]]:
    if len(src) != len(tgt):
        raise ValueError(f"--src has {len(src)} lines but --tgt has {len(tgt)}")
    n = len(src) - len(src) % 2
    return ([f"{src[i]} {src[i + 1]}" for i in range(0, n, 2)], [f"{tgt[i]} {tgt[i + 1]}" for i in range(0, n, 2)])


def group_names(edges: List[float]) -> List[str]:
    names, lo = [], 0
    for e in edges:
        names.append(f"G{lo}-{int(e)}")
        lo = int(e) + 1
    names.append(f"G{lo}-inf")
    return names


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-concat-testset", __doc__)
    p.add_argument("--src", required=True, metavar="FILE", help="the test set's source side, one sentence a line")
    p.add_argument("--tgt", required=True, metavar="FILE", help="its target side, line by line with --src")
    p.add_argument("-s", "--source-lang", required=True, metavar="LANG",
                   help="source language: the suffix of the files written (fairseq's --source-lang)")
    p.add_argument("-t", "--target-lang", required=True, metavar="LANG", help="target language suffix")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    p.add_argument("--bins", default="25,50,75,100", type=NumberList(POSITIVE_INT, increasing=True),
                   help="inclusive upper edges of the source-length groups, increasing")
    p.add_argument("--spm-model", metavar="FILE",
                   help="count SentencePiece pieces of raw text instead of whitespace tokens")
    a = p.parse_args(argv)
    if a.spm_model:
        check_input_file(a.spm_model, "--spm-model")
    check_output_dir(a.out, "--out")
    try:
        src, tgt = concatenate_pairs(read_lines(a.src, "--src", allow_empty=False),
                                     read_lines(a.tgt, "--tgt", allow_empty=False))
        if a.spm_model:
            sp = load_sentencepiece(a.spm_model, "--spm-model")
            lens = [len(sp.encode(s)) for s in src]
        else:
            lens = [len(s.split()) for s in src]
        edges = [float(e) for e in a.bins]
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"posmix-concat-testset: {e}")
    os.makedirs(a.out, exist_ok=True)

    def write(name, lines):
        replace_file(os.path.join(a.out, name), "".join(line + "\n" for line in lines))

    write(f"concat.{a.source_lang}", src)
    write(f"concat.{a.target_lang}", tgt)
    groups = assign(lens, edges)
    counts = {}
    for k, name in enumerate(group_names(edges)):
        idx = [i for i, g in enumerate(groups) if g == k]
        counts[name] = len(idx)
        if idx:
            write(f"concat.{name}.{a.source_lang}", [src[i] for i in idx])
            write(f"concat.{name}.{a.target_lang}", [tgt[i] for i in idx])
    print(f"posmix-concat-testset: {len(src)} concatenated pairs -> {a.out}; groups: "
          + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    return src, tgt, counts


cli = console(main, "posmix-concat-testset")


if __name__ == "__main__":
    raise SystemExit(cli())
