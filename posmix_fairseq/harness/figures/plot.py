"""``posmix-plot``: the papers' figures and readable attention pictures, drawn from what the analysis
commands write (CSV/JSON), PNG and SVG in one style (:mod:`.style`).

    posmix-plot attention attn/attention_maps/sentence0.json --out figs [--single-heads]
    posmix-plot positions checkpoints/rposnet/checkpoint_best.pt --out figs [--positions 32]
    posmix-plot hc-fig2 attn/argmax_distance.csv --out figs
    posmix-plot hc-fig3 --score BASE:2=s.base.json --score BASE/-FF:2=s.base_noff.json ... --out figs
    posmix-plot hc-fig4 length-bins.json --baseline BASE --out figs
    posmix-plot hc-fig5 --system BASE=contrastive.base.json --system HC-SA=contrastive.hc_sa.json --out figs
    posmix-plot hc-fig6 offdiag-bins.json --out figs
    posmix-plot hc-fig7 --scores-dir runs/reproduce/hc-fig7 --out figs
    posmix-plot hc-fig8 --panel 'encoder self=enc.json' --panel 'decoder self=dec.json' --out figs
    posmix-plot gpa-fig2 --scores-dir runs/reproduce/gpa-6 [--metric COMET] --out figs
    posmix-plot posnet-fig2 forward-time.json --out figs
    posmix-plot posnet-fig3 --score 64=s.dp64.json --score 128=s.dp128.json --out figs
    posmix-plot posnet-fig4 ngram-orders.json --out figs

Where a paper's text states the numbers behind a figure they are drawn beside ours and labelled
"paper"; where it does not, the figure says so (:mod:`.paper_numbers`). Each sub-command's --help
names the command whose output it reads.
"""
import json
import os
from typing import List, Optional

from . import gpa, hc, posnet, style
from .attention_maps import draw_files
from ..command import (HelpFormatter, build_parser as command_parser, check_checkpoint, check_data_dir,
                        check_output_dir, console, replace_file)
from .data import (FigureInputError, argmax_rows, contrastive_by_distance, length_bins, metric_of, parse_pairs,
                   pick_system, read_json, system_scores, table_scores)
from ..command import FIGURE_FORMATS, NON_NEGATIVE_INT, POSITIVE_INT, NumberList


def _formats(formats):
    """--formats as parsed (a list; the default's text split)."""
    return formats.split(",") if isinstance(formats, str) else formats


def cmd_attention(a):
    return draw_files(a.files, a.out, a.single_heads, _formats(a.formats))


def cmd_positions(a):
    # learned_positions imports torch (seconds): only for this subcommand
    from .learned_positions import draw, extract, load_model

    if a.source.endswith(".json"):
        data = read_json(a.source, "posmix-plot positions --json output")
    else:
        check_checkpoint(a.source, "SOURCE")
        if a.data:
            check_data_dir(a.data, "--data")
        queries = a.query_positions or None
        data = extract(load_model(a.source, a.data), a.positions, queries, checkpoint=a.source)
        os.makedirs(a.out, exist_ok=True)
        replace_file(a.json or os.path.join(a.out, "positions.json"), json.dumps(data))
    return draw(data, a.out, _formats(a.formats))


def cmd_hc_fig2(a):
    return hc.fig2(argmax_rows(a.csv), a.out, _formats(a.formats), a.value)


def cmd_hc_fig3(a):
    points = {}
    for label, path in parse_pairs(a.score, "--score", "'HC-SA/-FF:2=scores.json'"):
        system, layers = hc.parse_layer_label(label, "--score")
        points.setdefault(system, {})[layers] = metric_of(system_scores(path, system), a.metric, path)
    if not points:
        raise FigureInputError("hc-fig3: give --score SYSTEM:LAYERS=PATH for each model")
    return hc.fig3(points, a.out, _formats(a.formats), a.metric)


def cmd_hc_fig4(a):
    bins, scores = length_bins(a.json)
    baseline = pick_system(list(scores), a.baseline, a.json, "--baseline")
    metric = hc.choose_metric(scores, a.metric, a.json)
    scores = {s: {metric: v[metric]} for s, v in scores.items()}
    return hc.fig4(bins, scores, baseline, a.out, _formats(a.formats), metric)


def cmd_hc_fig5(a):
    systems = [(label, contrastive_by_distance(path, a.category))
               for label, path in parse_pairs(a.system, "--system", "BASE=contrastive.json")]
    if not systems:
        raise FigureInputError("hc-fig5: give --system LABEL=PATH (posmix-contrastive --json) for each model")
    return hc.fig5(systems, a.out, _formats(a.formats), a.category)


