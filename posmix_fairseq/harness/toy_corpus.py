"""A deterministic synthetic parallel corpus built to separate content-based from position-based mixing.

Source (English-like, SVO):  det adj* noun [prep det adj* noun] verb det adj* noun [adv] [conj clause]
Target (German/French-like): every word translated by a fixed lexicon, adjectives AFTER their
noun, the verb at the END of its clause (subject object [adv] verb), plural nouns marked by a
separate suffix token. Same seed -> same corpus, on any machine.

What it stresses: where a target word's source lies depends on the word's *category*, i.e. on token
identity (an adjective moves behind its noun, a verb to its clause's end). Content-based attention
(the Transformer's) finds that source directly; position-only self-attention (aPosNet, rPosNet) cannot
look at the tokens when it mixes them and leaves the reordering to cross-attention, so it is expected to
trail here. The ``long`` test split holds sentences longer than any in training (clauses joined by
conjunctions): it tests what position-based and relative attention are built for, length generalisation.
"""
import argparse
import os
import random
from typing import Dict, List, Tuple
from .command import NON_NEGATIVE_INT, POSITIVE_INT, replace_file

CATEGORIES = {"noun": 48, "verb": 28, "adj": 24, "adv": 10, "det": 4, "prep": 6, "conj": 3}
SYLLABLES = ["ka", "lo", "mi", "nu", "re", "sa", "ti", "vo", "ze", "bu", "da", "fe", "gi", "ho", "ju", "pe"]


def _word(rng: random.Random, used: set, n_syll: Tuple[int, int]) -> str:
    while True:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(*n_syll)))
        if w not in used:
            used.add(w)
            return w


def make_lexicon(seed: int) -> Dict[str, List[Tuple[str, str]]]:
    """category -> [(source word, target word)]; source words end in a category letter."""
    rng = random.Random(seed)
    used_src, used_tgt, lexicon = set(), set(), {}
    for cat, n in CATEGORIES.items():
        pairs = []
        for _ in range(n):
            src = _word(rng, used_src, (1, 2)) + cat[0]
            tgt = _word(rng, used_tgt, (2, 3))
            pairs.append((src, tgt))
        lexicon[cat] = pairs
    return lexicon


class ToyGrammar:
    def __init__(self, seed: int = 1):
        self.lex = make_lexicon(seed)

    def _pick(self, rng, cat):
        return rng.choice(self.lex[cat])

    def noun_phrase(self, rng, depth: int):
        det, noun = self._pick(rng, "det"), self._pick(rng, "noun")
        adjs = [self._pick(rng, "adj") for _ in range(rng.choice([0, 0, 1, 1, 2]))]
        plural = rng.random() < 0.3
        src = [det[0]] + [a[0] for a in adjs] + [noun[0]] + (["-s"] if plural else [])
        tgt = [det[1], noun[1]] + (["-en"] if plural else []) + [a[1] for a in adjs]
        if depth > 0 and rng.random() < 0.25:
            prep = self._pick(rng, "prep")
            s2, t2 = self.noun_phrase(rng, depth - 1)
            src += [prep[0]] + s2
            tgt += [prep[1]] + t2
        return src, tgt

    def clause(self, rng, depth: int):
        subj_s, subj_t = self.noun_phrase(rng, 1)
        verb = self._pick(rng, "verb")
        obj_s, obj_t = self.noun_phrase(rng, 1)
        src, tgt = subj_s + [verb[0]] + obj_s, subj_t + obj_t
        if rng.random() < 0.4:
            adv = self._pick(rng, "adv")
            src.append(adv[0])
            tgt.append(adv[1])
        tgt.append(verb[1])
        if depth > 0 and rng.random() < 0.3:
            conj = self._pick(rng, "conj")
            s2, t2 = self.clause(rng, depth - 1)
            src += [conj[0]] + s2
            tgt += [conj[1]] + t2
        return src, tgt

    def sentences(self, n: int, seed: int):
        rng = random.Random(seed)
        for _ in range(n):
            s, t = self.clause(rng, 2)
            yield " ".join(s), " ".join(t)


    def long_sentences(self, n: int, seed: int, longer_than: int):
        """``n`` pairs whose source has more than ``longer_than`` words: clauses joined by conjunctions, as the
        grammar joins two, until the source is long enough."""
        rng = random.Random(seed)
        for _ in range(n):
            src, tgt = self.clause(rng, 0)
            while len(src) <= longer_than:
                conj = self._pick(rng, "conj")
                s2, t2 = self.clause(rng, 0)
                src += [conj[0]] + s2
                tgt += [conj[1]] + t2
            yield " ".join(src), " ".join(tgt)


SPLITS = {"train": (20000, 11), "valid": (500, 12), "test": (500, 13)}
LONG_SPLIT = ("long", 300, 14)  # name, pairs, seed offset


def write_pairs(out_dir: str, split: str, src: str, tgt: str, pairs) -> None:
    """``out_dir/<split>.<src>`` and ``.<tgt>``, one sentence a line, each written whole."""
    pairs = list(pairs)
    for lang, side in ((src, 0), (tgt, 1)):
        replace_file(os.path.join(out_dir, f"{split}.{lang}"), "".join(pair[side] + "\n" for pair in pairs))


def write_corpus(out_dir: str, seed: int = 1, sizes: Dict[str, int] = None, src: str = "src", tgt: str = "tgt",
                 long_split: bool = False):
    """Write {train,valid,test}.{src,tgt} to ``out_dir`` (with ``long_split``, also long.{src,tgt}: sources longer
    than every training source); returns the paths' prefix dict."""
    os.makedirs(out_dir, exist_ok=True)
    grammar = ToyGrammar(seed)
    prefixes = {}
    for split, (default_n, split_seed) in SPLITS.items():
        n = (sizes or {}).get(split, default_n)
        write_pairs(out_dir, split, src, tgt, grammar.sentences(n, seed * 1000 + split_seed))
        prefixes[split] = os.path.join(out_dir, split)
    if long_split:
        with open(os.path.join(out_dir, f"train.{src}")) as f:
            longest = max(len(line.split()) for line in f)
        name, default_n, split_seed = LONG_SPLIT
        write_pairs(out_dir, name, src, tgt,
                    grammar.long_sentences((sizes or {}).get(name, default_n), seed * 1000 + split_seed, longest))
        prefixes[name] = os.path.join(out_dir, name)
    return prefixes


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out_dir")
    p.add_argument("--seed", type=NON_NEGATIVE_INT, default=1)
    p.add_argument("--train-size", type=POSITIVE_INT, default=SPLITS["train"][0])
    args = p.parse_args()
    write_corpus(args.out_dir, args.seed, {"train": args.train_size})


if __name__ == "__main__":
    main()
