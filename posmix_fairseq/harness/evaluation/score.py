"""``posmix-score``: BLEU, chrF++, chrF, TER, the COMET family (COMET, CometKiwi, XCOMET) and BLEURT for
one or more systems, with paired bootstrap resampling and paired approximate randomization against
baseline systems; a Markdown table, and CSV/JSON for scripts.

    posmix-score gen.rposnet.txt --baseline gen.transformer.txt --spm-model bpe/spm.model \\
        --ref raw/test.de --src raw/test.en --comet-model ~/models/wmt22-comet-da \\
        --comet-model ~/models/wmt22-cometkiwi-da --csv scores.csv
    posmix-score --hyp hyp.txt --ref ref.txt --metrics bleu,chrf++ --tokenize zh

Systems are fairseq-generate outputs (their H- lines; --use-detok-lines takes D- lines) or --hyp text
files. Hypotheses (and the T-/S- lines used when --ref/--src are not given) are detokenised with the
recipe's steps: --spm-model (SentencePiece), --remove-bpe (subword-nmt '@@ '; --remove-bpe sentencepiece:
pieces joined without the model), --moses-detok LANG; a subword step runs only on lines that still hold
subword units, so lines that fairseq-generate already decoded (--bpe, --post-process) are never decoded
twice. --ref/--src files are raw text, used as they
are. sacreBLEU's metrics use sacreBLEU's defaults (TER case-insensitive). A metric asked for that cannot
be computed (its model does not load or download, its inputs are missing) ends the command with exit
status 1, the reason and the fix; COMET's model defaults to COMET's own (Unbabel/wmt22-comet-da). One
file given as two systems (a system and its baseline) is refused, and so is a fairseq-generate output
with a sentence id twice (two outputs concatenated).
"""
import csv
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..command import (CommandError, UsageError, build_parser as command_parser, check_input_file, check_output_file,
                        console, open_output, read_text, read_text_lines, same_file)
from .detok import REMOVE_BPE_CHOICES, Detokenizer, check_plain
from .generate_output import GenerateOutput, read_generate_output
from .metrics import (ALL_METRICS, BLEU_TOKENIZERS, LEARNED_METRICS, SACREBLEU_METRICS, BleurtScorer, CometScorer,
                      MetricUnavailable, format_signature, resolve_gpus, sacrebleu_metric)
from .significance import paired_approximate_randomization, paired_bootstrap, sacrebleu_seed
from ..command import NON_NEGATIVE_INT, Number, POSITIVE_INT

SACREBLEU_ORDER = ["BLEU", "chrF2++", "chrF2", "TER"]
#: the smallest invocations tests/test_entry_points.py starts from, per file option ({GEN_OUT}, {FILE}: good inputs)
EXAMPLE_ARGUMENTS = {None: ["{GEN_OUT}", "--metrics", "bleu"], "--hyp": ["--ref", "{FILE}", "--metrics", "bleu"],
                     "--baseline-hyp": ["--hyp", "{FILE}", "--ref", "{FILE}", "--metrics", "bleu"]}
RAW_HINT = "pass the raw text (the recipes' prep/raw/test.LANG), not the subword-encoded file"


@dataclass
class System:
    name: str
    path: str
    hyps: List[str]
    is_baseline: bool = False
    decoding: str = ""                        # what was applied to the hypotheses
    gen: Optional[GenerateOutput] = None      # the parsed fairseq-generate output (None for --hyp files)


@dataclass
class Cell:
    score: float
    mean: Optional[float] = None
    ci: Optional[float] = None
    p_bootstrap: Dict[str, float] = field(default_factory=dict)  # baseline name -> p
    p_ar: Dict[str, float] = field(default_factory=dict)


@dataclass
class ScoringOptions:
    metrics: Sequence[str] = ALL_METRICS
    tokenize: str = "13a"
    lowercase: bool = False
    ter_case_sensitive: bool = False
    comet_models: Sequence[str] = ()
    bleurt_checkpoint: Optional[str] = None
    batch_size: int = 16
    gpus: Optional[int] = None
    bootstrap_samples: int = 1000
    ar_trials: int = 10000

    @classmethod
    def from_args(cls, args, metrics: Sequence[str]) -> "ScoringOptions":
        return cls(metrics=list(metrics), tokenize=args.tokenize, lowercase=args.lowercase,
                   ter_case_sensitive=args.ter_case_sensitive, comet_models=list(args.comet_model or []),
                   bleurt_checkpoint=args.bleurt_checkpoint, batch_size=args.batch_size, gpus=args.gpus,
                   bootstrap_samples=args.paired_bs_n, ar_trials=args.paired_ar_n)


