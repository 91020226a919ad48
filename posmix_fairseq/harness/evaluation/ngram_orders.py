"""``posmix-ngram-orders``: chrF and BLEU at every n-gram order, per system, and each system's gap to
a baseline (PosNet Fig. 4 and Section 5: "the ChrF with n-gram
character F2 and 2-gram word F2 (1 <= n <= 30), the ChrF with 6-gram character F2 and n-gram word F2
(1 <= n <= 8), and the BLEU with n-gram word precision (1 <= n <= 8)").

- chrF (sacreBLEU's CHRF, beta 2): the character n-gram order n with word order 2 (``--char-orders``),
  and character order 6 with word order n (``--word-orders``); at n = 6 and n = 2 respectively both
  equal chrF++. Each score is sacreBLEU's public ``CHRF(char_order=n, word_order=w).corpus_score``: one
  pass over the test set per order (38 for the defaults), through sacreBLEU's public API only, so a new
  sacreBLEU release cannot silently change what is computed.
- BLEU (sacreBLEU, ``--tokenize``): ``BLEU(max_ngram_order=n)`` for each n of ``--bleu-orders``.

``--lowercase`` lowercases for both. The JSON records sacreBLEU's signature of each order's metric (``signatures``
beside each block's ``scores``); the tables end with the signature of their first order.

Hypotheses are detokenised as ``posmix-score`` does (``--spm-model``, ``--remove-bpe``, ``--moses-detok``);
the references are ``--ref`` (raw text) or the T- lines.

    posmix-ngram-orders gen.posnet_embed.txt --baseline gen.sape.txt --names PosNet-Embed SAPE \\
        --spm-model spm.model --ref test.de --json ngram-orders.json
"""
import argparse
from typing import Dict, List, Optional, Sequence

from .detok import Detokenizer
from .generate_output import read_generate_output
from ..command import (UsageError, build_parser as command_parser, check_input_file, check_output_file, console,
                        read_text_lines, write_json)
from .score import add_remove_bpe

CHRF_WORD_ORDER = 2   # chrF++'s word order, kept while the character order varies (Fig. 4a)
CHRF_CHAR_ORDER = 6   # chrF++'s character order, kept while the word order varies (Fig. 4b)


def parse_orders(text: str, option: str) -> List[int]:
    """'1-30' or '1,2,4' -> sorted orders >= 1."""
    orders = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError(f"{option} {text!r}: the range {part} is inverted (write {hi}-{lo})")
                orders.update(range(lo, hi + 1))
            elif part:
                orders.add(int(part))
    except ValueError as e:
        if "inverted" in str(e):
            raise
        raise ValueError(f"{option} {text!r}: expected orders such as 1-30 or 1,2,4") from None
    if not orders or min(orders) < 1:
        raise ValueError(f"{option} {text!r}: orders must be integers >= 1")
    return sorted(orders)


def orders_option(option: str):
    """argparse type of an orders option: :func:`parse_orders`, its errors usage errors (exit status 2)."""

    def convert(text: str) -> List[int]:
        try:
            return parse_orders(text, option)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).replace(f"{option} ", "", 1)) from None

    convert.__name__ = "orders"
    return convert


def chrf_metrics(char_orders: Sequence[int], word_orders: Sequence[int], lowercase=False) -> Dict[str, list]:
    """{'char': CHRF(char n, word 2) per n, 'word': CHRF(char 6, word n) per n}: sacreBLEU's public metric, once
    per order (its per-order statistics are private API)."""
    from sacrebleu.metrics import CHRF  # sacrebleu loads in tenths of a second: not on --help

    return {"char": [CHRF(char_order=n, word_order=CHRF_WORD_ORDER, lowercase=lowercase) for n in char_orders],
            "word": [CHRF(char_order=CHRF_CHAR_ORDER, word_order=n, lowercase=lowercase) for n in word_orders]}


def bleu_metrics(orders, tokenize="13a", lowercase=False) -> list:
    from sacrebleu.metrics import BLEU  # sacrebleu loads in tenths of a second: not on --help

    return [BLEU(max_ngram_order=n, tokenize=tokenize, lowercase=lowercase) for n in orders]


