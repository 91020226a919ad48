"""``posmix-score``: BLEU, chrF++, chrF, TER, COMET and BLEURT for one or more systems, with paired
bootstrap resampling against baseline systems; a Markdown table, and CSV/JSON for scripts.

    posmix-score gen.rposnet.txt --baseline gen.transformer.txt --spm-model bpe/spm.model \\
        --ref raw/test.de --src raw/test.en --comet-model ~/models/wmt20-comet-da --csv scores.csv
    posmix-score --hyp hyp.txt --ref ref.txt --metrics bleu,chrf++ --tokenize zh

Systems are fairseq-generate outputs (their H- lines; --use-detok-lines takes D- lines) or --hyp text
files. Hypotheses (and the T-/S- lines used when --ref/--src are not given) are detokenised with the
recipe's step: --spm-model (SentencePiece), --remove-bpe (subword-nmt '@@ '), --moses-detok LANG.
--ref/--src files are used as they are (raw text). A learned metric whose model is not given or does
not load is reported as skipped, with how to provide it; the other metrics are still computed.
"""
import argparse
import csv
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .detok import Detokenizer
from .generate_output import read_generate_output
from .metrics import (ALL_METRICS, BLEU_TOKENIZERS, LEARNED_METRICS, SACREBLEU_METRICS, BleurtScorer,
                      CometScorer, MetricUnavailable, sacrebleu_metric)
from .significance import paired_bootstrap_segments

METRIC_ORDER = ["BLEU", "chrF2++", "chrF2", "TER", "COMET", "BLEURT"]


@dataclass
class System:
    name: str
    path: str
    hyps: List[str]
    is_baseline: bool = False
    refs: Optional[List[str]] = None  # from T- lines
    srcs: Optional[List[str]] = None  # from S- lines


@dataclass
class Cell:
    score: float
    mean: Optional[float] = None
    ci: Optional[float] = None
    p_values: Dict[str, float] = field(default_factory=dict)


def read_lines(path: str) -> List[str]:
    from ..raw_text import read_lines as rl

    return rl(path)


def load_system(path: str, name: str, detok: Detokenizer, is_baseline: bool, use_d_lines: bool,
                from_text: bool, untranslated=()) -> System:
    if from_text:
        return System(name, path, detok.lines(read_lines(path)), is_baseline)
    gen = read_generate_output(path, untranslated)
    if use_d_lines and not gen.detok_hypotheses:
        raise ValueError(f"{path}: --use-detok-lines, but the file has no D- line for every sentence")
    hyps = gen.detok_hypotheses if use_d_lines else detok.lines(gen.hypotheses)
    return System(name, path, hyps, is_baseline, refs=detok.lines(gen.references) if gen.references else None,
                  srcs=detok.lines(gen.sources) if gen.sources else None)


def unique_names(paths: List[str], given: Optional[List[str]]) -> List[str]:
    if given:
        if len(given) != len(paths):
            raise ValueError(f"--names: {len(given)} names for {len(paths)} systems")
        return given
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return names if len(set(names)) == len(names) else [p for p in paths]


def score_systems(systems: List[System], refs: List[str], srcs: Optional[List[str]], metrics: List[str],
                  tokenize="13a", lowercase=False, comet_model=None, bleurt_checkpoint=None, n_bootstrap=1000,
                  batch_size=16):
    """Returns (cells[system][metric] -> Cell, signatures{metric: str}, skipped{metric: reason})."""
    for s in systems:
        if len(s.hyps) != len(refs):
            raise ValueError(f"{s.path}: {len(s.hyps)} hypotheses but {len(refs)} references")
    cells: Dict[str, Dict[str, Cell]] = {s.name: {} for s in systems}
    signatures: Dict[str, str] = {}
    skipped: Dict[str, str] = {}
    baselines = [s for s in systems if s.is_baseline]

    sb = {m: sacrebleu_metric(m, tokenize, lowercase) for m in metrics if m in SACREBLEU_METRICS}
    if sb:
        from sacrebleu.significance import PairedTest

        for name, metric in sb.items():
            label = None
            for s in systems:
                res = metric.corpus_score(s.hyps, [refs])
                label = res.name
                cells[s.name][label] = Cell(res.score)
            signatures[label] = str(metric.get_signature())
        if n_bootstrap > 0:
            # sacreBLEU's own paired bootstrap: the first system of a PairedTest is its baseline
            groups = [[b] + [s for s in systems if s is not b] for b in baselines] or [[s] for s in systems]
            for group in groups:
                test = PairedTest([(s.name, s.hyps) for s in group], {k: sacrebleu_metric(k, tokenize, lowercase)
                                                                      for k in sb},
                                  references=[refs], test_type="bs", n_samples=n_bootstrap)
                sigs, scores = test()
                for label, results in scores.items():
                    if label == "System":
                        continue
                    signatures[label] = str(sigs[label])
                    for s, r in zip(group, results):
                        c = cells[s.name][label]
                        if c.mean is None or s is group[0]:
                            c.mean, c.ci = r.mean, r.ci
                        if s is not group[0] and r.p_value is not None:
                            c.p_values[group[0].name] = r.p_value

    for m in metrics:
        if m not in LEARNED_METRICS:
            continue
        try:
            scorer = (CometScorer(comet_model, batch_size) if m == "comet"
                      else BleurtScorer(bleurt_checkpoint, batch_size))
            segs = {}
            for s in systems:
                r = scorer(s.hyps, refs, srcs)
                segs[s.name] = r.segment_scores
                cells[s.name][r.name] = Cell(r.score)
                signatures[r.name] = r.signature
        except MetricUnavailable as e:
            skipped[m.upper()] = str(e)
            continue
        if n_bootstrap > 0:
            for s in systems:
                c = cells[s.name][r.name]
                own = paired_bootstrap_segments(segs[s.name], None, n_bootstrap)
                c.mean, c.ci = own.mean, own.ci
                for b in baselines:
                    if b is not s:
                        c.p_values[b.name] = paired_bootstrap_segments(segs[s.name], segs[b.name], n_bootstrap).p_value
    return cells, signatures, skipped