@dataclass
class Scores:
    cells: Dict[str, Dict[str, Cell]]     # system -> metric label -> cell
    signatures: Dict[str, str]            # metric label -> signature
    skipped: Dict[str, str]               # metric -> why
    details: Dict[str, Dict[str, dict]] = field(default_factory=dict)  # system -> label -> e.g. error spans


def read_lines(path: str, option: Optional[str] = None) -> List[str]:
    """The lines of a text file (``-``: stdin); errors name ``option``, the file and the line."""
    return read_text_lines(path, option)


def load_system(path: str, name: str, detok: Detokenizer, is_baseline: bool, use_d_lines: bool,
                from_text: bool, untranslated=()) -> System:
    if from_text:
        hyps, how = detok.decode(read_lines(path, "--hyp"), f"lines of {path}")
        return System(name, path, hyps, is_baseline, decoding=f"{path}: {how}")
    gen = read_generate_output(path, untranslated)
    if use_d_lines:
        if not gen.detok_hypotheses:
            raise ValueError(f"{path}: --use-detok-lines, but the file has no D- line for every sentence")
        check_plain(gen.detok_hypotheses, f"D- lines of {path}",
                    "fairseq-generate ran without --bpe: score the H- lines (drop --use-detok-lines) with "
                    "--spm-model or --remove-bpe")
        return System(name, path, gen.detok_hypotheses, is_baseline, decoding=f"{path}: D- lines as they are", gen=gen)
    hyps, how = detok.decode(gen.hypotheses, f"H- lines of {path}")
    return System(name, path, hyps, is_baseline, decoding=f"{path} (H- lines): {how}", gen=gen)


def side_text(systems: List[System], path: Optional[str], kind: str, detok: Detokenizer) -> Tuple[Optional[List[str]], str]:
    """References (kind "T") or sources ("S"): the raw file when given, else the first fairseq-generate
    output's T-/S- lines, decoded as needed. Returns (lines or None, how)."""
    flag = "--ref" if kind == "T" else "--src"
    if path:
        lines = read_lines(path, flag)
        check_plain(lines, f"{flag} {path} lines", RAW_HINT)
        return lines, f"{flag} {path} (raw text, as it is)"
    for s in systems:
        if s.gen is not None:
            lines = s.gen.references if kind == "T" else s.gen.sources
            if lines:
                lines, how = detok.decode(lines, f"{kind}- lines of {s.path}")
                note = f"{kind}- lines of {s.path}: {how}"
                if kind == "T" and any("<<unk>>" in x for x in lines):
                    note += " (they hold <<unk>> for words outside the dictionary: pass --ref with the raw references)"
                return lines, note
            if s.gen.missing_lines(kind):
                raise ValueError(f"{s.gen.missing_lines(kind)}: regenerate it, or pass {flag} FILE")
    return None, ""


def read_untranslated(path: str) -> Tuple[List[int], str]:
    """(ids, reason) from a recipe's generate stage (JSON with "ids" and "reason") or one id per line."""
    text = read_text(path, "--untranslated", allow_empty=True)
    try:
        if text.lstrip().startswith("{"):
            data = json.loads(text)
            return sorted(int(i) for i in data["ids"]), data.get("reason") or "not translated"
        return sorted(int(x) for x in text.split()), "not translated"
    except (ValueError, KeyError, TypeError) as e:
        raise CommandError(f"--untranslated {path}: not a list of sentence ids ({type(e).__name__}: {e}); give a "
                           "recipe's untranslated.<name>.json or one id per line") from None


def unique_names(paths: List[str], given: Optional[List[str]]) -> List[str]:
    if given:
        if len(given) != len(paths):
            raise ValueError(f"--names: {len(given)} names for {len(paths)} systems")
        return given
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return names if len(set(names)) == len(names) else [p for p in paths]


