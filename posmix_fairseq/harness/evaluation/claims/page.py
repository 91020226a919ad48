"""The page (``docs/reproduction.md``), written from the results folder alone: each run's hypotheses, the
references and source lengths kept beside them, and the study's settings (``study.json``).

Every run's scores are computed here from its hypotheses (sacreBLEU 13a statistics, :mod:`.statistics`) and
written back into its ``result.json`` (``scores``), so a reader checks a page's figure against the run it
came from. Rows follow :mod:`.catalogue`; verdicts follow :func:`.statistics.verdict`.
"""
import gzip
import json
import os
import statistics as stats_lib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...command import UsageError
from ..detok import Detokenizer
from . import runner
from .catalogue import CLAIMS, EXPECTATIONS, LENGTH_SETS, PAPER_CITATIONS, SCORING_SETS, Claim
from .data import load_references, load_source_lengths
from .statistics import HOLDS, MIN_SEEDS, Comparison, compare, corpus_scores, holm, render_verdict_rule, \
    sentence_stats, verdict
from .systems import SIZE_DIM, SIZE_TEXT, SIZES, SYSTEMS, TEST_SET_TEXT

REFERENCE_SYSTEM = "transformer"  # its seeds' spread sets the seed-spread margins and the spread a direction must pass


@dataclass
class Run:
    key: str
    seed: int
    result: dict
    stats: Dict[str, np.ndarray] = field(default_factory=dict)  # scoring set -> (n, 10)
    scores: Dict[str, dict] = field(default_factory=dict)


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
    """The H- lines of a kept hypotheses file, in sentence order."""
    hyps = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            idx, _, text = line.rstrip("\n").split("\t", 2)
            hyps[int(idx[2:])] = text
    return [hyps[i] for i in range(len(hyps))]


def load_runs(results: str, tgt: str, spm_model: str) -> List[Run]:
    """Every run in the results folder, scored on every scoring set it has hypotheses for."""
    refs = load_references(results, tgt)
    lengths = load_source_lengths(results)
    selection = scoring_selection(lengths)
    detok = Detokenizer(spm_model)
    runs = []
    for key, seeds in runner.finished_runs(results).items():
        for seed in seeds:
            folder = runner.results_run_dir(results, key, seed)
            with open(os.path.join(folder, "result.json")) as f:
                run = Run(key, seed, json.load(f))
            decoded_stats = {}
            for decoded in {d for d, _ in selection.values()}:
                path = os.path.join(folder, f"hyp.{decoded}.txt.gz")
                if not os.path.isfile(path) or decoded not in refs:
                    continue
                hyps, _ = detok.decode(read_hypotheses(path), f"H- lines of {path}")
                decoded_stats[decoded] = sentence_stats(hyps, refs[decoded])
            for name, (decoded, index) in selection.items():
                if decoded in decoded_stats and not (SYSTEMS[key].uncapped and decoded == "long_heldout"):
                    run.stats[name] = decoded_stats[decoded][index]
                    run.scores[name] = corpus_scores(run.stats[name])
            if "test" in decoded_stats:
                run.scores["test"]["chrf++"] = chrf_plus_plus(detok, folder, refs["test"])
            runs.append(run)
    return runs


def chrf_plus_plus(detok, folder: str, refs: List[str]) -> float:
    import sacrebleu  # tenths of a second: only when a page is scored

    path = os.path.join(folder, "hyp.test.txt.gz")
    hyps, _ = detok.decode(read_hypotheses(path), f"H- lines of {path}")
    return float(sacrebleu.corpus_chrf(hyps, [refs], word_order=2).score)


def store_scores(results: str, runs: List[Run]) -> None:
    """Each run's scores into its result.json: what the page was rendered from."""
    for run in runs:
        path = os.path.join(runner.results_run_dir(results, run.key, run.seed), "result.json")
        run.result["scores"] = {name: {k: (round(v, 4) if isinstance(v, float) else
                                           [round(x, 4) for x in v] if isinstance(v, list) else v)
                                       for k, v in s.items()} for name, s in run.scores.items()}
        with open(path, "w") as f:
            json.dump(run.result, f, indent=2)


# ---- the rows --------------------------------------------------------------------------------------

