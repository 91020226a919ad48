"""The page (``docs/reproduction.md``), written from the results folders alone: each run's hypotheses, the
references and source lengths kept beside them, and the study's settings (``study.json``).

Every run's scores are computed here from its hypotheses (sacreBLEU's BLEU and chrF++ statistics,
:mod:`.statistics`). Rows follow :mod:`.catalogue`; verdicts follow :func:`.statistics.verdict`. A second
results folder, the converged study (runs stopped by patience), fills a second column of every BLEU row;
once each of a row's systems has its seeds there, the row's verdict is the converged one. Rendering reads
the results folders and writes the page only: no run's ``result.json`` is written, and neither torch nor
fairseq is imported.
"""
import gzip
import json
import os
import statistics as stats_lib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...command import UsageError, replace_file
from ..detok import Detokenizer
from . import runner
from .catalogue import CLAIMS, EXPECTATIONS, GPA_TABLE8_SIZES, LENGTH_SETS, PAPER_CITATIONS, SCORING_SETS, Claim
from .data import load_references, load_source_lengths
from .statistics import (BLEU, CHRF, HOLDS, INCONCLUSIVE, MIN_SEEDS, RATIO, TRUNCATION, TRUNCATION_FRACTION,
                         Comparison, chrf_stats, compare, corpus_scores, estimate, holm, precision_metric,
                         render_verdict_rule, sentence_stats, signatures, truncation_finding, verdict)
from .systems import SIZE_DIM, SIZE_TEXT, SIZES, SYSTEMS, TEST_SET_TEXT

ORACLE_NOTE = "no checkpoint kept"  # a run without oracle-length hypotheses: its averaged model is gone
COLUMN_2500 = "at 2,500 updates (learning speed)"
COLUMN_CONVERGED = "converged"


@dataclass
class Run:
    key: str
    seed: int
    result: dict
    stats: Dict[str, np.ndarray] = field(default_factory=dict)   # scoring set -> (n, 10) BLEU rows
    scores: Dict[str, dict] = field(default_factory=dict)
    chrf: Dict[str, np.ndarray] = field(default_factory=dict)    # scoring set -> (n, 24) chrF++ rows
    oracle: Dict[str, dict] = field(default_factory=dict)        # scoring set -> {'bleu', 'chrf'} at oracle length

    def rows(self, scoring: str) -> dict:
        out = {"bleu": self.stats[scoring]}
        if scoring in self.chrf:
            out["chrf"] = self.chrf[scoring]
        return out

    @property
    def commit_known(self) -> bool:
        return not self.result.get("commit", "unknown").startswith("unknown")


# ---- reading and scoring the runs ---------------------------------------------------------------------

def scoring_selection(source_lengths: dict) -> Dict[str, Tuple[str, np.ndarray]]:
    """Scoring set -> (the decoded test set, the indices of its lines scored)."""
    cap = source_lengths["max_train_len"]
    out = {}
    for name, (decoded, low, high) in SCORING_SETS.items():
        lengths = np.asarray(source_lengths["lengths"].get(decoded, []))
        lo = cap * low if low is not None else -1
        hi = cap * high if high is not None else np.inf
        out[name] = (decoded, np.flatnonzero((lengths > lo) & (lengths <= hi)))
    return out


def read_hypotheses(path: str) -> List[str]:
    """The H- lines of a kept hypotheses file, in sentence order; a damaged file is an error naming it."""
    hyps = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                idx, _, text = line.rstrip("\n").split("\t", 2)
                hyps[int(idx[2:])] = text
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not a readable file of H- lines ({type(e).__name__}: {e})") from None
    if sorted(hyps) != list(range(len(hyps))):
        raise UsageError(f"{path}: its H- lines do not number the sentences 0..{len(hyps) - 1}")
    return [hyps[i] for i in range(len(hyps))]


def read_result(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: damaged result.json ({type(e).__name__}: {e}); restore it from git or train "
                         "the run again") from None
    if not isinstance(result, dict):
        raise UsageError(f"{path}: damaged result.json (not a JSON object)")
    return result


def load_runs(results: str, tgt: str, spm_model: str, references_from: Optional[str] = None) -> List[Run]:
    """Every run in the results folder, scored on every scoring set it has hypotheses for (and, where it kept
    them, its oracle-length hypotheses). References and source lengths come from ``references_from`` (the
    results folder itself by default)."""
    refs_folder = references_from or results
    refs = load_references(refs_folder, tgt)
    lengths = load_source_lengths(refs_folder)
    selection = scoring_selection(lengths)
    detok = Detokenizer(spm_model)
    runs = []
    for key, seeds in runner.finished_runs(results).items():
        for seed in seeds:
            folder = runner.results_run_dir(results, key, seed)
            run = Run(key, seed, read_result(os.path.join(folder, "result.json")))
            decoded_rows = {}
            for decoded in sorted({d for d, _ in selection.values()}):
                for oracle in (False, True):
                    path = os.path.join(folder, f"hyp.{decoded}{'.oracle' if oracle else ''}.txt.gz")
                    if not os.path.isfile(path) or decoded not in refs:
                        continue
                    hyps, _ = detok.decode(read_hypotheses(path), f"H- lines of {path}")
                    if len(hyps) != len(refs[decoded]):
                        raise UsageError(f"{path}: {len(hyps)} hypotheses for {len(refs[decoded])} references")
                    decoded_rows[decoded, oracle] = (sentence_stats(hyps, refs[decoded]),
                                                     chrf_stats(hyps, refs[decoded]))
            for name, (decoded, index) in selection.items():
                if SYSTEMS[key].uncapped and decoded == "long_heldout":
                    continue
                if (decoded, False) in decoded_rows:
                    bleu_rows, chrf_rows = decoded_rows[decoded, False]
                    run.stats[name], run.chrf[name] = bleu_rows[index], chrf_rows[index]
                    run.scores[name] = corpus_scores(run.stats[name])
                    run.scores[name]["chrf++"] = float(CHRF.score(run.chrf[name].sum(0), len(index)))
                if (decoded, True) in decoded_rows:
                    bleu_rows, chrf_rows = decoded_rows[decoded, True]
                    run.oracle[name] = {"bleu": bleu_rows[index], "chrf": chrf_rows[index]}
            runs.append(run)
    return runs