def load_learned_scorers(opts: ScoringOptions):
    """([(label, scorer)], skipped): the learned metrics asked for, each loaded once."""
    wanted = [m for m in opts.metrics if m in LEARNED_METRICS]
    scorers, skipped = [], {}
    if not wanted:
        return scorers, skipped
    given = opts.comet_models or opts.bleurt_checkpoint or opts.gpus is not None
    gpus = resolve_gpus(opts.gpus) if given else 0  # no model given: nothing runs, torch is not needed
    if "comet" in wanted:
        specs = list(opts.comet_models) or [None]
        for spec in specs:
            try:
                scorers.append(CometScorer(spec, opts.batch_size, gpus, opts.lowercase))
            except MetricUnavailable as e:
                skipped["COMET" if len(specs) == 1 else f"COMET {spec}"] = str(e)
    if "bleurt" in wanted:
        try:
            scorers.append(BleurtScorer(opts.bleurt_checkpoint, opts.batch_size, gpus, opts.lowercase))
        except MetricUnavailable as e:
            skipped["BLEURT"] = str(e)
    kinds = [s.name for s in scorers]
    labelled = [(s.name if kinds.count(s.name) == 1 else f"{s.name} ({s.model_name})", s) for s in scorers]
    return labelled, skipped


def _test_items(opts: ScoringOptions, with_baseline: bool) -> Dict[str, object]:
    items = {}
    if opts.bootstrap_samples > 0:
        items["bs"] = opts.bootstrap_samples
    if opts.ar_trials > 0 and with_baseline:
        items["ar"] = opts.ar_trials
    if items:
        items["seed"] = str(sacrebleu_seed()).lower()
    return items


def _comparison_groups(systems: List[System]) -> List[List[System]]:
    """Each baseline first, then every other system (sacreBLEU's PairedTest: the first is the baseline)."""
    baselines = [s for s in systems if s.is_baseline]
    return [[b] + [s for s in systems if s is not b] for b in baselines]


def score_sacrebleu(systems, refs, opts: ScoringOptions, scores: Scores):
    from sacrebleu.significance import PairedTest  # sacrebleu loads in tenths of a second: not on --help

    names = [m for m in opts.metrics if m in SACREBLEU_METRICS]
    if not names:
        return

    def build():
        return {m: sacrebleu_metric(m, opts.tokenize, opts.lowercase, opts.ter_case_sensitive) for m in names}

    for metric in build().values():
        label = None
        for s in systems:
            res = metric.corpus_score(s.hyps, [refs])
            label = res.name
            scores.cells[s.name][label] = Cell(res.score)
        sig = metric.get_signature()
        for k, v in _test_items(opts, any(s.is_baseline for s in systems)).items():
            sig.update(k, v)
        scores.signatures[label] = str(sig)
    groups = _comparison_groups(systems)
    for test_type, n in (("bs", opts.bootstrap_samples), ("ar", opts.ar_trials)):
        if n <= 0:
            continue
        # without a baseline, the bootstrap still gives each system its confidence interval
        for group in groups or ([[s] for s in systems] if test_type == "bs" else []):
            _, results = PairedTest([(s.name, s.hyps) for s in group], build(), references=[refs],
                                    test_type=test_type, n_samples=n)()
            for label, column in results.items():
                if label == "System":
                    continue
                for s, r in zip(group, column):
                    c = scores.cells[s.name][label]
                    if test_type == "bs" and (c.mean is None or s is group[0]):
                        c.mean, c.ci = r.mean, r.ci
                    if s is not group[0] and r.p_value is not None:
                        (c.p_bootstrap if test_type == "bs" else c.p_ar)[group[0].name] = r.p_value


