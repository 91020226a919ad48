"""``posmix-length-bins``: every metric of ``posmix-score`` per bin of sentence length (or of any
per-sentence value), for each system, with the difference to a baseline.

PEA paper Table 2 groups by source length, G_0:25, G_26:50, ..., G_101:inf ("--by src --bins
25,50,75,100", lengths in subword tokens: ``--count pieces``, the S-/T- lines fairseq printed). The HC
paper's Fig. 4 bins the test set by reference length into five bins and plots BLEU minus BASE's
("--by ref --bins quantiles:5 --baseline BASE.txt"). Fig. 6 bins by the off-diagonality that
``posmix-attention`` writes ("--key-file offdiag.decoder_self.txt --bins 0.1,0.2,0.3").

Bins: ``--bins E1,E2,...`` are inclusive upper edges (bin k holds E_{k-1} < x <= E_k; the first
starts at -inf, the last, above the last edge, is open); ``--bins quantiles:K`` makes K bins of about
equal size from the data.

``--json FILE``: ``{"bins": [{"bin", "sentences", "<system>/<metric>": score, ...}], "signatures": {metric:
sacreBLEU's signature (or the learned metric's, posmix-score's format)}}``, the bins without sentences left out;
the table ends with the signatures too.

    posmix-length-bins gen.hc_all.txt --baseline gen.base.txt --spm-model spm.model --ref test.de \\
        --by ref --bins quantiles:5 --metrics bleu
"""
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import score as score_mod
from .score import EXAMPLE_ARGUMENTS  # noqa: F401  (posmix-score's parser: its examples, for tests/test_entry_points.py)
from .detok import has_bpe_markers, has_spm_pieces
from .generate_output import read_generate_output
from ..command import check_input_file, checked_text, console, plain_text, write_json


def parse_bins(spec: str, values: Sequence[float]) -> List[float]:
    """Inclusive upper edges, ascending. ``quantiles:K``: the i/K-quantiles of the values, i = 1 ... K-1
    (numpy's ``inverted_cdf``: the smallest value with at least i/K of the values at or below it), ties
    merged, so that each of the K bins holds about 1/K of the sentences."""
    spec = spec.strip()
    if spec.startswith("quantiles:"):
        try:
            k = int(spec.split(":", 1)[1])
        except ValueError:
            k = 0
        if k < 1:
            raise ValueError(f"--bins {spec!r}: expected quantiles:K with K >= 1")
        if k == 1 or len(values) == 0:
            return []
        edges = np.quantile(np.asarray(values, dtype=np.float64), np.arange(1, k) / k, method="inverted_cdf")
        return [float(e) for e in np.unique(edges)]
    try:
        edges = [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--bins {spec!r}: expected comma-separated numbers (e.g. 25,50,75,100) or quantiles:K")
    if not all(np.isfinite(edges)):
        raise ValueError(f"--bins {spec!r}: edges must be finite numbers")
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"--bins {spec!r}: edges must be strictly increasing and non-empty")
    return edges


def check_bins(spec: str) -> None:
    """The form of a ``--bins`` value (edges, or quantiles:K), checked before any file is read."""
    parse_bins(spec, [])