def format_cell(c: Optional[Cell], single_baseline: Optional[str]) -> str:
    if c is None:
        return "skipped"
    text = f"{c.score:.2f}"
    if c.ci is not None:
        text += f" ± {c.ci:.2f}"
    for b, p in c.p_values.items():
        text += f" (p={p:.4f})" if single_baseline else f" (p[{b}]={p:.4f})"
    return text


def markdown_table(systems: List[System], cells, signatures, skipped, detok_desc: str, n_bootstrap: int) -> str:
    labels = [m for m in METRIC_ORDER if m in signatures] + [m for m in skipped if m not in signatures]
    baselines = [s.name for s in systems if s.is_baseline]
    single = baselines[0] if len(baselines) == 1 else None
    lines = ["| system | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for s in systems:
        tag = " (baseline)" if s.is_baseline else ""
        lines.append(f"| {s.name}{tag} | " + " | ".join(format_cell(cells[s.name].get(m), single) for m in labels)
                     + " |")
    notes = [f"Detokenisation: {detok_desc}."]
    if n_bootstrap > 0:
        notes.append(f"± is the half-width of the 95% confidence interval from {n_bootstrap} bootstrap resamples"
                     + (f"; p is the paired bootstrap p-value against {', '.join(baselines)}" if baselines else "")
                     + " (sacreBLEU's PairedTest for BLEU/chrF/TER; the same test over segment scores for COMET/BLEURT).")
    for m, sig in signatures.items():
        notes.append(f"{m} signature: `{sig}`")
    for m, reason in skipped.items():
        notes.append(f"**{m} skipped**: {reason}")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def read_untranslated(path: str):
    """(ids, reason) from the recipe's generate stage (JSON with "ids" and "reason") or one id per line."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        return sorted(int(i) for i in data["ids"]), data.get("reason") or "not translated"
    return sorted(int(x) for x in text.split()), "not translated"


def to_records(systems, cells):
    rows = []
    for s in systems:
        for m, c in cells[s.name].items():
            base = {"system": s.name, "path": s.path, "baseline": s.is_baseline, "metric": m, "score": c.score,
                    "mean": c.mean, "ci95": c.ci}
            if c.p_values:
                for b, p in c.p_values.items():
                    rows.append({**base, "vs": b, "p_value": p})
            else:
                rows.append({**base, "vs": None, "p_value": None})
    return rows


def build_parser():
    p = argparse.ArgumentParser(prog="posmix-score", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("gen_out", nargs="*", help="fairseq-generate outputs (systems)")
    p.add_argument("--baseline", nargs="+", default=[], metavar="GEN_OUT",
                   help="baseline systems (fairseq-generate outputs, or text files with --hyp-files); every other "
                        "system gets a paired-bootstrap p-value against each")
    p.add_argument("--hyp", nargs="+", default=[], metavar="FILE", help="hypothesis text files (systems)")
    p.add_argument("--baseline-hyp", nargs="+", default=[], metavar="FILE", help="baseline hypothesis text files")
    p.add_argument("--ref", help="reference text file (raw; default: the T- lines of the first output)")
    p.add_argument("--src", help="source text file (raw; COMET needs it; default: the S- lines)")
    p.add_argument("--names", nargs="+", help="display names: the systems in order, then the baselines")
    p.add_argument("--spm-model", help="SentencePiece model: join its pieces back (the raw_text/Multi30k recipes)")
    p.add_argument("--remove-bpe", nargs="?", const="@@ ", default=None,
                   help="remove subword-nmt BPE markers (default marker '@@ ')")
    p.add_argument("--moses-detok", metavar="LANG", help="Moses-detokenise for this target language")
    p.add_argument("--use-detok-lines", action="store_true", help="score fairseq's D- lines as they are")
    p.add_argument("--metrics", default=",".join(ALL_METRICS),
                   help=f"comma-separated subset of {','.join(ALL_METRICS)} (default: all)")
    p.add_argument("--tokenize", default="13a", help=f"sacreBLEU BLEU tokenizer: {', '.join(BLEU_TOKENIZERS)}")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU/chrF/TER")
    p.add_argument("--comet-model", help="local COMET model directory or .ckpt (e.g. wmt20-comet-da)")
    p.add_argument("--bleurt-checkpoint", help="local bleurt-pytorch model directory (e.g. BLEURT-20)")
    p.add_argument("--batch-size", type=int, default=16, help="COMET/BLEURT batch size")
    p.add_argument("--bootstrap-samples", type=int, default=1000, help="paired bootstrap resamples (0: off)")
    p.add_argument("--csv", help="write one row per system x metric (x baseline) here")
    p.add_argument("--json", help="write the full result here")
    p.add_argument("--untranslated", metavar="FILE",
                   help="sentence ids not translated (the recipe's untranslated.<name>.json, or one id per line): "
                        "absent from the outputs, left out of --ref/--src, and counted beside the scores")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    metrics = [m.strip().lower() for m in args.metrics.split(",") if m.strip()]
    bad = [m for m in metrics if m not in ALL_METRICS]
    if bad or not metrics:
        raise SystemExit(f"--metrics: unknown {bad or '(empty)'}; valid: {', '.join(ALL_METRICS)}")
    if args.tokenize not in BLEU_TOKENIZERS:
        raise SystemExit(f"--tokenize {args.tokenize!r}: valid values are {', '.join(BLEU_TOKENIZERS)}")
    if args.bootstrap_samples < 0:
        raise SystemExit(f"--bootstrap-samples must be >= 0 (got {args.bootstrap_samples})")
    entries = ([(p, False, False) for p in args.gen_out] + [(p, False, True) for p in args.hyp]
               + [(p, True, False) for p in args.baseline] + [(p, True, True) for p in args.baseline_hyp])
    if not entries:
        raise SystemExit("posmix-score: give at least one system (a fairseq-generate output or --hyp FILE)")
    for path, _, _ in entries:
        if not os.path.isfile(path):
            raise SystemExit(f"posmix-score: no such file: {path}")
    untranslated, reason = read_untranslated(args.untranslated) if args.untranslated else ([], "")
    try:
        detok = Detokenizer(args.spm_model, args.remove_bpe, args.moses_detok)
        names = unique_names([e[0] for e in entries], args.names)
        systems = [load_system(path, name, detok, is_b, args.use_detok_lines, from_text, untranslated)
                   for (path, is_b, from_text), name in zip(entries, names)]
    except ValueError as e:
        raise SystemExit(f"posmix-score: {e}")
    total = None
    if untranslated and (args.ref or args.src):
        total = len(read_lines(args.ref or args.src))
        if untranslated[-1] >= total:
            raise SystemExit(f"posmix-score: --untranslated names id {untranslated[-1]}, but the test set has {total}")
    skip = set(untranslated)
    keep = (lambda lines: [x for i, x in enumerate(lines) if i not in skip]) if untranslated else None
    refs = read_lines(args.ref) if args.ref else next((s.refs for s in systems if s.refs), None)
    if refs is None:
        raise SystemExit("posmix-score: no references: pass --ref FILE (text files have no T- lines)")
    if args.ref and keep:
        refs = keep(refs)
    srcs = read_lines(args.src) if args.src else next((s.srcs for s in systems if s.srcs), None)
    if args.src and keep and srcs is not None:
        srcs = keep(srcs)
    if srcs is not None and len(srcs) != len(refs):
        raise SystemExit(f"posmix-score: {len(srcs)} sources but {len(refs)} references")
    try:
        cells, signatures, skipped = score_systems(systems, refs, srcs, metrics, args.tokenize, args.lowercase,
                                                   args.comet_model, args.bleurt_checkpoint, args.bootstrap_samples,
                                                   args.batch_size)
    except ValueError as e:
        raise SystemExit(f"posmix-score: {e}")
    table = markdown_table(systems, cells, signatures, skipped, detok.description, args.bootstrap_samples)
    note = None
    if untranslated:
        total = total or len(refs) + len(untranslated)
        note = f"{len(untranslated)} of {total} test sentences {reason}: not translated; scores over the rest"
        table = f"**{note}**\n\n" + table
    print(table)
    records = to_records(systems, cells)
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(records[0].keys()) if records else ["system"])
            w.writeheader()
            w.writerows(records)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"detokenization": detok.description, "signatures": signatures, "skipped": skipped,
                       "n_segments": len(refs), "bootstrap_samples": args.bootstrap_samples, "rows": records,
                       "untranslated": {"count": len(untranslated), "total": total, "ids": untranslated,
                                        "reason": reason, "note": note} if untranslated else None},
                      f, indent=1)
    return cells, signatures, skipped


def cli():
    """Console entry point: main() returns results for tests; the process exits 0 on success."""
    main()


if __name__ == "__main__":
    cli()