def signatures(metrics) -> List[str]:
    """sacreBLEU's signature of each metric (after it scored: the signature counts the references)."""
    return [str(metric.get_signature()) for metric in metrics]


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-ngram-orders", __doc__)
    p.add_argument("gen_out", nargs="+", metavar="GEN_OUT", help="fairseq-generate outputs (systems)")
    p.add_argument("--baseline", required=True, metavar="GEN_OUT", help="the system the gaps are measured against")
    p.add_argument("--names", nargs="+", metavar="NAME", help="display names: the systems in order, then the baseline")
    p.add_argument("--ref", metavar="FILE", help="reference text file (raw; default: the T- lines)")
    p.add_argument("--spm-model", metavar="FILE", help="SentencePiece model: join its pieces back")
    add_remove_bpe(p)
    p.add_argument("--moses-detok", metavar="LANG", help="Moses-detokenise for this target language")
    p.add_argument("--tokenize", default="13a", help="sacreBLEU BLEU tokenizer (default 13a)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive chrF and BLEU")
    p.add_argument("--char-orders", default="1-30", type=orders_option("--char-orders"), help="chrF character orders, word order 2 (default 1-30)")
    p.add_argument("--word-orders", default="1-8", type=orders_option("--word-orders"), help="chrF word orders, character order 6 (default 1-8)")
    p.add_argument("--bleu-orders", default="1-8", type=orders_option("--bleu-orders"), help="BLEU maximum n-gram orders (default 1-8)")
    p.add_argument("--json", metavar="FILE",
                   help="write the scores here (posmix-plot posnet-fig4 reads it; '-': stdout)")
    a = p.parse_intermixed_args(argv)
    for flag, path in [("GEN_OUT", x) for x in a.gen_out] + [("--baseline", a.baseline), ("--ref", a.ref),
                                                               ("--spm-model", a.spm_model)]:
        if path:
            check_input_file(path, None if flag == "GEN_OUT" else flag)
    if a.json:
        check_output_file(a.json, "--json")
    paths = list(a.gen_out) + [a.baseline]
    names = a.names or [path.rsplit("/", 1)[-1] for path in paths]
    if len(names) != len(paths):
        raise UsageError(f"--names: {len(names)} names for {len(paths)} systems (the systems, then the baseline)")
    if len(set(names)) != len(names):
        raise UsageError(f"--names: the names must differ (got {' '.join(names)}); give --names")
    try:
        orders = {"char": a.char_orders, "word": a.word_orders, "bleu": a.bleu_orders}
        detok = Detokenizer(a.spm_model, a.remove_bpe, a.moses_detok)
        outputs = [read_generate_output(path) for path in paths]
        if a.ref:
            refs = read_text_lines(a.ref, "--ref")
        elif outputs[0].references:
            refs, _ = detok.decode(outputs[0].references, f"T- lines of {outputs[0].path}")
        elif outputs[0].missing_lines("T"):
            raise ValueError(f"{outputs[0].missing_lines('T')}: regenerate it, or pass --ref FILE")
        else:
            raise ValueError("no references: pass --ref FILE")
        chrf = chrf_metrics(orders["char"], orders["word"], a.lowercase)
        metrics = {"chrf_char_orders": chrf["char"], "chrf_word_orders": chrf["word"],
                   "bleu_orders": bleu_metrics(orders["bleu"], a.tokenize, a.lowercase)}
        scores = {key: {} for key in metrics}
        for name, out in zip(names, outputs):
            hyps, _ = detok.decode(out.hypotheses, f"H- lines of {out.path}")
            if len(hyps) != len(refs):
                raise ValueError(f"{out.path}: {len(hyps)} hypotheses but {len(refs)} references")
            for key, block in metrics.items():
                scores[key][name] = [metric.corpus_score(hyps, [refs]).score for metric in block]
    except ValueError as e:
        raise SystemExit(f"posmix-ngram-orders: {e}")
    baseline = names[-1]
    result = {"baseline": baseline, "systems": names, "detokenization": detok.description, "tokenize": a.tokenize,
              "chrf_char_orders": {"orders": orders["char"], "word_order": CHRF_WORD_ORDER,
                                   "scores": scores["chrf_char_orders"]},
              "chrf_word_orders": {"orders": orders["word"], "char_order": CHRF_CHAR_ORDER,
                                   "scores": scores["chrf_word_orders"]},
              "bleu_orders": {"orders": orders["bleu"], "scores": scores["bleu_orders"]}}
    for key, block in metrics.items():  # sacreBLEU's signature of each order's metric
        result[key]["signatures"] = signatures(block)
    titles = {"chrf_char_orders": f"chrF, character order n (word order {CHRF_WORD_ORDER})",
              "chrf_word_orders": f"chrF, word order n (character order {CHRF_CHAR_ORDER})",
              "bleu_orders": "BLEU, maximum n-gram order n"}
    for key, title in titles.items() if a.json != "-" else ():  # stdout holds the JSON asked for
        block = result[key]
        head = ["n"] + [f"{s}" for s in names] + [f"{s} - {baseline}" for s in names[:-1]]
        print(f"{title}\n\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for k, n in enumerate(block["orders"]):
            vals = [block["scores"][s][k] for s in names]
            gaps = [block["scores"][s][k] - block["scores"][baseline][k] for s in names[:-1]]
            print(f"| {n} | " + " | ".join(f"{v:.2f}" for v in vals + gaps) + " |")
        print(f"\n- sacreBLEU signature at n = {block['orders'][0]}: {block['signatures'][0]}\n")
    if a.json:
        write_json(a.json, result)
    return result


cli = console(main, "posmix-ngram-orders")


if __name__ == "__main__":
    raise SystemExit(cli())