def assign(values: Sequence[float], edges: List[float]) -> List[int]:
    """Bin k holds E_{k-1} < x <= E_k (``searchsorted`` on the left)."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), np.asarray(values, dtype=np.float64),
                           side="left").tolist()


def bin_labels(edges: List[float], integer: bool) -> List[str]:
    if not edges:
        return ["all"]
    fmt = (lambda x: str(int(x))) if integer else (lambda x: f"{x:g}")
    labels = []
    for k in range(len(edges) + 1):
        if k == 0:
            labels.append(f"<= {fmt(edges[0])}")
        elif k == len(edges):
            labels.append(f"> {fmt(edges[-1])}")
        else:
            lo = fmt(edges[k - 1] + 1) if integer else f">{fmt(edges[k - 1])}"
            labels.append(f"{lo}-{fmt(edges[k])}")
    return labels


def lengths(args, systems, refs, srcs) -> Tuple[List[float], bool]:
    untranslated = score_mod.read_untranslated(args.untranslated)[0] if args.untranslated else []
    if args.key_file:
        vals = []
        for n, x in enumerate(score_mod.read_lines(args.key_file, "--key-file"), 1):
            try:
                vals.append(float(x))
            except ValueError:
                raise ValueError(f"--key-file {args.key_file}: line {n} is not a number: {x!r}") from None
        if len(vals) != len(refs):
            raise ValueError(f"--key-file {args.key_file}: {len(vals)} values for {len(refs)} sentences")
        return vals, False
    if args.count == "pieces":
        gen_paths = list(args.gen_out) + list(args.baseline)
        if not gen_paths:
            raise ValueError("--count pieces needs a fairseq-generate output (its S-/T- lines)")
        gen = read_generate_output(gen_paths[0], untranslated)
        kind = "S-" if args.by == "src" else "T-"
        side = gen.sources if args.by == "src" else gen.references
        if not side:
            raise ValueError(f"--count pieces needs the {kind} lines of a fairseq-generate output")
        if (args.spm_model or args.remove_bpe) and not (has_spm_pieces(side) or has_bpe_markers(side)):
            raise ValueError(f"--count pieces: the {kind} lines of {gen_paths[0]} hold no subword pieces (fairseq-generate "
                             "decoded them: --bpe or --post-process); run it without those flags, or use --count words")
        return [len(x.split()) for x in side], True
    text = srcs if args.by == "src" else refs
    if text is None:
        raise ValueError("--by src needs --src FILE or S- lines")
    return [len(x.split()) for x in text], True


def main(argv: Optional[List[str]] = None):
    prog = "posmix-length-bins"
    p = score_mod.build_parser()
    p.prog = prog
    p.description, _, p.epilog = plain_text(__doc__).partition("\n\n")
    p.set_defaults(metrics="bleu,chrf++,ter", paired_bs_n=0, paired_ar_n=0)
    p.add_argument("--by", choices=["src", "ref"], default="src", help="bin by source or reference length")
    p.add_argument("--count", choices=["words", "pieces"], default="words",
                   help="length unit: whitespace words of the raw text, or subword pieces (S-/T- lines)")
    p.add_argument("--bins", default="25,50,75,100", type=checked_text(check_bins),
                   help="upper edges E1,E2,... (increasing) or quantiles:K")
    p.add_argument("--key-file", metavar="FILE",
                   help="bin by these per-sentence values instead (one per line, in sentence order)")
    a = p.parse_intermixed_args(argv)
    if a.key_file:
        check_input_file(a.key_file, "--key-file")
    metrics = score_mod.parse_metrics(a.metrics)
    entries = score_mod.check_common_args(a, prog)
    need_sources = "comet" in metrics or (a.by == "src" and a.count == "words" and not a.key_file)
    systems, refs, srcs, notes = score_mod.load_inputs(a, entries, prog, need_sources)
    opts = score_mod.ScoringOptions.from_args(a, metrics)
    try:
        vals, integer = lengths(a, systems, refs, srcs)
        edges = parse_bins(a.bins, vals)
        groups = np.asarray(assign(vals, edges))
        labels = bin_labels(edges, integer)
        baseline = next((s for s in systems if s.is_baseline), None)
        scorers, skipped = score_mod.load_learned_scorers(opts)  # loaded once for every bin
        rows, signatures = [], {}
        metric_labels = None
        for k, label in enumerate(labels):
            idx = np.flatnonzero(groups == k).tolist()
            if not idx:
                rows.append((label, 0, None))
                continue
            sub = [score_mod.System(s.name, s.path, [s.hyps[i] for i in idx], s.is_baseline) for s in systems]
            scores = score_mod.score_systems(sub, [refs[i] for i in idx], [srcs[i] for i in idx] if srcs else None,
                                             opts, scorers, skipped)
            metric_labels = metric_labels or [m for m in score_mod.metric_labels(scores) if m in scores.signatures]
            signatures = signatures or dict(scores.signatures)  # the same metrics, the same signature in every bin
            rows.append((label, len(idx), scores.cells))
    except ValueError as e:
        raise SystemExit(f"{prog}: {e}")
    cols = [(s, m) for m in (metric_labels or []) for s in systems]
    delta = [(s, m) for m in (metric_labels or []) for s in systems if baseline is not None and s is not baseline]
    head = ["bin", "sentences"] + [f"{s.name} {m}" for s, m in cols] + [f"{s.name} - {baseline.name} {m}" for s, m in delta]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    result = []
    for label, n, cells in rows:
        if cells is None:
            print(f"| {label} | 0 |" + " - |" * (len(head) - 2))
            continue
        vals_ = [cells[s.name][m].score for s, m in cols]
        deltas = [cells[s.name][m].score - cells[baseline.name][m].score for s, m in delta]
        print(f"| {label} | {n} | " + " | ".join(f"{v:.2f}" for v in vals_ + deltas) + " |")
        result.append({"bin": label, "sentences": n,
                       **{f"{s.name}/{m}": cells[s.name][m].score for s, m in cols}})
    by = ("--key-file " + a.key_file if a.key_file
          else ("source" if a.by == "src" else "reference") + " length in " + a.count)
    print(f"\n- bins by {by}")
    for note in notes:
        print(f"- {note}")
    for m, reason in skipped.items():
        print(f"- **{m} skipped**: {reason}")
    for m, signature in signatures.items():
        print(f"- signature {m}: {signature}")
    result = {"bins": result, "signatures": signatures}
    if a.json:
        write_json(a.json, result)
    return result


cli = console(main, "posmix-length-bins")


if __name__ == "__main__":
    raise SystemExit(cli())
