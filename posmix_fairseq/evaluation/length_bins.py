"""``posmix-length-bins``: every metric of ``posmix-score`` per bin of sentence length (or of any
per-sentence value), for each system, with the difference to a baseline.

APE paper Table 2 groups by source length, G_0:25, G_26:50, ..., G_101:inf ("--by src --bins
25,50,75,100", lengths in subword tokens: ``--count pieces``, the S-/T- lines fairseq printed). The HC
paper's Fig. 4 bins the test set by reference length into five bins and plots BLEU minus BASE's
("--by ref --bins quantiles:5 --baseline BASE.txt"). Fig. 6 bins by the off-diagonality that
``posmix-attention`` writes ("--key-file offdiag.decoder_self.txt --bins 0.1,0.2,0.3").

Bins: ``--bins E1,E2,...`` are inclusive upper edges (bin k holds E_{k-1} < x <= E_k; the first
starts at -inf, the last, above the last edge, is open); ``--bins quantiles:K`` makes K bins of about
equal size from the data.

    posmix-length-bins gen.hc_all.txt --baseline gen.base.txt --spm-model spm.model --ref test.de \\
        --by ref --bins quantiles:5 --metrics bleu
"""
from typing import List, Optional, Sequence, Tuple

from . import score as score_mod
from .detok import Detokenizer
from .generate_output import read_generate_output


def parse_bins(spec: str, values: Sequence[float]) -> List[float]:
    """Inclusive upper edges, ascending."""
    spec = spec.strip()
    if spec.startswith("quantiles:"):
        try:
            k = int(spec.split(":", 1)[1])
        except ValueError:
            k = 0
        if k < 1:
            raise ValueError(f"--bins {spec!r}: expected quantiles:K with K >= 1")
        s = sorted(values)
        edges = []
        for i in range(1, k):
            e = s[min(len(s) - 1, (i * len(s)) // k - 1)] if s else 0
            if not edges or e > edges[-1]:
                edges.append(e)
        return edges
    try:
        edges = [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--bins {spec!r}: expected comma-separated numbers (e.g. 25,50,75,100) or quantiles:K")
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"--bins {spec!r}: edges must be strictly increasing and non-empty")
    return edges


def assign(values: Sequence[float], edges: List[float]) -> List[int]:
    out = []
    for v in values:
        k = 0
        while k < len(edges) and v > edges[k]:
            k += 1
        out.append(k)
    return out


def bin_labels(edges: List[float], integer: bool) -> List[str]:
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


def lengths(args, systems, refs, srcs, untranslated=()) -> Tuple[List[float], bool]:
    if args.key_file:
        vals = [float(x) for x in score_mod.read_lines(args.key_file)]
        if len(vals) != len(refs):
            raise ValueError(f"--key-file {args.key_file}: {len(vals)} values for {len(refs)} sentences")
        return vals, False
    if args.count == "pieces":
        gen_paths = list(args.gen_out) + list(args.baseline)
        if not gen_paths:
            raise ValueError("--count pieces needs a fairseq-generate output (its S-/T- lines)")
        gen = read_generate_output(gen_paths[0], untranslated)
        side = gen.sources if args.by == "src" else gen.references
        if not side:
            raise ValueError(f"--count pieces needs the {'S-' if args.by == 'src' else 'T-'} lines of a fairseq-generate output")
        return [len(x.split()) for x in side], True
    text = srcs if args.by == "src" else refs
    if text is None:
        raise ValueError("--by src needs --src FILE or S- lines")
    return [len(x.split()) for x in text], True


def main(argv: Optional[List[str]] = None):
    p = score_mod.build_parser()
    p.prog = "posmix-length-bins"
    p.description = __doc__.split("\n\n")[0]
    p.epilog = __doc__.split("\n\n", 1)[1]
    p.set_defaults(metrics="bleu,chrf++,ter", bootstrap_samples=0)
    p.add_argument("--by", choices=["src", "ref"], default="src", help="bin by source or reference length")
    p.add_argument("--count", choices=["words", "pieces"], default="words",
                   help="length unit: whitespace words of the raw text, or subword pieces (S-/T- lines)")
    p.add_argument("--bins", default="25,50,75,100", help="upper edges E1,E2,... or quantiles:K")
    p.add_argument("--key-file", help="bin by these per-sentence values instead (one per line, in sentence order)")
    a = p.parse_args(argv)
    metrics = [m.strip().lower() for m in a.metrics.split(",") if m.strip()]
    bad = [m for m in metrics if m not in score_mod.ALL_METRICS]
    if bad or not metrics:
        raise SystemExit(f"--metrics: unknown {bad or '(empty)'}; valid: {', '.join(score_mod.ALL_METRICS)}")
    entries = ([(x, False, False) for x in a.gen_out] + [(x, False, True) for x in a.hyp]
               + [(x, True, False) for x in a.baseline] + [(x, True, True) for x in a.baseline_hyp])
    if not entries:
        raise SystemExit("posmix-length-bins: give at least one system")
    untranslated = score_mod.read_untranslated(a.untranslated)[0] if a.untranslated else []
    skip = set(untranslated)
    try:
        detok = Detokenizer(a.spm_model, a.remove_bpe, a.moses_detok)
        names = score_mod.unique_names([e[0] for e in entries], a.names)
        systems = [score_mod.load_system(path, name, detok, b, a.use_detok_lines, t, untranslated)
                   for (path, b, t), name in zip(entries, names)]
        refs = score_mod.read_lines(a.ref) if a.ref else next((s.refs for s in systems if s.refs), None)
        if refs is None:
            raise ValueError("no references: pass --ref FILE")
        if a.ref and skip:
            refs = [x for i, x in enumerate(refs) if i not in skip]
        srcs = score_mod.read_lines(a.src) if a.src else next((s.srcs for s in systems if s.srcs), None)
        if a.src and skip and srcs is not None:
            srcs = [x for i, x in enumerate(srcs) if i not in skip]
        if skip:
            print(f"posmix-length-bins: {len(skip)} of {len(refs) + len(skip)} test sentences were not translated "
                  "(--untranslated); the bins hold the rest")
        vals, integer = lengths(a, systems, refs, srcs, untranslated)
        edges = parse_bins(a.bins, vals)
        groups = assign(vals, edges)
        labels = bin_labels(edges, integer)
        baseline = next((s for s in systems if s.is_baseline), None)
        rows = []
        metric_labels = None
        for k, label in enumerate(labels):
            idx = [i for i, g in enumerate(groups) if g == k]
            if not idx:
                rows.append((label, 0, None))
                continue
            sub = [score_mod.System(s.name, s.path, [s.hyps[i] for i in idx], s.is_baseline) for s in systems]
            cells, sigs, skipped = score_mod.score_systems(
                sub, [refs[i] for i in idx], [srcs[i] for i in idx] if srcs else None, metrics, a.tokenize,
                a.lowercase, a.comet_model, a.bleurt_checkpoint, a.bootstrap_samples, a.batch_size)
            metric_labels = metric_labels or [m for m in score_mod.METRIC_ORDER if m in sigs]
            rows.append((label, len(idx), cells))
    except ValueError as e:
        raise SystemExit(f"posmix-length-bins: {e}")
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
    print(f"\n- bins by {'--key-file ' + a.key_file if a.key_file else ('source' if a.by == 'src' else 'reference') + ' length in ' + a.count}; "
          f"detokenisation: {detok.description}")
    if a.json:
        import json

        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


def cli():
    """Console entry point: main() returns results for tests; the process exits 0 on success."""
    main()


if __name__ == "__main__":
    cli()