def score_learned(systems, refs, srcs, opts: ScoringOptions, scorers, scores: Scores):
    def lower(lines):
        return [x.lower() for x in lines] if (opts.lowercase and lines is not None) else lines

    refs_, srcs_ = lower(refs), lower(srcs)
    baselines = [s for s in systems if s.is_baseline]
    for label, scorer in scorers:
        segs = {}
        try:
            for s in systems:
                r = scorer(lower(s.hyps), refs_, srcs_)
                segs[s.name] = r.segment_scores
                scores.cells[s.name][label] = Cell(r.score)
                if r.details:
                    scores.details.setdefault(s.name, {})[label] = r.details
        except MetricUnavailable as e:
            scores.skipped[label] = str(e)
            for s in systems:
                scores.cells[s.name].pop(label, None)
            continue
        scores.signatures[label] = format_signature(scorer.signature_items, **_test_items(opts, bool(baselines)))
        for s in systems:
            c = scores.cells[s.name][label]
            if opts.bootstrap_samples > 0:
                own = paired_bootstrap(segs[s.name], n_samples=opts.bootstrap_samples)
                c.mean, c.ci = own.mean, own.ci
            for b in baselines:
                if b is s:
                    continue
                if opts.bootstrap_samples > 0:
                    c.p_bootstrap[b.name] = paired_bootstrap(segs[s.name], segs[b.name],
                                                             n_samples=opts.bootstrap_samples).p_value
                if opts.ar_trials > 0:
                    c.p_ar[b.name] = paired_approximate_randomization(segs[s.name], segs[b.name],
                                                                      n_trials=opts.ar_trials)


def score_systems(systems: List[System], refs: List[str], srcs: Optional[List[str]], opts: ScoringOptions,
                  scorers=None, skipped: Optional[Dict[str, str]] = None) -> Scores:
    """Every metric of ``opts`` for every system. ``scorers``/``skipped`` from ``load_learned_scorers``
    (loaded here when not given; pass them to score many subsets with one model load)."""
    for s in systems:
        if len(s.hyps) != len(refs):
            raise ValueError(f"{s.path}: {len(s.hyps)} hypotheses but {len(refs)} references")
    if scorers is None:
        scorers, skipped = load_learned_scorers(opts)
    scores = Scores(cells={s.name: {} for s in systems}, signatures={}, skipped=dict(skipped or {}))
    score_sacrebleu(systems, refs, opts, scores)
    score_learned(systems, refs, srcs, opts, scorers, scores)
    return scores


def metric_labels(scores: Scores) -> List[str]:
    return ([m for m in SACREBLEU_ORDER if m in scores.signatures]
            + [m for m in scores.signatures if m not in SACREBLEU_ORDER]
            + [m for m in scores.skipped if m not in scores.signatures])


def format_cell(c: Optional[Cell], single_baseline: bool) -> str:
    if c is None:
        return "skipped"
    text = f"{c.score:.2f}"
    if c.ci is not None:
        text += f" ± {c.ci:.2f}"
    ps = []
    for test, values in (("bs", c.p_bootstrap), ("ar", c.p_ar)):
        for b, p in values.items():
            ps.append(f"p_{test}={p:.4f}" if single_baseline else f"p_{test}[{b}]={p:.4f}")
    return text + (f" ({', '.join(ps)})" if ps else "")