class Evidence:
    """The runs by system and scoring set, and the spreads a verdict reads."""

    def __init__(self, runs: List[Run], resamples: int):
        self.by_system: Dict[str, List[Run]] = {}
        for run in sorted(runs, key=lambda r: (r.key, r.seed)):
            self.by_system.setdefault(run.key, []).append(run)
        self.resamples = resamples

    def runs(self, key: str, scoring: str) -> List[Run]:
        return [r for r in self.by_system.get(key, []) if scoring in r.stats]

    def bleus(self, key: str, scoring: str) -> List[float]:
        return [r.scores[scoring]["bleu"] for r in self.runs(key, scoring)]

    def sd(self, key: str, scoring: str) -> Optional[float]:
        values = self.bleus(key, scoring)
        return stats_lib.stdev(values) if len(values) >= 2 else None

    def seed_spread(self, claim: Claim) -> float:
        """The spread a direction must exceed: the largest seed sd of the two systems and the Transformer."""
        sds = [self.sd(k, claim.test) for k in (claim.system, claim.baseline, REFERENCE_SYSTEM)]
        return max([s for s in sds if s is not None], default=0.0)

    def margin(self, claim: Claim) -> Optional[float]:
        if claim.margin_source == "seed":
            return self.sd(REFERENCE_SYSTEM, claim.test)
        return claim.margin

    def comparison(self, claim: Claim) -> Optional[Comparison]:
        """Δ over the seeds each system has on every set the row reads (a gap row: its set minus the other)."""
        sets = claim.scoring_sets

        def seeds(key):
            return set.intersection(*({r.seed for r in self.runs(key, scoring)} for scoring in sets))

        chosen = {key: seeds(key) for key in (claim.system, claim.baseline)}
        if not all(chosen.values()):
            return None

        def pick(key, scoring):
            return [r.stats[scoring] for r in self.runs(key, scoring) if r.seed in chosen[key]]
        terms = [(pick(claim.system, scoring), pick(claim.baseline, scoring), sign)
                 for scoring, sign in zip(sets, (1.0, -1.0))]
        return compare(terms, resamples=self.resamples)


def fmt_interval(ci: tuple) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


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


def evaluate(claims: List[Claim], evidence: Evidence, runs: List[Run]) -> List[RowResult]:
    rows = [RowResult(c) for c in claims]
    for row in rows:
        c = row.claim
        if c.kind in ("bleu", "gap"):
            row.comparison = evidence.comparison(c)
    directional = [r for r in rows if r.comparison and r.claim.expect in ("better", "worse")
                   and min(r.comparison.seeds) >= MIN_SEEDS]
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
        if row.comparison is None:
            row.rule = rule_text(c, evidence)
            continue
        cmp = row.comparison
        row.p_holm = adjusted[c.hypothesis] if c.key in tested else None
        margin = evidence.margin(c)
        row.verdict = verdict(c.expect, margin or 0.0, cmp, row.p_holm, evidence.seed_spread(c),
                              length_row=c.length_row)
        row.seeds = f"{cmp.seeds[0]} / {cmp.seeds[1]}"
        row.rule = rule_text(c, evidence)
        row.ours = ours_text(c, cmp, evidence, row.p_holm)
        row.evidence_bleus = (evidence.bleus(c.system, c.test), evidence.bleus(c.baseline, c.test))
        if c.paper_relative_change is not None:  # a claim about size: the paper's change against ours
            ours = 100 * cmp.delta / stats_lib.mean(evidence.bleus(c.baseline, c.test))
            row.ours += f"; {ours:+.1f}% relative (the paper: {c.paper_relative_change:+.1f}%)"
            if row.verdict == HOLDS and abs(ours) < abs(c.paper_relative_change) / 2:
                row.verdict = "holds in direction only (less than half the paper's relative change)"
    return rows


def rule_text(c: Claim, evidence: Evidence) -> str:
    text = EXPECTATIONS[c.expect]
    if c.expect in ("same", "no_worse"):
        margin = evidence.margin(c)
        source = ("the Transformer's seed sd" if c.margin_source == "seed" else f"from the paper: {c.margin_source}")
        text += f"; margin {margin:.2f} BLEU ({source})" if margin is not None else f"; margin: {source} (not measured yet)"
    return text


