"""``posmix-contrastive``: LingEval97-style contrastive evaluation (Sennrich 2017; HC paper Table 4, Fig. 5).

Every reference translation and its contrastive variants (one error each) are scored by the model's
log-probability given the source, teacher-forced, with any architecture: fairseq's own
``SequenceScorer``, built by the task as ``fairseq-generate --score-reference`` builds it (an ensemble
averages the probabilities). A decision is correct when the reference scores higher than the variant. Accuracy is reported per error category and, for errors that carry
a ``distance`` (subject-verb agreement), by distance (Fig. 5).

Input: LingEval97's own ``lingeval97.json`` (https://github.com/rsennrich/lingeval97, README "Data
format"): a list of entries ``{"source", "reference", "origin", "errors": [{"type", "contrastive",
"distance" (optional), "frequency" (optional)}, ...]}``. The text is read from the JSON itself (no
``json_to_plaintext.py`` step). ``--scores-out`` writes the scores in the order Sennrich's
``evaluate.py`` reads them (per entry: the reference, then each contrastive variant, one per line), so
``python evaluate.py -r lingeval97.json --maximize < scores`` cross-checks the tables printed here.
Distances are binned as ``evaluate.py`` bins them (0 ... 15, then ">15"); like it, a tie is not a
correct decision.

Scores: the summed log-probability of the target tokens, EOS included (LingEval97), or with
``--per-token`` its mean per token (HC paper footnote 17: "lower token-level cross entropy").
Text is encoded with ``--spm-model`` (SentencePiece, as the recipes' BPE), or taken as already
tokenised when no model is given. The real set (Sennrich 2017, 97,000 contrastive pairs) is
``lingeval97.json`` of https://github.com/rsennrich/lingeval97; the recipes' stage ``contrastive``
(examples/common/stages.sh) fetches it.

    posmix-contrastive data-bin --path checkpoint_best.pt --set lingeval97.json \\
        --spm-model bpe/spm.model --per-token --json contrastive.json
"""
from collections import defaultdict
from typing import Dict, List, Optional

import torch

from ..recipes.prepare_data import Normaliser
from ..fairseq_loading import encode_lines, load_for_inference
from ..command import (build_parser as command_parser, check_checkpoints, check_data_dir, check_input_file,
                        check_output_file, console, load_sentencepiece, open_output, read_json, write_json)

#: evaluate.py's distance bins: each distance 0 ... 15, everything beyond in ">15"
LAST_DISTANCE_BIN = 15


def read_contrastive_set(path: str):
    """(sources, targets, entries): the pairs to score in evaluate.py's order (per entry the reference,
    then its variants) and the entries of ``lingeval97.json``."""
    entries = read_json(path, "--set", "LingEval97's lingeval97.json")
    sources, targets = [], []
    for i, entry in enumerate(entries):
        missing = [k for k in ("source", "reference", "errors") if k not in entry]
        missing += [f"errors[{j}].{k}" for j, e in enumerate(entry.get("errors", [])) for k in ("type", "contrastive")
                    if k not in e]
        if missing:
            raise ValueError(f"--set {path}: entry {i} lacks {', '.join(missing)} (LingEval97 entries have source, "
                             "reference and errors with type and contrastive)")
        for target in [entry["reference"]] + [e["contrastive"] for e in entry["errors"]]:
            sources.append(entry["source"])
            targets.append(target)
    return sources, targets, entries


def distance_bin(distance) -> str:
    d = int(distance)
    return str(d) if d <= LAST_DISTANCE_BIN else f">{LAST_DISTANCE_BIN}"