def markdown_table(systems: List[System], scores: Scores, notes: List[str], opts: ScoringOptions) -> str:
    labels = metric_labels(scores)
    baselines = [s.name for s in systems if s.is_baseline]
    single = len(baselines) == 1
    lines = ["| system | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for s in systems:
        tag = " (baseline)" if s.is_baseline else ""
        lines.append(f"| {s.name}{tag} | "
                     + " | ".join(format_cell(scores.cells[s.name].get(m), single) for m in labels) + " |")
    notes = list(notes)
    if opts.bootstrap_samples > 0:
        notes.append(f"± is the half-width of the 95% confidence interval from {opts.bootstrap_samples} bootstrap "
                     "resamples.")
    if baselines and (opts.bootstrap_samples > 0 or opts.ar_trials > 0):
        tests = ([f"p_bs: paired bootstrap ({opts.bootstrap_samples} resamples)"] if opts.bootstrap_samples > 0 else []) \
            + ([f"p_ar: paired approximate randomization ({opts.ar_trials} trials)"] if opts.ar_trials > 0 else [])
        notes.append(f"{'; '.join(tests)}; against {', '.join(baselines)}. sacreBLEU's PairedTest for BLEU/chrF/TER; "
                     "the same procedures over segment scores for COMET/BLEURT, counting ties as reaching the "
                     "observed difference (sacreBLEU does not).")
    if opts.lowercase:
        notes.append("--lowercase: BLEU and chrF are case-insensitive (case:lc), TER is by default; the learned "
                     "metrics see lowercased hypotheses, references and sources (case:lc in their signatures).")
    for m, sig in scores.signatures.items():
        notes.append(f"{m} signature: `{sig}`")
    for m, reason in scores.skipped.items():
        notes.append(f"**{m} skipped**: {reason}")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def to_records(systems, scores: Scores):
    rows = []
    for s in systems:
        for m, c in scores.cells[s.name].items():
            base = {"system": s.name, "path": s.path, "baseline": s.is_baseline, "metric": m, "score": c.score,
                    "mean": c.mean, "ci95": c.ci}
            vs = list(dict.fromkeys(list(c.p_bootstrap) + list(c.p_ar)))
            for b in vs or [None]:
                rows.append({**base, "vs": b, "p_bootstrap": c.p_bootstrap.get(b), "p_ar": c.p_ar.get(b)})
    return rows


def build_parser():
    p = command_parser("posmix-score", __doc__)
    p.add_argument("gen_out", nargs="*", metavar="GEN_OUT", help="fairseq-generate outputs (systems); '-': stdin")
    p.add_argument("--baseline", nargs="+", default=[], metavar="GEN_OUT",
                   help="baseline systems (fairseq-generate outputs); every other system gets paired p-values "
                        "against each")
    p.add_argument("--hyp", nargs="+", default=[], metavar="FILE", help="hypothesis text files (systems)")
    p.add_argument("--baseline-hyp", nargs="+", default=[], metavar="FILE", help="baseline hypothesis text files")
    p.add_argument("--ref", metavar="FILE", help="reference text file (raw; default: the T- lines of the first output)")
    p.add_argument("--src", metavar="FILE", help="source text file (raw; COMET reads it; default: the S- lines)")
    p.add_argument("--names", nargs="+", help="display names: the systems in order, then the baselines")
    p.add_argument("--spm-model", metavar="FILE", help="SentencePiece model: join its pieces back (lines that still hold pieces)")
    add_remove_bpe(p)
    p.add_argument("--moses-detok", metavar="LANG", help="Moses-detokenise for this target language")
    p.add_argument("--use-detok-lines", action="store_true", help="score fairseq's D- lines as they are")
    p.add_argument("--metrics", default=",".join(SACREBLEU_METRICS),
                   help=f"comma-separated subset of {','.join(ALL_METRICS)} (default: the sacreBLEU metrics; "
                        "comet and bleurt read their models from the Hugging Face cache or download them)")
    p.add_argument("--tokenize", default="13a", help=f"sacreBLEU BLEU tokenizer: {', '.join(BLEU_TOKENIZERS)}")
    p.add_argument("--lowercase", action="store_true",
                   help="case-insensitive BLEU/chrF (sacreBLEU -lc, --chrf-lowercase); COMET/BLEURT see lowercased text")
    p.add_argument("--ter-case-sensitive", action="store_true",
                   help="case-sensitive TER (sacreBLEU's --ter-case-sensitive; its default is case-insensitive)")
    p.add_argument("--comet-model", action="append", metavar="MODEL",
                   help="a COMET-family model (COMET, CometKiwi, XCOMET): a directory as COMET stores it, its .ckpt, "
                        "or a name in the local Hugging Face cache; repeat for several")
    p.add_argument("--bleurt-checkpoint", metavar="DIR", help="local bleurt-pytorch model directory (e.g. BLEURT-20)")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=16, help="COMET/BLEURT sentences per batch")
    p.add_argument("--gpus", type=Number(int, 0, 1), default=None,
                   help="COMET/BLEURT on 1 GPU or 0 (CPU); default: the GPU when CUDA is visible")
    p.add_argument("--paired-bs-n", type=NON_NEGATIVE_INT, default=1000, metavar="N",
                   help="paired bootstrap resamples, as sacreBLEU's --paired-bs-n (0: off)")
    p.add_argument("--paired-ar-n", type=NON_NEGATIVE_INT, default=10000, metavar="N",
                   help="paired approximate randomization trials, as sacreBLEU's --paired-ar-n (0: off)")
    p.add_argument("--csv", metavar="FILE", help="write one row per system x metric (x baseline) here ('-': stdout)")
    p.add_argument("--json", metavar="FILE", help="write the full result here ('-': stdout)")
    p.add_argument("--untranslated", metavar="FILE",
                   help="sentence ids not translated (a recipe's untranslated.<name>.json, or one id per line): "
                        "absent from the outputs, left out of --ref/--src, and counted beside the scores")
    return p