def cmd_hc_fig6(a):
    bins, scores = length_bins(a.json)
    return hc.off_diagonality_panels([(a.title, bins, scores)], a.out, "hc_fig6", "hc-fig6", _formats(a.formats),
                                     a.metric)


def cmd_hc_fig8(a):
    pairs = parse_pairs(a.panel, "--panel", "'encoder self=bins.json'")
    panels = [(title, *length_bins(path)) for title, path in pairs]
    if not panels:
        raise FigureInputError("hc-fig8: give --panel TITLE=PATH (posmix-length-bins --key-file ... --json) per panel")
    return hc.off_diagonality_panels(panels, a.out, "hc_fig8", "hc-fig8", _formats(a.formats), a.metric)


def cmd_hc_fig7(a):
    values = table_scores("hc-fig7", a.scores_dir, parse_pairs(a.score, "--score", "'2 heads, last layer=scores.json'"),
                          a.metric)
    return hc.fig7(values, a.out, _formats(a.formats), a.metric)


def cmd_gpa_fig2(a):
    values = table_scores("gpa-6", a.scores_dir, parse_pairs(a.score, "--score", "'rPosNet gating on=scores.json'"),
                          a.metric)
    return gpa.fig2(values, a.out, _formats(a.formats), a.metric, a.ours_title)


def cmd_posnet_fig2(a):
    return posnet.fig2(read_json(a.json, "posmix-forward-time --json output"), a.out, _formats(a.formats))


def cmd_posnet_fig3(a):
    points = {}
    for label, path in parse_pairs(a.score, "--score", "64=scores.json"):
        if not label.isdigit():
            raise FigureInputError(f"--score {label}=...: the label is d_p, a positive integer")
        points[int(label)] = metric_of(system_scores(path), a.metric, path)
    if not points:
        raise FigureInputError("posnet-fig3: give --score D_P=PATH (posmix-score --json) for each d_p")
    return posnet.fig3(points, a.out, _formats(a.formats), a.metric)


def cmd_posnet_fig4(a):
    data = read_json(a.json, "posmix-ngram-orders --json output")
    if not isinstance(data, dict) or "chrf_char_orders" not in data:
        raise FigureInputError(f"{a.json}: expected the output of posmix-ngram-orders --json")
    return posnet.fig4(data, a.out, _formats(a.formats))