def ours_text(c: Claim, cmp: Comparison, evidence: Evidence, p_holm: Optional[float]) -> str:
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
    if c.expect in ("better", "worse"):
        text += f", p = {cmp.p:.3f}" + (f" (Holm {p_holm:.3f})" if p_holm is not None else "")
    elif c.expect == "same":
        text += f", 90% {fmt_interval(cmp.ci90)}"
    else:
        text += f", one-sided 95% lower bound {cmp.ci90[0]:+.2f}"
    if c.length_row:
        text += f"; at equal length (no brevity penalty) Δ = {cmp.delta_equal_length:+.2f} {fmt_interval(cmp.ci95_equal_length)}"
    return text


def parameter_row(row: RowResult, evidence: Evidence) -> None:
    """gpa-4 (the search-time model translates identically) and gpa-5 (the parameters it saves), counted per
    part: self-attention and position modules apart, and compared at equal position coverage."""
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
    saving = 100 * (1 - frozen_total / trained_at_cover)
    row.ours = (f"D = {dim}: self-attention {trained['self_attention']:,} trained → {frozen['self_attention']:,} "
                f"frozen; position modules {trained['position_modules']:,} (n~ tables for "
                f"{trained['positions_covered']['source']:,} + {trained['positions_covered']['target']:,} positions) → "
                f"{frozen['position_modules']:,}. At the frozen model's coverage ({cover['source']} source, "
                f"{cover['target']} target positions), trained {trained_at_cover:,} vs frozen {frozen_total:,} "
                f"({-saving:+.1f}%)")
    base = base_size_saving()
    row.ours += f"; at Base size (Table 8's count, N = 128): {base:.1f}% of the self-attention saved"
    row.rule = "exact count at equal position coverage (no sampling)"
    row.verdict = ("holds" if saving > 20 else f"holds at Base size ({base:.1f}%); does not hold at D = {dim} "
                   f"({-saving:+.1f}% at equal coverage)" if base > 20 else "does not hold")


def evidence_size(runs: List[Run]) -> str:
    flags = runs[0].result.get("train_flags", "")
    for name, size in SIZES.items():
        if size in flags:
            return name
    return "small"


def base_size_saving(n: int = 128) -> float:
    """GPA Section 4.2's count at Base size: rPosNet's self-attention weights trained (K̂D + 4D², Table 8) vs
    frozen at N positions (HK̂N + 3D²), on the meta device: a count needs no weights."""
    # torch and fairseq: the count builds a model (on the meta device)
    from ...recipes.meta_model import meta_model

    counts = []
    for frozen in ([], ["--encoder-frozen-energy-positions", str(n), "--decoder-frozen-energy-positions", str(n)]):
        layer = meta_model(["--arch", "rposnet_wmt_en_de", "--share-all-embeddings", *frozen], 1000).encoder.layers[0]
        counts.append(sum(p.numel() for p in layer.self_attn.parameters() if p.dim() >= 2))
    return 100 * (1 - counts[1] / counts[0])


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