def add_remove_bpe(p) -> None:
    """fairseq-generate's ``--remove-bpe [sentencepiece]``: alone, subword-nmt's '@@ ' markers."""
    p.add_argument("--remove-bpe", nargs="?", const="subword_nmt", default=None, choices=REMOVE_BPE_CHOICES,
                   metavar="{" + ",".join(REMOVE_BPE_CHOICES) + "}",
                   help="remove subword units as fairseq-generate's --remove-bpe: alone, subword-nmt's '@@ ' markers; "
                        "'sentencepiece' joins SentencePiece pieces without the model (default: no removal)")


def parse_metrics(spec: str) -> List[str]:
    metrics = [m.strip().lower() for m in spec.split(",") if m.strip()]
    bad = [m for m in metrics if m not in ALL_METRICS]
    if bad or not metrics:
        raise UsageError(f"--metrics: unknown {bad or '(empty)'}; valid: {', '.join(ALL_METRICS)}")
    return metrics


def check_distinct_systems(entries, prog: str) -> None:
    """One file given twice (as a system and a baseline, or twice in one list; links followed) would be
    compared against itself: refused."""
    flags = {(False, False): "GEN_OUT", (False, True): "--hyp", (True, False): "--baseline",
             (True, True): "--baseline-hyp"}
    for i, (path, is_b, text) in enumerate(entries):
        for other, o_b, o_text in entries[:i]:
            if same_file(path, other):
                raise SystemExit(f"{prog}: {flags[(is_b, text)]} {path} and {flags[(o_b, o_text)]} {other} are one "
                                 "file; a system compared with itself gets meaningless p-values. Give each system once")


def check_common_args(args, prog: str):
    if args.tokenize not in BLEU_TOKENIZERS:
        raise UsageError(f"--tokenize {args.tokenize!r}: valid values are {', '.join(BLEU_TOKENIZERS)}")
    for flag, path in (("--csv", args.csv), ("--json", args.json)):
        if path:
            check_output_file(path, flag)
    if args.csv == "-" and args.json == "-":
        raise UsageError("--csv - and --json - both ask for stdout; write one of them to a file")
    if args.untranslated:
        check_input_file(args.untranslated, "--untranslated", allow_empty=True)
    for flag, path in (("--ref", args.ref), ("--src", args.src), ("--spm-model", args.spm_model)):
        if path:
            check_input_file(path, flag)
    if args.bleurt_checkpoint and "bleurt" not in str(args.metrics).lower():  # else the scorer says what is wrong
        raise UsageError(f"--bleurt-checkpoint {args.bleurt_checkpoint}: read only by --metrics bleurt, which is not "
                         f"asked for (--metrics {args.metrics}); it would be ignored")
    entries = ([(p, False, False) for p in args.gen_out] + [(p, False, True) for p in args.hyp]
               + [(p, True, False) for p in args.baseline] + [(p, True, True) for p in args.baseline_hyp])
    if not entries:
        raise SystemExit(f"{prog}: give at least one system (a fairseq-generate output or --hyp FILE)")
    for path, _, _ in entries:
        if path != "-" and not os.path.isfile(path):
            raise SystemExit(f"{prog}: {path}: " + ("is a directory; give a file" if os.path.isdir(path) else
                                                    "no such file"))
    check_distinct_systems(entries, prog)
    return entries