def store_scores(results: str, runs: List[Run]) -> List[str]:
    """Each new run's scores (and sacreBLEU's signatures) into its result.json, where it has none yet: a
    result already scored (a committed one) is never written again. Each write is atomic (a temporary file,
    then a rename). Returns the files written."""
    signature = signatures()
    written = []
    for run in runs:
        if "scores" in run.result:
            continue
        path = os.path.join(runner.results_run_dir(results, run.key, run.seed), "result.json")
        run.result["scores"] = {name: {k: (round(v, 4) if isinstance(v, float) else
                                           [round(x, 4) for x in v] if isinstance(v, list) else v)
                                       for k, v in s.items()} for name, s in run.scores.items()}
        run.result["sacrebleu_signature"] = signature
        replace_file(path, json.dumps(run.result, indent=2).encode("utf-8"))
        written.append(path)
    return written


# ---- the rows --------------------------------------------------------------------------------------

class Evidence:
    """The runs of one study by system and scoring set."""

    def __init__(self, runs: List[Run], name: str = COLUMN_2500):
        self.by_system: Dict[str, List[Run]] = {}
        for run in sorted(runs, key=lambda r: (r.key, r.seed)):
            self.by_system.setdefault(run.key, []).append(run)
        self.name = name

    def runs(self, key: str, scoring: str) -> List[Run]:
        return [r for r in self.by_system.get(key, []) if scoring in r.stats]

    def bleus(self, key: str, scoring: str) -> List[float]:
        return [r.scores[scoring]["bleu"] for r in self.runs(key, scoring)]

    def chosen(self, claim: Claim) -> Dict[str, List[Run]]:
        """Each system's runs that scored every set the row reads."""
        out = {}
        for key in (claim.system, claim.baseline):
            seeds = set.intersection(*({r.seed for r in self.runs(key, s)} for s in claim.scoring_sets))
            out[key] = [r for r in self.by_system.get(key, []) if r.seed in seeds]
        return out

    def comparison(self, claim: Claim, metric=BLEU, oracle: bool = False) -> Optional[Comparison]:
        """Δ over the seeds each system has on every set the row reads (a gap row: its set minus the other);
        ``oracle``: on the oracle-length hypotheses, over the seeds that kept them."""
        chosen = self.chosen(claim)
        if oracle:
            chosen = {k: [r for r in runs if all(s in r.oracle for s in claim.scoring_sets)] for k, runs in chosen.items()}
        if not all(chosen.values()):
            return None
        if metric.rows == "chrf" and not all(s in r.chrf or (oracle and s in r.oracle)
                                             for runs in chosen.values() for r in runs for s in claim.scoring_sets):
            return None

        def rows(run, scoring):
            return run.oracle[scoring] if oracle else run.rows(scoring)
        terms = [([rows(r, s) for r in chosen[claim.system]], [rows(r, s) for r in chosen[claim.baseline]], sign)
                 for s, sign in zip(claim.scoring_sets, (1.0, -1.0))]
        return compare(terms, metric)

    def unknown_commits(self, claim: Claim) -> List[str]:
        return [f"{label(r.key)} seed {r.seed}" for runs in self.chosen(claim).values() for r in runs
                if not r.commit_known]


