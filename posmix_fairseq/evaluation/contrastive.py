"""``posmix-contrastive``: LingEval97-style contrastive evaluation (Sennrich 2017; HC paper Table 4, Fig. 5).

Every reference translation and its contrastive variants (one error each) are scored by the model's
log-probability given the source, teacher-forced, with any architecture (fairseq's
``checkpoint_utils`` + the model's ``get_normalized_probs``). A decision is correct when the reference
scores higher than the variant. Accuracy is reported per error category and, for errors that carry
a ``distance`` (subject-verb agreement), by distance (Fig. 5).

Input, in LingEval97's own layout:

- ``PREFIX.SRC`` / ``PREFIX.TGT``: parallel text, one pair per line; the references and their
  contrastive variants are all lines of these files (a variant repeats its reference's source);
- ``PREFIX.json``: a list of ``{"sentnum": N, "errors": [{"sentnum": M, "type": "...",
  "distance": D (optional)}, ...]}`` with 0-based line numbers, as Sennrich's ``evaluate.py`` reads them.

Scores: the summed log-probability of the target tokens, EOS included (LingEval97), or with
``--per-token`` its mean per token (HC paper footnote 17: "lower token-level cross entropy").
Text is encoded with ``--spm-model`` (SentencePiece, as the recipes' BPE), or taken as already
tokenised when no model is given. The real set (Sennrich 2017) is fetched by the recipe
(examples/iwslt16_en_de/run.sh, stage ``contrastive``); ``posmix_fairseq/evaluation/data/`` ships a
tiny example in the same format.

    posmix-contrastive data-bin --path checkpoint_best.pt --prefix lingeval97 --src en --tgt de \\
        --spm-model bpe/spm.model --per-token --json contrastive.json
"""
import argparse
import json
import math
import os
from collections import defaultdict
from typing import Dict, List, Optional

import torch

from .fairseq_loading import encode_lines, load_for_inference

EXAMPLE_PREFIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lingeval97_tiny")


def read_contrastive_set(prefix: str, src: str, tgt: str):
    paths = {k: f"{prefix}.{k}" for k in (src, tgt, "json")}
    for p in paths.values():
        if not os.path.isfile(p):
            raise ValueError(f"--prefix {prefix}: missing {p} (expected PREFIX.{src}, PREFIX.{tgt}, PREFIX.json)")
    with open(paths[src], encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f]
    with open(paths[tgt], encoding="utf-8") as f:
        targets = [line.rstrip("\n") for line in f]
    if len(sources) != len(targets):
        raise ValueError(f"{paths[src]} has {len(sources)} lines but {paths[tgt]} has {len(targets)}")
    with open(paths["json"], encoding="utf-8") as f:
        items = json.load(f)
    for item in items:
        for n in [item["sentnum"]] + [e["sentnum"] for e in item["errors"]]:
            if not 0 <= n < len(targets):
                raise ValueError(f"{paths['json']}: sentnum {n} is outside the {len(targets)} lines")
    return sources, targets, items


def accuracy(items, scores: List[float]):
    """(per category {type: (correct, total)}, by distance {type: {d: (correct, total)}})."""
    by_cat: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    by_dist: Dict[str, Dict[int, List[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for item in items:
        ref_score = scores[item["sentnum"]]
        for err in item["errors"]:
            ok = int(ref_score > scores[err["sentnum"]])
            by_cat[err["type"]][0] += ok
            by_cat[err["type"]][1] += 1
            if err.get("distance") is not None:
                d = by_dist[err["type"]][int(err["distance"])]
                d[0] += ok
                d[1] += 1
    return ({k: tuple(v) for k, v in by_cat.items()},
            {k: {d: tuple(v) for d, v in sorted(ds.items())} for k, ds in by_dist.items()})


def score_pairs(models, task, sources: List[List[int]], targets: List[List[int]], per_token=False,
                batch_size: int = 32) -> List[float]:
    """Log-probability (natural log) of each target given its source; ensemble = mean of probabilities."""
    from fairseq.data import data_utils

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    out: List[float] = []
    for start in range(0, len(sources), batch_size):
        src = sources[start:start + batch_size]
        tgt = targets[start:start + batch_size]
        src_tokens = data_utils.collate_tokens(src, src_dict.pad(), src_dict.eos(), left_pad=True)
        src_lengths = torch.tensor([len(s) for s in src])
        tgt_tokens = data_utils.collate_tokens(tgt, tgt_dict.pad(), tgt_dict.eos(), left_pad=False)
        prev = data_utils.collate_tokens(tgt, tgt_dict.pad(), tgt_dict.eos(), left_pad=False,
                                         move_eos_to_beginning=True)
        lprobs = None
        with torch.inference_mode():
            for m in models:
                net_out = m(src_tokens, src_lengths, prev)
                lp = m.get_normalized_probs(net_out, log_probs=True).float()
                lprobs = lp if lprobs is None else torch.logaddexp(lprobs, lp)
        if len(models) > 1:
            lprobs = lprobs - math.log(len(models))
        tok_lp = lprobs.gather(-1, tgt_tokens.unsqueeze(-1)).squeeze(-1)
        mask = tgt_tokens.ne(tgt_dict.pad())
        sums = (tok_lp * mask).sum(1)
        for s, n in zip(sums.tolist(), mask.sum(1).tolist()):
            out.append(s / n if per_token else s)
    return out


def evaluate(data_dir, checkpoint, prefix, src, tgt, spm_model=None, per_token=False, extra=()):
    sources, targets, items = read_contrastive_set(prefix, src, tgt)
    if spm_model:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=spm_model)
        sources = [" ".join(sp.encode(s, out_type=str)) for s in sources]
        targets = [" ".join(sp.encode(t, out_type=str)) for t in targets]
    cfg, task, models = load_for_inference(data_dir, checkpoint, list(extra), subset="none")
    src_ids = encode_lines(task.source_dictionary, sources)
    tgt_ids = encode_lines(task.target_dictionary, targets)
    scores = score_pairs(models, task, src_ids, tgt_ids, per_token)
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
    p = argparse.ArgumentParser(prog="posmix-contrastive", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("data", help="fairseq-preprocess --destdir (for the dictionaries)")
    p.add_argument("--path", required=True, help="checkpoint(s), ':'-separated for an ensemble")
    p.add_argument("--prefix", default=EXAMPLE_PREFIX, help="contrastive set prefix (default: the tiny example)")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--spm-model", help="SentencePiece model used for the training data")
    p.add_argument("--per-token", action="store_true", help="mean log-prob per token (HC footnote 17)")
    p.add_argument("--scores-out", help="write one score per line of the set (LingEval97's scores file)")
    p.add_argument("--json", help="write accuracies here")
    a = p.parse_args(argv)
    try:
        scores, (by_cat, by_dist) = evaluate(a.data, a.path, a.prefix, a.src, a.tgt, a.spm_model, a.per_token)
    except ValueError as e:
        raise SystemExit(f"posmix-contrastive: {e}")
    print(format_tables(by_cat, by_dist))
    if a.scores_out:
        with open(a.scores_out, "w") as f:
            f.writelines(f"{s}\n" for s in scores)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"by_category": {k: {"correct": c, "total": n} for k, (c, n) in by_cat.items()},
                       "by_distance": {k: {str(d): {"correct": c, "total": n} for d, (c, n) in ds.items()}
                                       for k, ds in by_dist.items()}}, f, indent=1)
    return scores, by_cat, by_dist


def cli():
    """Console entry point: main() returns results for tests; the process exits 0 on success."""
    main()


if __name__ == "__main__":
    cli()