def render(study: dict, runs: List[Run], rows: List[RowResult], evidence: Evidence, resamples: int) -> str:
    info, settings = study["prepare"], study["settings"]
    size = next((name for name, flags in SIZES.items() if flags == settings["size"]), "small")
    sizes = info["test_sizes"]
    dates = sorted({r.result.get("date") for r in runs if r.result.get("date")})
    machines = sorted({r.result.get("machine", "—") for r in runs})
    commits = sorted({r.result["commit"][:10] for r in runs if not r.result.get("commit", "unknown").startswith("unknown")})
    unrecorded = sum(r.result.get("commit", "unknown").startswith("unknown") for r in runs)
    seeds = {k: len(v) for k, v in evidence.by_system.items()}
    directional = [r for r in rows if r.p_holm is not None]
    hypotheses: Dict[tuple, List[str]] = {}
    for r in directional:
        hypotheses.setdefault(r.claim.hypothesis, []).append(r.claim.key)
    shared = [" and ".join(keys) for keys in hypotheses.values() if len(keys) > 1]
    cap = info["max_train_len"]
    measured = [r for r in rows if r.ours != "—" and r.claim.kind != "not_measured"]
    out = [
        "# The papers' claims, measured",
        "",
        "Each row is one headline claim of the five papers, quoted from the papers themselves, beside what our "
        "code measures on real data. Written by `posmix-claims` from the results folder alone "
        "(`examples/claims/results`: every run's hypotheses, result and scores, and the references); do not "
        "edit by hand.",
        "",
        f"- **Command**: `{command_line(study)}` trains every system with its seeds and writes this page; "
        "`posmix-claims --results examples/claims/results --render-only --page docs/reproduction.md` writes it "
        "again from the results folder alone. Each row's own command trains only what that row compares.",
        f"- **Runs**: {len(runs)} runs of {len(seeds)} systems, trained {dates[0] if dates else '—'} to "
        f"{dates[-1] if dates else '—'}, one at a time, one torch thread each, on: " + "; ".join(machines)
        + f". Commits: {', '.join(commits) or '—'}" + (f"; {unrecorded} earlier runs recorded none" if unrecorded else "")
        + ". Each run's commit, machine and the load while it trained are in its `result.json` and in the last "
        "table below.",
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
        f"({settings['validate_every']} updates apart) or at "
        + (f"{settings['max_update']:,} updates" if settings["max_update"] else "no update cap")
        + f"; the model decoded averages the best checkpoint and the {settings['average'] - 1} after it, or the "
        f"last {settings['average']} when fewer follow the best (GPA Section 5). Beam {settings['beam']}. "
        f"{stopped_text(runs, settings['average'])} The papers train 30-300 times longer on 5-150 times more data "
        "at D = 512-1024.",
        "- **Seeds**: " + ", ".join(f"{label(k)} {n}" for k, n in sorted(seeds.items(), key=lambda x: -x[1])) + ". "
        "Scores are the mean ± sd over seeds.",
        f"- **Statistics**: BLEU is sacreBLEU's (13a). Δ = mean(system) − mean(baseline) over seeds, with its 95% "
        f"interval from a two-level paired bootstrap ({resamples:,} resamples: each system's seeds, then the "
        "sentences, the same sentences for both systems). p is the bootstrap's two-sided p-value; Holm's correction "
        f"runs over the {len(hypotheses)} comparisons of the {len(directional)} directional rows with at least "
        f"{MIN_SEEDS} seeds per system" + (f" (rows that make the same comparison test one null hypothesis and count "
                                           f"once: {'; '.join(sorted(shared))})" if shared else "") + ".",
        "- **Verdicts** (margins come from the Transformer's seed spread or the paper's own gaps, row by row: "
        "[choices](choices.md#the-claims-study-posmix-claims-reproduction)):",
        render_verdict_rule(indent="  "),
        "",
        f"**{len(measured)} of {len(rows)} rows measured on real data**; "
        f"{sum(1 for r in rows if r.claim.kind == 'not_measured')} need a GPU and the papers' data. "
        + pending_text(rows, evidence),
        "",
    ]
    out += headline_table(rows) + [""]
    by_paper: Dict[str, List[RowResult]] = {}
    for row in rows:
        by_paper.setdefault(row.claim.paper, []).append(row)
    for paper, paper_rows in by_paper.items():
        out += [f"## {paper}", "", PAPER_CITATIONS[paper], "",
                "| row | claim | the paper | ours | seeds | rule | verdict | command |",
                "|---|---|---|---|---|---|---|---|"]
        for row in paper_rows:
            c = row.claim
            command = "—" if c.kind == "not_measured" else f"`posmix-claims --data-dir $MULTI30K --rows {c.key}`"
            claim_text = c.text + (" *(beyond the papers)*" if c.beyond_papers else "")
            out.append(f"| {c.key} | {claim_text} | {c.paper_figure} | {row.ours} | {row.seeds} | {row.rule} | "
                       f"{row.verdict} | {command} |")
        out.append("")
    out += length_tables(rows, evidence, cap)
    out += systems_table(evidence)
    out += runs_table(runs)
    return "\n".join(out) + "\n"


#: the rows the README shows (its table is this one, checked by tests/test_claims.py)
HEADLINE = ("gpa-1", "gpa-2", "gpa-3", "gpa-6", "hc-1", "hc-2", "pea-1", "pea-2", "pea-3", "pea-7", "recpe-1",
            "posnet-2")