def accuracy(entries, scores: List[float]):
    """(per category {type: (correct, total)}, by distance {type: {bin: (correct, total)}}) from the
    scores in evaluate.py's order; a decision is correct when the reference scores strictly higher."""
    by_cat: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    by_dist: Dict[str, Dict[str, List[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    expected = sum(1 + len(e["errors"]) for e in entries)
    if len(scores) != expected:
        raise ValueError(f"{len(scores)} scores for a set of {expected} references and variants")
    it = iter(scores)
    for entry in entries:
        ref_score = next(it)
        for err in entry["errors"]:
            ok = int(ref_score > next(it))
            by_cat[err["type"]][0] += ok
            by_cat[err["type"]][1] += 1
            if err.get("distance") is not None:
                d = by_dist[err["type"]][distance_bin(err["distance"])]
                d[0] += ok
                d[1] += 1

    def order(b: str):
        return (1, 0) if b.startswith(">") else (0, int(b))

    return ({k: tuple(v) for k, v in by_cat.items()},
            {k: {d: tuple(ds[d]) for d in sorted(ds, key=order)} for k, ds in by_dist.items()})


def score_pairs(models, task, generator, sources: List[torch.Tensor], targets: List[torch.Tensor], per_token=False,
                batch_size: int = 32, left_pad_source: bool = True) -> List[float]:
    """Log-probability (natural log) of each target given its source, EOS included: the sum of
    ``SequenceScorer``'s positional scores, or their mean with ``per_token``."""
    from fairseq.data import LanguagePairDataset  # fairseq loads in seconds: not on --help

    dataset = LanguagePairDataset(sources, [len(s) for s in sources], task.source_dictionary, targets,
                                  [len(t) for t in targets], task.target_dictionary, left_pad_source=left_pad_source,
                                  left_pad_target=False)
    out: List[Optional[float]] = [None] * len(sources)
    for start in range(0, len(sources), batch_size):
        sample = dataset.collater([dataset[i] for i in range(start, min(len(sources), start + batch_size))])
        hypos = task.inference_step(generator, models, sample)
        for i, hypo in zip(sample["id"].tolist(), hypos):
            tok = hypo[0]["positional_scores"].double()
            out[i] = float(tok.mean() if per_token else tok.sum())
    return out


def evaluate(data_dir, checkpoint, set_path, spm_model=None, per_token=False, extra=(), src="en", tgt="de",
             moses=False, lowercase=False):
    """Scores (evaluate.py's order) and accuracies; the raw text goes through the recipe's own
    normalisation (``recipes.prepare_data.Normaliser``: Moses, lowercasing) and SentencePiece model."""
    sources, targets, items = read_contrastive_set(set_path)
    if moses or lowercase:
        norm_src, norm_tgt = Normaliser(src, moses, lowercase), Normaliser(tgt, moses, lowercase)
        sources, targets = [norm_src(s) for s in sources], [norm_tgt(t) for t in targets]
    if spm_model:
        sp = load_sentencepiece(spm_model, "--spm-model")
        sources = [" ".join(sp.encode(s, out_type=str)) for s in sources]
        targets = [" ".join(sp.encode(t, out_type=str)) for t in targets]
    cfg, task, models = load_for_inference(data_dir, checkpoint, ["--score-reference", *extra], subset="none")
    generator = task.build_generator(models, cfg.generation)  # a SequenceScorer (--score-reference)
    src_ids = encode_lines(task.source_dictionary, sources)
    tgt_ids = encode_lines(task.target_dictionary, targets)
    scores = score_pairs(models, task, generator, src_ids, tgt_ids, per_token,
                         left_pad_source=cfg.task.left_pad_source)
    return scores, accuracy(items, scores)


def format_tables(by_cat, by_dist) -> str:
    lines = ["| error type | accuracy (%) | correct / total |", "|---|---|---|"]
    for k, (c, n) in sorted(by_cat.items()):
        lines.append(f"| {k} | {100.0 * c / n:.1f} | {c} / {n} |")
    for k, ds in by_dist.items():
        lines += ["", f"| {k}: distance | accuracy (%) | correct / total |", "|---|---|---|"]
        lines += [f"| {d} | {100.0 * c / n:.1f} | {c} / {n} |" for d, (c, n) in ds.items()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-contrastive", __doc__)
    p.add_argument("data", metavar="DIR", help="fairseq-preprocess --destdir (for the dictionaries)")
    p.add_argument("--path", required=True, metavar="FILE", help="checkpoint(s), ':'-separated for an ensemble")
    p.add_argument("--set", required=True, metavar="FILE",
                   help="LingEval97's lingeval97.json (https://github.com/rsennrich/lingeval97)")
    p.add_argument("-s", "--source-lang", default="en", metavar="LANG", help="source language (for --moses)")
    p.add_argument("-t", "--target-lang", default="de", metavar="LANG", help="target language (for --moses)")
    p.add_argument("--moses", action="store_true", help="Moses normalisation + tokenisation, as the recipe's prepare")
    p.add_argument("--lowercase", action="store_true", help="lowercase, as the recipe's prepare")
    p.add_argument("--spm-model", metavar="FILE", help="SentencePiece model used for the training data")
    p.add_argument("--per-token", action="store_true", help="mean log-prob per token (HC footnote 17)")
    p.add_argument("--scores-out", metavar="FILE",
                   help="write the scores in evaluate.py's order (per entry: reference, then variants; '-': stdout)")
    p.add_argument("--json", metavar="FILE", help="write accuracies here ('-': stdout)")
    a = p.parse_args(argv)
    check_data_dir(a.data)
    check_checkpoints(a.path)
    check_input_file(a.set, "--set")
    if a.spm_model:
        check_input_file(a.spm_model, "--spm-model")
    for flag, path in (("--scores-out", a.scores_out), ("--json", a.json)):
        if path:
            check_output_file(path, flag)
    try:
        scores, (by_cat, by_dist) = evaluate(a.data, a.path, a.set, a.spm_model, a.per_token, src=a.source_lang,
                                               tgt=a.target_lang, moses=a.moses, lowercase=a.lowercase)
    except ValueError as e:
        raise SystemExit(f"posmix-contrastive: {e}")
    print(format_tables(by_cat, by_dist))
    if a.scores_out:
        with open_output(a.scores_out, "--scores-out") as f:
            f.writelines(f"{s}\n" for s in scores)
    if a.json:
        write_json(a.json, {"by_category": {k: {"correct": c, "total": n} for k, (c, n) in by_cat.items()},
                            "by_distance": {k: {d: {"correct": c, "total": n} for d, (c, n) in ds.items()}
                                            for k, ds in by_dist.items()}})
    return scores, by_cat, by_dist


cli = console(main, "posmix-contrastive")


if __name__ == "__main__":
    raise SystemExit(cli())