def load_inputs(args, entries, prog: str, need_sources: bool = True):
    """(systems, refs, srcs, notes on what was decoded how); without ``need_sources`` (no metric
    reads them) the S- lines are not read. With ``--untranslated`` the named ids are left out of the
    --ref/--src files and the first note counts them."""
    untranslated, reason = read_untranslated(args.untranslated) if getattr(args, "untranslated", None) else ([], "")
    try:
        detok = Detokenizer(args.spm_model, args.remove_bpe, args.moses_detok)
        names = unique_names([e[0] for e in entries], args.names)
        systems = [load_system(path, name, detok, is_b, args.use_detok_lines, from_text, untranslated)
                   for (path, is_b, from_text), name in zip(entries, names)]
        refs, ref_note = side_text(systems, args.ref, "T", detok)
        srcs, src_note = side_text(systems, args.src, "S", detok) if (need_sources or args.src) else (None, "")
    except ValueError as e:
        raise SystemExit(f"{prog}: {e}")
    if refs is None:
        raise SystemExit(f"{prog}: no references: pass --ref FILE (text files have no T- lines)")
    untranslated_note = []
    if untranslated:
        skip = set(untranslated)
        total = len(refs) if args.ref else len(refs) + len(skip)
        if untranslated[-1] >= total:
            raise SystemExit(f"{prog}: --untranslated names id {untranslated[-1]}, but the test set has {total}")
        if args.ref:
            refs = [x for i, x in enumerate(refs) if i not in skip]
        if args.src and srcs is not None:
            srcs = [x for i, x in enumerate(srcs) if i not in skip]
        untranslated_note = [f"**{len(skip)} of {total} test sentences {reason}: not translated; scores over the "
                             "rest**"]
    if srcs is not None and len(srcs) != len(refs):
        raise SystemExit(f"{prog}: {len(srcs)} sources but {len(refs)} references")
    hyp_notes = list(dict.fromkeys(s.decoding for s in systems))
    notes = untranslated_note + [f"Detokenisation asked for: {detok.description}. Hypotheses: " + "; ".join(hyp_notes)
                                 + f". References: {ref_note}." + (f" Sources: {src_note}." if src_note else "")]
    return systems, refs, srcs, notes


def main(argv=None):
    args = build_parser().parse_intermixed_args(argv)
    # sacreBLEU logs "Pre-computing ... statistics" once per significance test: nothing to act on
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    metrics = parse_metrics(args.metrics)
    entries = check_common_args(args, "posmix-score")
    inputs = [e[0] for e in entries] + [p for p in (args.ref, args.src) if p]
    for option, path in (("--csv", args.csv), ("--json", args.json)):
        if path:  # before any work: an output that is an input would replace the file being read
            check_output_file(path, option, inputs=inputs)
    systems, refs, srcs, notes = load_inputs(args, entries, "posmix-score", need_sources="comet" in metrics)
    opts = ScoringOptions.from_args(args, metrics)
    try:
        scorers, unavailable = load_learned_scorers(opts)
        refuse_unavailable(unavailable)  # before any scoring: a metric asked for is never silently left out
        scores = score_systems(systems, refs, srcs, opts, scorers, {})
    except ValueError as e:
        raise SystemExit(f"posmix-score: {e}")
    refuse_unavailable(scores.skipped)
    if "-" not in (args.csv, args.json):  # stdout holds the CSV or JSON asked for
        print(markdown_table(systems, scores, notes, opts))
    records = to_records(systems, scores)
    if args.csv:
        with open_output(args.csv, "--csv", newline="", inputs=inputs) as f:
            w = csv.DictWriter(f, fieldnames=list(records[0].keys()) if records else ["system"])
            w.writeheader()
            w.writerows(records)
    if args.json:
        with open_output(args.json, "--json", inputs=inputs) as f:
            untranslated = read_untranslated(args.untranslated)[0] if args.untranslated else []
            json.dump({"decoding": notes, "signatures": scores.signatures, "skipped": scores.skipped,
                       "untranslated": {"count": len(untranslated), "ids": untranslated, "note": notes[0]}
                       if untranslated else None,
                       "n_segments": len(refs), "bootstrap_samples": opts.bootstrap_samples,
                       "ar_trials": opts.ar_trials, "rows": records, "details": scores.details}, f, indent=1)
    return scores


def refuse_unavailable(unavailable: Dict[str, str]) -> None:
    """A metric that was asked for and cannot be computed ends the command (exit 1) with each reason and fix."""
    if unavailable:
        raise SystemExit("posmix-score: " + "\n".join(f"{metric} was asked for (--metrics) and cannot be computed: "
                                                       f"{why}" for metric, why in unavailable.items()))


cli = console(main, "posmix-score")


if __name__ == "__main__":
    raise SystemExit(cli())