def headline_table(rows: List[RowResult]) -> List[str]:
    """The headline rows in short: the README's table."""
    out = ["## Headline rows", "", "| row | claim (paper) | the paper | ours: mean ± sd over seeds, Δ [95% interval] | "
           "seeds | verdict |", "|---|---|---|---|---|---|"]
    for row in rows:
        c = row.claim
        if c.key not in HEADLINE:
            continue
        if row.comparison is None:
            ours = "not run yet"
        else:
            ours = (f"{mean_sd(row.evidence_bleus[0])} vs {mean_sd(row.evidence_bleus[1])} BLEU on `{c.test}`, "
                    f"Δ {row.comparison.delta:+.2f} {fmt_interval(row.comparison.ci95)}")
        out.append(f"| {c.key} | {c.text} ({c.paper}) | {first_clause(c.paper_figure)} | {ours} | {row.seeds} | "
                   f"{row.verdict} |")
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


def length_tables(rows: List[RowResult], evidence: Evidence, cap: int) -> List[str]:
    """BLEU as PEA reads it beside its parts, for every system of a length row on every length set."""
    keys = []
    for row in rows:
        if row.claim.length_row:
            keys += [k for k in row.claim.systems() if k not in keys]
    sets = list(LENGTH_SETS)
    out = ["## Lengths, measured as PEA measured them", "",
           f"Every system of a length row on every set past the cap ({cap} pieces): BLEU, its brevity penalty "
           "(BP), the length ratio (hypothesis / reference), the 1-4-gram precisions and BLEU at equal length "
           "(BLEU / BP), each the mean over seeds. A BLEU gap that comes with a BP gap and no precision gap is a "
           "gap in when the models stop, not in what they translate.", "",
           "| set | system | seeds | BLEU | BP | ratio | precisions 1/2/3/4 | BLEU at equal length |",
           "|---|---|---|---|---|---|---|---|"]
    for name in sets:
        for key in keys:
            runs = evidence.runs(key, name)
            if not runs:
                continue
            mean = {k: stats_lib.mean(r.scores[name][k] for r in runs) for k in ("bleu", "bp", "ratio", "bleu_equal_length")}
            prec = "/".join(f"{stats_lib.mean(r.scores[name]['precisions'][i] for r in runs):.1f}" for i in range(4))
            out.append(f"| `{name}` ({runs[0].scores[name]['sentences']:,}) | {label(key)} | {len(runs)} | "
                       f"{mean_sd([r.scores[name]['bleu'] for r in runs])} | {mean['bp']:.3f} | {mean['ratio']:.3f} | "
                       f"{prec} | {mean['bleu_equal_length']:.2f} |")
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


def runs_table(runs: List[Run]) -> List[str]:
    out = ["## Every run", "",
           "Where and how each run trained: its commit, date and machine, and the 1-minute load average while it "
           "trained (about 1.0 is a run alone on this 2-vCPU host; above it, something else ran beside it and its "
           "train time is not comparable).", "",
           "| system | seed | commit | date | machine | load (mean / max) | BLEU `test` | best valid loss | train time |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (list(SYSTEMS).index(r.key), r.seed)):
        res = r.result
        commit = "not recorded" if res.get("commit", "unknown").startswith("unknown") else f"`{res['commit'][:10]}`" + (
            " (+ local changes)" if res.get("code_differs_from_commit") else "")
        load = (f"{res['load_1min_mean']:.2f} / {res['load_1min_max']:.2f}" if res.get("load_1min_mean") is not None
                else "not recorded")
        bleu = f"{r.scores['test']['bleu']:.2f}" if "test" in r.scores else "—"
        out.append(f"| {label(r.key)} | {r.seed} | {commit} | {res.get('date', '—')} | {res.get('machine', '—')} | "
                   f"{load} | {bleu} | {res['best_valid_loss']:.3f} | {res['train_seconds'] / 60:.1f} min |")
    return out + [""]


def render_from_results(opts) -> str:
    results = opts.results
    study_path = os.path.join(results, "study.json")
    if not os.path.isfile(study_path):
        raise UsageError(f"--results {results}: no study.json (not a posmix-claims results folder)")
    with open(study_path) as f:
        study = json.load(f)
    if not os.path.isfile(os.path.join(results, "references", "source_lengths.json")):
        raise UsageError(f"--results {results}: no references/ (run posmix-claims with --data-dir once to store them)")
    runs = load_runs(results, study["settings"]["tgt"], os.path.join(results, "spm.model"))
    if not runs:
        raise UsageError(f"--results {results}: no finished run to score")
    store_scores(results, runs)
    evidence = Evidence(runs, opts.bootstrap)
    rows = evaluate(CLAIMS, evidence, runs)
    return render(study, runs, rows, evidence, opts.bootstrap)