def build_parser():
    p = command_parser("posmix-plot", __doc__)
    sub = p.add_subparsers(dest="figure", required=True, metavar="FIGURE", help="the figure to draw")

    def add(name, fn, help_):
        s = sub.add_parser(name, help=help_, description=help_, formatter_class=HelpFormatter)
        s.add_argument("--out", required=True, metavar="DIR",
                       help="output directory (files are named after the figure)")
        s.add_argument("--formats", type=FIGURE_FORMATS, default="png,svg",
                       help="comma-separated: png, svg, pdf (default png,svg)")
        s.add_argument("--dpi", type=POSITIVE_INT, default=style.DPI,
                       help=f"PNG resolution, {style.DPI_RANGE[0]}..{style.DPI_RANGE[1]} dots per inch (default "
                            f"{style.DPI}; fonts and lines scale with it)")
        s.set_defaults(fn=fn)
        return s

    s = add("attention", cmd_attention, "attention per sentence and sublayer (posmix-attention --heatmaps' JSON files)")
    s.add_argument("files", nargs="+", metavar="FILE", help="attention_maps/sentence<ID>.json files")
    s.add_argument("--single-heads", action="store_true", help="also one figure per layer and head")
    s = add("positions", cmd_positions, "what a position-based model learned, from a checkpoint (trained or frozen) "
                                        "or a positions.json this command wrote")
    s.add_argument("source", metavar="SOURCE", help="checkpoint (.pt) or positions.json")
    s.add_argument("--data", metavar="DIR", help="the dictionaries' directory when the checkpoint's own is not here")
    s.add_argument("--positions", type=POSITIVE_INT, help="positions P drawn (default 32, or fewer where the model has fewer)")
    s.add_argument("--query-positions", type=NumberList(NON_NEGATIVE_INT),
                   help="query positions of the rPosNet softmax profiles (default: 4 spread over P)")
    s.add_argument("--json", metavar="FILE", help="where to write the tables (default OUT/positions.json)")
    s = add("hc-fig2", cmd_hc_fig2, "HC Fig. 2: argmax distance of each head (posmix-attention's argmax_distance.csv)")
    s.add_argument("csv", metavar="CSV", help="posmix-attention's argmax_distance.csv")
    s.add_argument("--value", default="mean_argmax_distance",
                   help="column: mean_argmax_distance (default), mean_abs_distance or off_diagonal_share")
    s = add("hc-fig3", cmd_hc_fig3,
            "HC Fig. 3: BLEU by layers with and without feed-forward (posmix-score --json each)")
    s.add_argument("--score", action="append", default=[], metavar="SYSTEM:LAYERS=PATH",
                   help="one model; systems X and X/-FF are paired (e.g. BASE:2=..., BASE/-FF:2=...)")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("hc-fig4", cmd_hc_fig4, "HC Fig. 4: BLEU and its difference to BASE by reference length "
                                    "(posmix-length-bins --by ref --bins quantiles:5 --json)")
    s.add_argument("json", metavar="JSON", help="posmix-length-bins --json output")
    s.add_argument("--baseline", required=True, help="the baseline's system name in the file")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("hc-fig5", cmd_hc_fig5,
            "HC Fig. 5: agreement accuracy by subject-verb distance (posmix-contrastive --json each)")
    s.add_argument("--system", action="append", default=[], metavar="LABEL=PATH",
                   help="one model: its label and its posmix-contrastive --json file; repeat for each")
    s.add_argument("--category", default="subj_verb_agreement",
                   help="LingEval97 error type (default subj_verb_agreement)")
    s = add("hc-fig6", cmd_hc_fig6,
            "HC Fig. 6: BLEU by off-diagonality (posmix-length-bins --key-file offdiag.X.txt --json)")
    s.add_argument("json", metavar="JSON", help="posmix-length-bins --key-file offdiag.X.txt --json output")
    s.add_argument("--title", default="decoder self-attention", help="what the off-diagonality was measured on")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("hc-fig7", cmd_hc_fig7,
            "HC Fig. 7: cross-attention heads in one layer vs spread (posmix-reproduce --table hc-fig7)")
    s.add_argument("--scores-dir", metavar="DIR", help="posmix-reproduce's OUT/hc-fig7 (scores.<system>.json)")
    s.add_argument("--score", action="append", default=[], metavar="LABEL=PATH",
                   help="a system by its hc-fig7 label, e.g. '2 heads, 1 per layer=scores.json'")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("hc-fig8", cmd_hc_fig8, "HC Fig. 8: Fig. 6 for more sublayers or directions, one --panel each")
    s.add_argument("--panel", action="append", default=[], metavar="TITLE=PATH",
                   help="one panel: its title and a posmix-length-bins --json file; repeat for each")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("gpa-fig2", cmd_gpa_fig2,
            "GPA Fig. 2: each approach with and without gating (posmix-reproduce --table gpa-6)")
    s.add_argument("--scores-dir", metavar="DIR", help="posmix-reproduce's OUT/gpa-6 (scores.<system>.json)")
    s.add_argument("--score", action="append", default=[], metavar="LABEL=PATH",
                   help="a system by its gpa-6 label, e.g. 'rPosNet gating on=scores.json'")
    s.add_argument("--metric", default="COMET", help="COMET (the paper's), BLEU or BLEURT are in Table 6")
    s.add_argument("--ours-title", default="ours", help="title of our panel (e.g. the data and model size)")
    s = add("posnet-fig2", cmd_posnet_fig2, "PosNet Fig. 2: forward time per method (posmix-forward-time --json)")
    s.add_argument("json", metavar="JSON", help="posmix-forward-time --json output")
    s = add("posnet-fig3", cmd_posnet_fig3, "PosNet Fig. 3: BLEU by PosNet-Embed's d_p (posmix-score --json each)")
    s.add_argument("--score", action="append", default=[], metavar="D_P=PATH",
                   help="one model: its d_p and its posmix-score --json file; repeat for each")
    s.add_argument("--metric", default="BLEU", help="the metric drawn, as posmix-score names it")
    s = add("posnet-fig4", cmd_posnet_fig4, "PosNet Fig. 4: gap over SAPE by n-gram order (posmix-ngram-orders --json)")
    s.add_argument("json", metavar="JSON", help="posmix-ngram-orders --json output")
    return p


def main(argv: Optional[List[str]] = None):
    a = build_parser().parse_args(argv)
    check_output_dir(a.out, "--out")  # before any input is read
    try:
        with style.resolution(a.dpi):
            result = a.fn(a)
    except (FigureInputError, ValueError) as e:
        raise SystemExit(f"posmix-plot {a.figure}: {e}")
    print(f"posmix-plot {a.figure}: wrote {a.out}")
    return result


cli = console(main, "posmix-plot")


if __name__ == "__main__":
    raise SystemExit(cli())