def fmt_interval(ci: Optional[tuple], digits: int = 2) -> str:
    if ci is None:
        return "(no interval: 1 seed)"
    return f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def mean_sd(values: List[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f} (1 seed)"
    return f"{stats_lib.mean(values):.2f} ± {stats_lib.stdev(values):.2f}"


def label(key: str) -> str:
    return SYSTEMS[key].label


@dataclass
class RowResult:
    claim: Claim
    comparison: Optional[Comparison] = None
    p_holm: Optional[float] = None
    verdict: str = "not run yet"
    ours: str = "—"
    rule: str = "—"
    seeds: str = "—"
    evidence_bleus: tuple = ((), ())  # the system's and the baseline's BLEU per seed on the row's set
    extra: Dict[str, Optional[Comparison]] = field(default_factory=dict)  # chrF++, ratio, truncation, oracle


def evaluate(claims: List[Claim], evidence: Evidence, runs: Optional[List[Run]] = None) -> List[RowResult]:
    """Every row's comparison and verdict on one study's runs (Holm's correction over its directional rows)."""
    rows = [RowResult(c) for c in claims]
    for row in rows:
        c = row.claim
        if c.kind in ("bleu", "gap"):
            row.comparison = evidence.comparison(c)
    directional = [r for r in rows if r.comparison and r.comparison.p is not None
                   and r.claim.expect in ("better", "worse") and min(r.comparison.seeds) >= MIN_SEEDS]
    adjusted = holm({r.claim.hypothesis: r.comparison.p for r in directional})  # rows testing one hypothesis: once
    tested = {r.claim.key for r in directional}
    for row in rows:
        c = row.claim
        if c.kind == "not_measured":
            row.verdict, row.rule = f"not measured: needs {c.why_not}", "—"
            continue
        if c.kind in ("frozen", "params"):
            parameter_row(row, evidence)
            continue
        row.rule = rule_text(c)
        if row.comparison is None:
            continue
        cmp = row.comparison
        row.p_holm = adjusted[c.hypothesis] if c.key in tested else None
        row.verdict = verdict(c.expect, c.margin or 0.0, cmp, row.p_holm)
        row.seeds = f"{cmp.seeds[0]} / {cmp.seeds[1]}"
        unknown = evidence.unknown_commits(c)
        if unknown:
            row.seeds += f" ({', '.join(unknown)}: no commit recorded)"
        row.evidence_bleus = (evidence.bleus(c.system, c.test), evidence.bleus(c.baseline, c.test))
        if c.kind == "bleu" and (c.length_row or c.expect in ("same", "no_worse")):
            row.extra["chrf"] = evidence.comparison(c, CHRF)
        if c.kind == "bleu" and c.length_row:
            row.extra["ratio"] = evidence.comparison(c, RATIO)
            row.extra["truncation"] = evidence.comparison(c, TRUNCATION)
            row.extra["oracle_chrf"] = evidence.comparison(c, CHRF, oracle=True)
            finding = truncation_finding(cmp, row.extra["truncation"], (label(c.system), label(c.baseline)),
                                         tuple(rate(evidence, k, c.test) for k in (c.system, c.baseline)), c.test,
                                         tuple(mean_of(evidence, k, c.test, "ratio") for k in (c.system, c.baseline)))
            if finding and row.verdict.startswith(INCONCLUSIVE):  # not decided: said as what differs, not why
                finding = finding.replace("the finding is when the models stop:", "the models differ in when they stop:")
            if finding:
                row.verdict += f"; {finding}"
        row.ours = ours_text(c, cmp, evidence, row)
        if c.paper_relative_change is not None:  # a claim about size: the paper's change against ours
            ours = 100 * cmp.delta / stats_lib.mean(evidence.bleus(c.baseline, c.test))
            row.ours += f"; {ours:+.1f}% relative (the paper: {c.paper_relative_change:+.1f}%)"
            if row.verdict == HOLDS and abs(ours) < abs(c.paper_relative_change) / 2:
                row.verdict = "holds in direction only (less than half the paper's relative change)"
    return rows


def mean_of(evidence: Evidence, key: str, scoring: str, score: str) -> float:
    return stats_lib.mean(r.scores[scoring][score] for r in evidence.runs(key, scoring))


def rate(evidence: Evidence, key: str, scoring: str) -> float:
    return mean_of(evidence, key, scoring, "truncated")


def rule_text(c: Claim) -> str:
    text = EXPECTATIONS[c.expect]
    if c.expect in ("same", "no_worse"):
        text += f"; margin {c.margin:.2f} BLEU ({c.margin_source})"
    return text


def ours_text(c: Claim, cmp: Comparison, evidence: Evidence, row: RowResult) -> str:
    if c.kind == "gap":
        gaps = []
        for scoring in c.scoring_sets:
            s, b = evidence.bleus(c.system, scoring), evidence.bleus(c.baseline, scoring)
            gaps.append(f"`{scoring}` {stats_lib.mean(s) - stats_lib.mean(b):+.2f}")
        text = (f"{label(c.system)} − {label(c.baseline)}: {', '.join(gaps)} BLEU; the gap's change "
                f"Δ = {cmp.delta:+.2f} {fmt_interval(cmp.ci95)}")
    else:
        text = (f"{label(c.system)} {mean_sd(evidence.bleus(c.system, c.test))} vs {label(c.baseline)} "
                f"{mean_sd(evidence.bleus(c.baseline, c.test))} BLEU on `{c.test}`: Δ = {cmp.delta:+.2f} "
                f"{fmt_interval(cmp.ci95)}")
    if cmp.ci95 is None:
        return text
    if c.expect in ("better", "worse"):
        text += f", p = {cmp.p:.3g}" + (f" (Holm {row.p_holm:.3g})" if row.p_holm is not None else "")
    elif c.expect == "same":
        text += f", 90% {fmt_interval(cmp.ci90)}; the smallest margin these seeds could show ±{cmp.smallest_margin():.2f}"
    else:
        text += (f", one-sided 95% lower bound {cmp.ci90[0]:+.2f}; the smallest margin these seeds could show "
                 f"±{cmp.smallest_margin():.2f}")
    chrf = row.extra.get("chrf")
    if chrf is not None and chrf.ci95 is not None:
        text += f"; chrF++ Δ = {chrf.delta:+.2f} {fmt_interval(chrf.ci95)}"
        if c.expect == "same":
            inside = -c.margin < chrf.ci90[0] and chrf.ci90[1] < c.margin
            text += f" (90% {fmt_interval(chrf.ci90)}: {'inside' if inside else 'not inside'} ±{c.margin:.2f} chrF++)"
    if c.length_row and c.kind == "bleu":
        ratio, trunc = row.extra.get("ratio"), row.extra.get("truncation")
        if ratio is not None and ratio.ci95 is not None:
            text += f"; length ratio Δ = {ratio.delta:+.3f} {fmt_interval(ratio.ci95, 3)}"
        if trunc is not None and trunc.ci95 is not None:
            rates = [rate(evidence, k, c.test) for k in (c.system, c.baseline)]
            text += (f"; truncation rate (under {TRUNCATION_FRACTION:.0%} of the reference) {rates[0]:.1f}% vs "
                     f"{rates[1]:.1f}%, Δ = {trunc.delta:+.1f} points {fmt_interval(trunc.ci95, 1)}")
        oracle = row.extra.get("oracle_chrf")
        text += (f"; at oracle length chrF++ Δ = {oracle.delta:+.2f} {fmt_interval(oracle.ci95)}" if oracle is not None
                 else f"; at oracle length: {ORACLE_NOTE}")
    return text


def table8_saving(dim: int, heads: int, k: int, positions: int) -> float:
    """GPA Table 8's saving (%) of self-attention weights per layer: K̂D + 4D² trained, HK̂N + 3D² at search."""
    k_hat = 2 * k + 1
    return 100 * (1 - (heads * k_hat * positions + 3 * dim ** 2) / (k_hat * dim + 4 * dim ** 2))


def table8_largest_positions(dim: int, heads: int, k: int, share: float = 20.0) -> int:
    """The most positions N a search-time table may cover and still save more than ``share`` % (Table 8)."""
    k_hat = 2 * k + 1
    bound = ((1 - share / 100) * (k_hat * dim + 4 * dim ** 2) - 3 * dim ** 2) / (heads * k_hat)
    n = int(np.floor(bound))
    return n - 1 if n == bound else n


def parameter_row(row: RowResult, evidence: Evidence) -> None:
    """gpa-4 (the search-time model translates identically) and gpa-5 (the parameters it saves), counted per
    part from the counts each run stored: self-attention and position modules apart, compared at equal position
    coverage; at the paper's sizes by Table 8's formula (arithmetic)."""
    runs = [r for r in evidence.by_system.get("rposnet", []) if r.result.get("frozen")]
    row.seeds = f"{len(runs)}"
    if not runs:
        return
    if row.claim.kind == "frozen":
        same = sum(r.result["frozen"]["same_translations"] for r in runs)
        total = sum(r.result["frozen"]["sentences"] for r in runs)
        row.ours = f"{same}/{total} translations of `test` identical over {len(runs)} seed{'s' if len(runs) > 1 else ''}"
        row.rule, row.verdict = "exact (no sampling)", "holds" if same == total else "does not hold"
        return
    counted = [r for r in runs if "positions_covered" in r.result["parameters"]]
    if not counted:
        row.ours = "the runs kept no per-part count (`posmix-claims` counts them since the seeds of this study)"
        row.rule, row.verdict = "exact count", "not measured yet"
        return
    trained, frozen = counted[0].result["parameters"], counted[0].result["frozen"]["parameters"]
    cover = frozen["positions_covered"]
    dim = SIZE_DIM.get(evidence_size(runs), 64)
    tables_at_cover = dim * (cover["source"] + cover["target"])  # rPosNet's n~ rows for the frozen model's positions
    trained_at_cover = trained["self_attention"] + tables_at_cover
    frozen_total = frozen["self_attention"] + frozen["position_modules"]
    change = 100 * (frozen_total / trained_at_cover - 1)
    row.ours = (f"D = {dim}: self-attention {trained['self_attention']:,} trained → {frozen['self_attention']:,} "
                f"frozen; position modules {trained['position_modules']:,} (n~ tables for "
                f"{trained['positions_covered']['source']:,} + {trained['positions_covered']['target']:,} positions) → "
                f"{frozen['position_modules']:,}. At the frozen model's coverage ({cover['source']} source, "
                f"{cover['target']} target positions), the frozen model has {change:+.1f}% parameters against the "
                "trained one")
    sizes = []
    for name, (d, h, k) in GPA_TABLE8_SIZES.items():
        sizes.append(f"{name} (D = {d}, H = {h}, K = {k}): over 20% saved for N ≤ {table8_largest_positions(d, h, k)} "
                     f"positions, {table8_saving(d, h, k, 128):.1f}% at N = 128")
    row.ours += "; Table 8's count at the paper's sizes (the paper does not state N): " + "; ".join(sizes)
    row.rule = "exact count at equal position coverage (no sampling); Table 8's formula at the paper's sizes"
    row.verdict = (HOLDS if change < -20 else
                   f"does not hold at D = {dim} ({change:+.1f}% parameters at equal coverage); at the paper's sizes "
                   "it holds only for the N above, which the paper does not state")


def evidence_size(runs: List[Run]) -> str:
    flags = runs[0].result.get("train_flags", "")
    for name, size in SIZES.items():
        if size in flags:
            return name
    return "small"


# ---- two studies: at 2,500 updates and converged --------------------------------------------------------

def converged_complete(claim: Claim, evidence: Optional[Evidence]) -> bool:
    """Whether each of the row's systems has its seeds (5 for the Transformer, 3 for the others) in the
    converged study, on every set the row reads."""
    if evidence is None or claim.kind not in ("bleu", "gap"):
        return False
    chosen = evidence.chosen(claim)
    return all(len(chosen[k]) >= SYSTEMS[k].seeds for k in claim.systems())


def combine(rows: List[RowResult], converged: Optional[List[RowResult]], evidence: Optional[Evidence]) -> None:
    """Each BLEU row's verdict from the converged column once each of its systems has its seeds there; until
    then the 2,500-update verdict, labelled as such, with the converged seeds counted. A row whose verdict
    changes between the columns says so."""
    if converged is None:
        return
    for row, conv in zip(rows, converged):
        c = row.claim
        if c.kind not in ("bleu", "gap"):
            continue
        if converged_complete(c, evidence):
            if conv.verdict != row.verdict:
                conv.verdict += f" (changed from {COLUMN_2500}: {row.verdict})"
            row.verdict = conv.verdict
            continue
        have = {k: len(evidence.chosen(c)[k]) if evidence else 0 for k in c.systems()}
        counted = ", ".join(f"{label(k)} {n} of {SYSTEMS[k].seeds}" for k, n in have.items())
        row.verdict = f"{COLUMN_2500}: {row.verdict} (converged seeds so far: {counted})"


# ---- the page -------------------------------------------------------------------------------------

def command_line(study: dict) -> str:
    """The command that trains the whole study and writes this page, with the settings that differ from
    the defaults."""
    from . import build_parser  # the command's own parser (the package imports this module only to write a page)

    defaults = build_parser().parse_args([])
    s = study["settings"]
    words = ["posmix-claims", "--data-dir", "$MULTI30K"]
    for key, flag in (("src", "-s"), ("tgt", "-t"), ("vocab_size", "--vocab-size"), ("max_train_len", "--max-train-len"),
                      ("max_tokens", "--max-tokens"), ("max_update", "--max-update"), ("validate_every", "--validate-every"),
                      ("patience", "--patience"), ("average", "--average"), ("beam", "--beam"), ("max_len_b", "--max-len-b")):
        if s.get(key) != getattr(defaults, key):
            words += [flag, str(s[key])]
    size = next((name for name, flags in SIZES.items() if flags == s.get("size")), None)
    if size and size != defaults.size:
        words += ["--size", size]
    return " ".join(words + ["--results", "examples/claims/results", "--page", "docs/reproduction.md"])


def render(study: dict, runs: List[Run], rows: List[RowResult], evidence: Evidence,
           converged: Optional[dict] = None) -> str:
    """The page. ``converged``: the converged study ({'study', 'runs', 'rows', 'evidence', 'folder'}) whose
    column every BLEU row shows, or None for a page of one study."""
    info, settings = study["prepare"], study["settings"]
    size = next((name for name, flags in SIZES.items() if flags == settings["size"]), "small")
    sizes = info["test_sizes"]
    dates = sorted({r.result.get("date") for r in runs if r.result.get("date")})
    machines = sorted({r.result.get("machine", "—") for r in runs})
    commits = sorted({r.result["commit"][:10] for r in runs if r.commit_known})
    unrecorded = [r for r in runs if not r.commit_known]
    seeds = {k: len(v) for k, v in evidence.by_system.items()}
    directional = [r for r in rows if r.p_holm is not None]
    hypotheses: Dict[tuple, List[str]] = {}
    for r in directional:
        hypotheses.setdefault(r.claim.hypothesis, []).append(r.claim.key)
    shared = [" and ".join(keys) for keys in hypotheses.values() if len(keys) > 1]
    cap = info["max_train_len"]
    measured = [r for r in rows if r.ours != "—" and r.claim.kind != "not_measured"]
    sig = signatures()
    conv_runs = converged["runs"] if converged else []
    out = [
        "# The papers' claims, measured",
        "",
        "Each row is one headline claim of the five papers, quoted from the papers themselves, beside what our "
        "code measures on real data. Written by `posmix-claims` from the results folders alone "
        "(`examples/claims/results`" + (f" and `{converged['folder']}`" if converged else "") + ": every run's "
        "hypotheses and result, and the references); do not edit by hand.",
        "",
        f"- **Command**: `{command_line(study)}` trains every system with its seeds and writes this page; "
        "`posmix-claims --results examples/claims/results"
        + (f" --converged-results {converged['folder']}" if converged else "")
        + " --render-only --page docs/reproduction.md` writes it again from the results folders alone (it writes "
        "nothing else and needs neither torch nor fairseq). Each row's own command trains only what that row "
        "compares.",
        f"- **Runs**: {len(runs)} runs of {len(seeds)} systems, trained {dates[0] if dates else '—'} to "
        f"{dates[-1] if dates else '—'}, one at a time, one torch thread each, on: " + "; ".join(machines)
        + f". Commits: {', '.join(commits) or '—'}"
        + (f"; {len(unrecorded)} earlier runs recorded none ({', '.join(f'{label(r.key)} seed {r.seed}' for r in unrecorded)}),"
           " and their rows say so" if unrecorded else "")
        + ". Each run's commit, machine and the load while it trained are in its `result.json` and in the run tables "
        "below.",
        f"- **Data**: {study.get('data_name', 'Multi30k (task 1)')} {settings['src']}→{settings['tgt']}: "
        f"{info['train_pairs']:,} training pairs, {info['train_pairs_kept']:,} with both sides within {cap} "
        f"SentencePiece pieces (the length cap every system trains with but one, the uncapped control); joint BPE "
        f"{info['vocab_size']:,}. Scored sets: `test` {sizes['test']} pairs, `seen` {sizes['seen']} (source within "
        f"the cap), `long` {sizes['long']} (source past the cap), `concat` {info['concat_longer_than_cap']} "
        f"(PEA's concatenated pairs, only those past the cap), `long_heldout` {sizes.get('long_heldout', 0):,} "
        f"({TEST_SET_TEXT['long_heldout']}; split as PEA splits lengths: `long_heldout_near` up to a third past the "
        "cap, `long_heldout_far` beyond). Lengths are counted in the pieces every model reads.",
        f"- **Scale**: {SIZE_TEXT[size]}, Adam, lr 1e-3, inverse-sqrt schedule, {settings['max_tokens']} tokens per "
        f"batch. Training stops when the validation loss has not improved for {settings['patience']} validations "
        f"({validation_interval(settings)} apart) or at "
        + (f"{settings['max_update']:,} updates" if settings["max_update"] else "no update cap")
        + f"; the model decoded averages the best checkpoint and the {settings['average'] - 1} after it, or the "
        f"last {settings['average']} when fewer follow the best (GPA Section 5). Beam {settings['beam']}. "
        f"{stopped_text(runs, settings['average'])} The papers train 30-300 times longer on 5-150 times more data "
        "at D = 512-1024.",
    ]
    if converged:
        out.append("- **Converged study**: " + converged_text(converged))
    out += [
        "- **Seeds**: " + ", ".join(f"{label(k)} {n}" for k, n in sorted(seeds.items(), key=lambda x: -x[1])) + ". "
        "Scores are the mean ± sd over seeds.",
        f"- **Statistics**: BLEU (`{sig['bleu']}`) and chrF++ (`{sig['chrf++']}`) are sacreBLEU's. Δ = "
        "mean(system) − mean(baseline) over seeds. Its 95% interval is a t interval: Welch's variance from each "
        "system's own seed-to-seed variance, plus the test set's sentence variance that the seeds share (paired on "
        "sentences, from each run's jackknife influence of every sentence), with Welch-Satterthwaite degrees of "
        "freedom ([choices](choices.md#the-claims-study-posmix-claims-reproduction)). p is the t test's two-sided "
        "p-value, computed, not resampled: it has no Monte Carlo error. Holm's correction runs over the "
        f"{len(hypotheses)} comparisons of the {len(directional)} directional rows with at least {MIN_SEEDS} seeds "
        "per system" + (f" (rows that make the same comparison test one null hypothesis and count once: "
                        f"{'; '.join(sorted(shared))})" if shared else "")
        + (", in each column on its own" if converged else "") + ".",
        "- **Verdicts** (each margin is fixed in the catalogue, with its reason, before the data: "
        "[choices](choices.md#the-claims-study-posmix-claims-reproduction)):",
        render_verdict_rule(indent="  "),
        "",
        f"**{len(measured)} of {len(rows)} rows measured on real data**; "
        f"{sum(1 for r in rows if r.claim.kind == 'not_measured')} need a GPU and the papers' data. "
        + pending_text(rows, evidence),
        "",
    ]
    conv_rows = converged["rows"] if converged else None
    out += headline_table(rows, conv_rows) + [""]
    by_paper: Dict[str, List[int]] = {}
    derived = []
    for i, row in enumerate(rows):
        (derived if row.claim.derived else by_paper.setdefault(row.claim.paper, [])).append(i)
    for paper, indices in by_paper.items():
        out += [f"## {paper}", "", PAPER_CITATIONS[paper], ""] + claim_table(rows, conv_rows, indices) + [""]
    if derived:
        out += ["## Derived rows", "",
                "Comparisons the papers do not state in words: read off their tables, so they are not headline claims. "
                "They are measured and tested as the rows above are.", ""] + claim_table(rows, conv_rows, derived) + [""]
    out += length_tables(rows, evidence, cap, COLUMN_2500 if converged else None)
    if converged and converged["runs"]:
        out += length_tables(rows, converged["evidence"], cap, "the converged study")
    out += systems_table(evidence)
    out += fingerprint_text([("", runs)] + ([(" (converged study)", conv_runs)] if converged else []))
    out += runs_table(runs, "Every run" + (f" {COLUMN_2500}" if converged else ""))
    if converged:
        out += runs_table(conv_runs, "Every run of the converged study", converged=True)
    return "\n".join(out) + "\n"


def validation_interval(settings: dict) -> str:
    every = settings.get("validate_every")
    return "one epoch" if every == 0 else f"{every} updates"


def converged_text(converged: dict) -> str:
    runs = converged["runs"]
    settings = converged["study"].get("settings", {}) if converged["study"] else {}
    if not runs:
        return (f"`{converged['folder']}` holds no finished run yet; every verdict below is the 2,500-update one, "
                "labelled as such.")
    by_patience = sum(bool(r.result.get("stopped_by_patience")) for r in runs)
    cap = settings.get("max_update")
    return (f"{len(runs)} runs in `{converged['folder']}`, trained until the validation loss has not improved for "
            f"{settings.get('patience', '?')} validations"
            + (f" ({validation_interval(settings)} apart)" if "validate_every" in settings else "")
            + (f", with a safety cap of {cap:,} updates" if cap else "")
            + f"; {by_patience} of them stopped by patience (a run that reached the cap is not converged, and its "
            "table says so). A row's verdict is the converged study's once each of its systems has its seeds there "
            "(5 for the Transformer, 3 for the others); until then it is the 2,500-update verdict, labelled as such.")


#: the rows the README shows (its table is this one, checked by tests/test_claims.py)
HEADLINE = ("gpa-1", "gpa-2", "gpa-3", "gpa-6", "hc-1", "hc-2", "pea-1", "pea-2", "pea-3", "pea-7", "recpe-1",
            "posnet-2")


def short_ours(row: Optional[RowResult]) -> str:
    if row is None or row.comparison is None:
        return "not run yet"
    c = row.claim
    return (f"{mean_sd(row.evidence_bleus[0])} vs {mean_sd(row.evidence_bleus[1])} BLEU on `{c.test}`, "
            f"Δ {row.comparison.delta:+.2f} {fmt_interval(row.comparison.ci95)}")


def headline_table(rows: List[RowResult], converged: Optional[List[RowResult]] = None) -> List[str]:
    """The headline rows in short: the README's table."""
    if converged is None:
        out = ["## Headline rows", "", "| row | claim (paper) | the paper | ours: mean ± sd over seeds, Δ [95% interval] "
               "| seeds | verdict |", "|---|---|---|---|---|---|"]
    else:
        out = ["## Headline rows", "", f"| row | claim (paper) | the paper | ours {COLUMN_2500}: mean ± sd over seeds, "
               f"Δ [95% interval] | ours {COLUMN_CONVERGED} | seeds | verdict |", "|---|---|---|---|---|---|---|"]
    for i, row in enumerate(rows):
        c = row.claim
        if c.key not in HEADLINE:
            continue
        conv = "" if converged is None else f" {short_ours(converged[i]) if converged[i].comparison else converged_seeds(converged[i])} |"
        out.append(f"| {c.key} | {c.text} ({c.paper}) | {first_clause(c.paper_figure)} | {short_ours(row)} |{conv} "
                   f"{row.seeds} | {row.verdict} |")
    return out


def converged_seeds(row: RowResult) -> str:
    return "no converged run yet" if row.ours == "—" else row.ours


def claim_table(rows: List[RowResult], converged: Optional[List[RowResult]], indices: List[int]) -> List[str]:
    if converged is None:
        out = ["| row | claim | the paper | ours | seeds | rule | verdict | command |", "|---|---|---|---|---|---|---|---|"]
    else:
        out = [f"| row | claim | the paper | ours {COLUMN_2500} | ours {COLUMN_CONVERGED} | seeds | rule | verdict | command |",
               "|---|---|---|---|---|---|---|---|---|"]
    for i in indices:
        row = rows[i]
        c = row.claim
        command = "—" if c.kind == "not_measured" else f"`posmix-claims --data-dir $MULTI30K --rows {c.key}`"
        claim_text = c.text + (" *(beyond the papers)*" if c.beyond_papers else "") + (" *(derived)*" if c.derived else "")
        conv = ""
        if converged is not None:
            other = converged[i]
            conv = (" — |" if c.kind not in ("bleu", "gap") else
                    f" {other.ours if other.comparison else 'no converged run yet'}"
                    + (f"; seeds {other.seeds}; converged verdict: {other.verdict}" if other.comparison else "") + " |")
        out.append(f"| {c.key} | {claim_text} | {c.paper_figure} | {row.ours} |{conv} {row.seeds} | {row.rule} | "
                   f"{row.verdict} | {command} |")
    return out


def first_clause(text: str) -> str:
    """The text up to its first "; " outside parentheses."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith("; ", i):
            return text[:i]
    return text


def stopped_text(runs: List[Run], average: int) -> str:
    by_patience = sum(bool(r.result.get("stopped_by_patience")) for r in runs)
    last = sum(f"the last {average}" in r.result.get("averaged", "") for r in runs)
    averaged = f" {last} of the {len(runs)} runs averaged their last {average} checkpoints (the best was among them)."
    if by_patience == 0:
        return ("No run stopped by patience: every one stopped at the update cap with the validation loss still "
                "falling, so these are models early in training, compared at equal updates." + averaged)
    return f"{by_patience} of {len(runs)} runs stopped by patience; the others at the update cap." + averaged


def pending_text(rows: List[RowResult], evidence: Evidence) -> str:
    wanted = {}
    for row in rows:
        for key in row.claim.systems():
            wanted[key] = SYSTEMS[key].seeds
    missing = {k: n - len(evidence.by_system.get(k, [])) for k, n in wanted.items()}
    missing = {k: n for k, n in missing.items() if n > 0}
    text = ("Runs still to train (the command above trains them and keeps the finished ones): "
            + "; ".join(f"{label(k)}: {n}" for k, n in missing.items()) + f"; {sum(missing.values())} in all."
            if missing else "Every system has its seeds.")
    return " ".join([text] + unscored_text(rows, evidence))


def unscored_text(rows: List[RowResult], evidence: Evidence) -> List[str]:
    """For each row that finished runs cannot fill because they lack its scoring set (runs trained before the
    set existed, whose checkpoints were not kept), the seeds it still needs and the command that adds them."""
    out = []
    for row in rows:
        claim = row.claim
        if claim.kind not in ("bleu", "gap"):
            continue
        sets = claim.scoring_sets
        short = []
        for key in claim.systems():
            trained, wanted = len(evidence.by_system.get(key, [])), SYSTEMS[key].seeds
            scored = min(len(evidence.runs(key, name)) for name in sets)
            needed = MIN_SEEDS - scored - max(0, wanted - trained)  # a verdict's seeds, beyond the default's
            if needed > 0:
                short.append((key, scored, max(trained, wanted) + needed))
        if short:
            systems = "; ".join(f"{label(k)} has {n} seed{'s' if n != 1 else ''} scored on it" for k, n, _ in short)
            seeds = max(s for _, _, s in short)
            out.append(f"{claim.key} reads {', '.join(f'`{n}`' for n in sets)}, which runs trained before that set "
                       f"existed lack (their checkpoints were not kept): {systems}; "
                       f"`posmix-claims --data-dir $MULTI30K --rows {claim.key} --seeds {seeds}` adds the seeds it "
                       "needs.")
    return out


def with_interval(mean: float, ci: Optional[tuple], digits: int = 2) -> str:
    if ci is None:
        return f"{mean:.{digits}f} (1 seed)"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def length_tables(rows: List[RowResult], evidence: Evidence, cap: int, column: Optional[str]) -> List[str]:
    """Every system of a length row on every length set: BLEU, chrF++, the length ratio and the truncation
    rate with their 95% intervals, and the same scores at oracle length where the run kept them."""
    keys = []
    for row in rows:
        if row.claim.length_row:
            keys += [k for k in row.claim.systems() if k not in keys]
    title = "## Lengths: what fails" + (f", {column}" if column else "")
    out = [title, "",
           f"Every system of a length row on every set past the cap ({cap} pieces): BLEU (with its brevity penalty, "
           "BP), chrF++ (no brevity penalty; it counts recall), the length ratio (hypothesis / reference tokens) and "
           f"the truncation rate (the share of outputs under {TRUNCATION_FRACTION:.0%} of their reference's tokens), "
           "each the mean over seeds with its 95% interval (seeds and sentences, as Δ's); BP and the 1-4-gram "
           "precisions as means. At oracle length each hypothesis is forced to its reference's length in pieces, so "
           f"its chrF++ and precisions compare what the models translate apart from when they stop; \"{ORACLE_NOTE}\" "
           "where the run's averaged model was not kept to decode it.", "",
           "| set | system | seeds | BLEU | chrF++ | ratio | truncation rate (%) | BP | precisions 1/2/3/4 | "
           "at oracle length: chrF++, precisions 1/2/3/4 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name in LENGTH_SETS:
        for key in keys:
            runs = evidence.runs(key, name)
            if not runs:
                continue
            cells = []
            for metric, digits in ((BLEU, 2), (CHRF, 2), (RATIO, 3), (TRUNCATION, 1)):
                cells.append(with_interval(*estimate([r.rows(name) for r in runs], metric), digits))
            bp = stats_lib.mean(r.scores[name]["bp"] for r in runs)
            prec = "/".join(f"{stats_lib.mean(r.scores[name]['precisions'][i] for r in runs):.1f}" for i in range(4))
            oracle_runs = [r for r in runs if name in r.oracle]
            if oracle_runs:
                chrf, ci = estimate([r.oracle[name] for r in oracle_runs], CHRF)
                precisions = "/".join(f"{estimate([r.oracle[name] for r in oracle_runs], precision_metric(i))[0]:.1f}"
                                      for i in range(1, 5))
                oracle = f"{with_interval(chrf, ci)}, {precisions} ({len(oracle_runs)} seeds)"
            else:
                oracle = ORACLE_NOTE
            out.append(f"| `{name}` ({runs[0].scores[name]['sentences']:,}) | {label(key)} | {len(runs)} | "
                       + " | ".join(cells) + f" | {bp:.3f} | {prec} | {oracle} |")
    return out + [""]


def systems_table(evidence: Evidence) -> List[str]:
    sets = list(SCORING_SETS)
    out = ["## Every system on every set", "",
           "BLEU, mean ± sd over seeds; chrF++ on `test`; parameters of the model decoded (self-attention and the "
           "position modules outside the layers counted apart); training: the updates of the best checkpoint and "
           "of the run, what stopped it, the best validation loss, and the mean training time.", "",
           "| system | seeds | " + " | ".join(f"`{s}`" for s in sets) + " | chrF++ `test` | parameters (self-attention, "
           "position modules) | updates (best / run) | stopped by | best valid loss | train time |",
           "|---|---|" + "---|" * (len(sets) + 6)]
    for key in SYSTEMS:
        runs = evidence.by_system.get(key)
        if not runs:
            continue
        cells = " | ".join(mean_sd(evidence.bleus(key, s)) for s in sets)
        chrf = mean_sd([r.scores["test"]["chrf++"] for r in runs if "chrf++" in r.scores.get("test", {})])
        p = runs[-1].result["parameters"]
        parts = f"{p['all']:,} ({p['self_attention']:,}, {p['position_modules']:,})" if "position_modules" in p \
            else f"{p['all']:,} ({p['self_attention']:,}, —)"
        updates = ", ".join(f"{r.result['best_update']}/{r.result['last_update']}" for r in runs)
        stopped = sorted({"patience" if r.result.get("stopped_by_patience") else "update cap" for r in runs})
        losses = [r.result["best_valid_loss"] for r in runs]
        loss = f"{stats_lib.mean(losses):.3f}" + (f" ± {stats_lib.stdev(losses):.3f}" if len(losses) > 1 else "")
        minutes = stats_lib.mean(r.result["train_seconds"] for r in runs) / 60
        out.append(f"| {label(key)} | {len(runs)} | {cells} | {chrf} | {parts} | {updates} | {', '.join(stopped)} | "
                   f"{loss} | {minutes:.1f} min |")
    return out + [""]


def fingerprint_text(studies: List[Tuple[str, List[Run]]]) -> List[str]:
    """The systems (of each study) whose runs were trained by model code with different fingerprints (the
    hashed outputs of ``scripts/compare_outputs.py`` for the arch), and how many runs recorded none."""
    out = ["## Model code behind the runs", ""]
    by_system: Dict[Tuple[str, str], Dict[str, List[str]]] = {}
    missing = 0
    runs = [r for _, study_runs in studies for r in study_runs]
    for study, study_runs in studies:
        for r in study_runs:
            fp = r.result.get("fingerprint")
            if not fp:
                missing += 1
                continue
            by_system.setdefault((r.key, study), {}).setdefault(str(fp), []).append(f"seed {r.seed}")
    differ = {k: v for k, v in by_system.items() if len(v) > 1}
    if differ:
        out.append("Systems whose runs were trained by model code with different outputs (fingerprints differ):")
        out.append("")
        for (key, study), prints in differ.items():
            out.append(f"- {label(key)}{study}: " + "; ".join(f"`{fp[:12]}` ({', '.join(s)})" for fp, s in prints.items()))
        out.append("")
    else:
        out.append("No system's runs differ in their model code's fingerprint" + (
            " among the runs that recorded one." if by_system else "."))
    if missing:
        out.append(f"{missing} of {len(runs)} runs recorded no fingerprint (the fingerprint of the code that trained "
                   "a run is recorded since the converged study); their commits are in the run tables.")
    return out + [""]


def runs_table(runs: List[Run], title: str, converged: bool = False) -> List[str]:
    out = [f"## {title}", "",
           "Where and how each run trained: its commit, date and machine, and the 1-minute load average while it "
           "trained (about 1.0 is a run alone on this 2-vCPU host; above it, something else ran beside it and its "
           "train time is not comparable); where it stopped: the update of its last validation (and of its best), "
           "whether patience stopped it (a run that reached the update cap is not converged), and its validation "
           "loss, best and last.", ""]
    if converged and not runs:
        return out + ["No finished run yet.", ""]
    out += ["| system | seed | commit | date | machine | load (mean / max) | BLEU `test` | stopped at update | "
            "stopped by | valid loss (best / last) | train time |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (list(SYSTEMS).index(r.key), r.seed)):
        res = r.result
        commit = "not recorded" if not r.commit_known else f"`{res['commit'][:10]}`" + (
            " (+ local changes)" if res.get("code_differs_from_commit") else "")
        load = (f"{res['load_1min_mean']:.2f} / {res['load_1min_max']:.2f}" if res.get("load_1min_mean") is not None
                else "not recorded")
        bleu = f"{r.scores['test']['bleu']:.2f}" if "test" in r.scores else "—"
        stop = (f"{res.get('last_update', '—')} (best {res.get('best_update', '—')}) | "
                + ("patience | " if res.get("stopped_by_patience") else "the update cap: not converged | "))
        loss = f"{res['best_valid_loss']:.3f}" if res.get("best_valid_loss") is not None else "—"
        if res.get("validations"):
            loss += f" / {res['validations'][-1][1]:.3f}"
        minutes = f"{res['train_seconds'] / 60:.1f} min" if res.get("train_seconds") is not None else "—"
        out.append(f"| {label(r.key)} | {r.seed} | {commit} | {res.get('date', '—')} | {res.get('machine', '—')} | "
                   f"{load} | {bleu} | {stop}{loss} | {minutes} |")
    return out + [""]


def read_study(results: str, option: str, required: bool = True) -> Optional[dict]:
    study_path = os.path.join(results, "study.json")
    if not os.path.isdir(results):
        raise UsageError(f"{option} {results}: no such directory")
    if not os.path.isfile(study_path):
        if not required:
            return None
        raise UsageError(f"{option} {results}: no study.json (not a posmix-claims results folder)")
    try:
        with open(study_path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise UsageError(f"{study_path}: damaged study.json ({e})") from None


def render_from_results(opts, store: bool = False) -> str:
    """The page from ``opts.results`` (and ``opts.converged_results`` when given). ``store``: write the scores
    of runs that have none into their result.json (a study that just trained them); a render-only page never
    writes a result."""
    results = opts.results
    study = read_study(results, "--results")
    if not os.path.isfile(os.path.join(results, "references", "source_lengths.json")):
        raise UsageError(f"--results {results}: no references/ (run posmix-claims with --data-dir once to store them)")
    runs = load_runs(results, study["settings"]["tgt"], os.path.join(results, "spm.model"))
    if not runs:
        raise UsageError(f"--results {results}: no finished run to score")
    if store:
        store_scores(results, runs)
    evidence = Evidence(runs)
    rows = evaluate(CLAIMS, evidence, runs)
    converged = None
    folder = getattr(opts, "converged_results", None)
    if folder:
        conv_study = read_study(folder, "--converged-results", required=False)
        refs = folder if os.path.isfile(os.path.join(folder, "references", "source_lengths.json")) else results
        spm = os.path.join(folder, "spm.model") if os.path.isfile(os.path.join(folder, "spm.model")) else \
            os.path.join(results, "spm.model")
        conv_runs = load_runs(folder, (conv_study or study)["settings"]["tgt"], spm, refs) if conv_study else []
        if store and conv_runs:
            store_scores(folder, conv_runs)
        conv_evidence = Evidence(conv_runs, COLUMN_CONVERGED)
        conv_rows = evaluate(CLAIMS, conv_evidence, conv_runs)
        combine(rows, conv_rows, conv_evidence)
        converged = {"study": conv_study, "runs": conv_runs, "rows": conv_rows, "evidence": conv_evidence,
                     "folder": folder.rstrip("/")}
    return render(study, runs, rows, evidence, converged)
