"""The figures of HC, from the analysis outputs.

- Fig. 2: the mean distance from each head's query to the argmax of its attention, every head of
  every layer, one panel per sublayer (``posmix-attention``'s ``argmax_distance.csv``).
- Fig. 3: BLEU by number of layers with and without the feed-forward sublayers (WMT16 En-Ro in the
  paper; ``posmix-score --json`` of each model), and the BLEU lost without them, with the two gaps
  the caption states (4 layers: BASE 1.8, HC-SA 3.2).
- Fig. 4: BLEU by reference-length bin, and its difference to BASE (``posmix-length-bins --by ref
  --bins quantiles:5 --json``).
- Fig. 5: subject-verb agreement accuracy by subject-verb distance (``posmix-contrastive --json``
  of each model).
- Fig. 6: BLEU by off-diagonality bin (``posmix-length-bins --key-file offdiag.decoder_self.txt
  --json``); Fig. 8 the same for more sublayers and directions, one panel each.
- Fig. 7: BLEU by the number of learned cross-attention heads, all in the last decoder layer
  against one per layer (``posmix-reproduce --table hc-fig7`` scores).
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import style
from matplotlib.patches import Patch  # noqa: E402  (after style: it quiets matplotlib's logger first)
from .data import FigureInputError, partial_note
from .paper_numbers import HC_FIG3_FF_GAP, HC_FIG3_LAYERS, absent_note

SUBLAYER_TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
                   "decoder_cross": "decoder cross-attention"}
NO_FF = "/-FF"


def fig2(rows: List[Dict], out_dir: str, formats=style.FORMATS, value: str = "mean_argmax_distance"):
    """One bar per head (grouped and coloured by layer), one panel per sublayer."""
    kinds = [k for k in SUBLAYER_TITLES if any(r["sublayer"] == k for r in rows)]
    if value not in rows[0]:
        columns = ", ".join(k for k in rows[0] if k.startswith(("mean", "off")))
        raise FigureInputError(f"--value {value!r}: the CSV has {columns}")
    with style.styled():
        widest = max(sum(1 for r in rows if r["sublayer"] == k) for k in kinds)
        fig, axes = style.panels(1, len(kinds), panel=(max(2.6, 0.22 * widest + 1.0), 2.8))
        for ax, kind in zip(axes[0], kinds):
            mine = sorted((r for r in rows if r["sublayer"] == kind), key=lambda r: (r["layer"], r["head"]))
            x = np.arange(len(mine))
            ax.bar(x, [r[value] for r in mine], color=[style.colour(r["layer"] - 1) for r in mine], width=0.75)
            ax.axhline(0.0, color="0.3", linewidth=0.6)
            ax.set_xticks(x, [f"{r['layer']}.{r['head']}" for r in mine], rotation=90)
            ax.set_xlabel("layer.head")
            ax.set_title(SUBLAYER_TITLES[kind])
        layers = sorted({r["layer"] for r in rows if r["sublayer"] in kinds})
        fig.legend([Patch(color=style.colour(li - 1)) for li in layers], [f"layer {li}" for li in layers],
                   loc="outside right upper", title="bar colour")
        axes[0][0].set_ylabel({"mean_argmax_distance": "argmax distance (key - query)",
                               "mean_abs_distance": "|argmax distance|",
                               "off_diagonal_share": "share with |distance| >= 2"}.get(value, value))
        style.note(fig, "HC Fig. 2: each head's argmax distance, averaged over the test set. " + absent_note("hc-fig2"))
        style.save(fig, out_dir, "hc_fig2", formats)
    return fig


def parse_layer_label(label: str, option: str) -> Tuple[str, int]:
    """'HC-SA:2' -> ('HC-SA', 2)."""
    system, sep, layers = label.rpartition(":")
    if not sep or not system or not layers.isdigit():
        raise FigureInputError(f"{option} {label!r}: expected SYSTEM:LAYERS=PATH, "
                               f"e.g. {option} 'HC-SA/-FF:2=scores.json'")
    return system, int(layers)


def fig3(points: Dict[str, Dict[int, float]], out_dir: str, formats=style.FORMATS, metric: str = "BLEU"):
    """(a) ``metric`` by number of layers per system; (b) S - S/-FF for each S given with and without
    feed-forward sublayers, and the caption's two gaps at 4 layers (paper)."""
    systems = list(points)
    pairs = [s for s in systems if not s.endswith(NO_FF) and s + NO_FF in points]
    if not pairs:
        raise FigureInputError("hc-fig3: no system given both with and without feed-forward sublayers "
                               "(e.g. --score BASE:2=... --score BASE/-FF:2=...)")
    with style.styled():
        fig, axes = style.panels(1, 2)
        a, b = axes[0]
        for i, s in enumerate(systems):
            layers = sorted(points[s])
            style.plot_ours(a, layers, [points[s][n] for n in layers], s, i)
        a.set_xlabel("encoder and decoder layers")
        a.set_ylabel(metric)
        a.set_title(f"{metric} with and without feed-forward")
        style.legend(a)
        for s in pairs:  # each pair in its system's colour of panel (a)
            i = systems.index(s)
            layers = sorted(set(points[s]) & set(points[s + NO_FF]))
            style.plot_ours(b, layers, [points[s][n] - points[s + NO_FF][n] for n in layers], f"{s} - {s}{NO_FF}", i)
            if s in HC_FIG3_FF_GAP and metric == "BLEU":
                style.plot_paper(b, [HC_FIG3_LAYERS], [HC_FIG3_FF_GAP[s]], f"{s} - {s}{NO_FF}", i)
        b.axhline(0.0, color="0.3", linewidth=0.6)
        for ax in (a, b):
            ax.xaxis.get_major_locator().set_params(integer=True)
        b.set_xlabel("encoder and decoder layers")
        b.set_ylabel(f"{metric} lost without feed-forward")
        b.set_title("the cost of removing feed-forward")
        style.legend(b)
        style.note(fig, "HC Fig. 3. Paper: WMT16 En-Ro, the two gaps at 4 layers its caption states; "
                        "its BLEU per layer count is not in the text.")
        style.save(fig, out_dir, "hc_fig3", formats)
    return fig


def short_label(label: str) -> str:
    """A bin label with its edges to 2 decimals ('>0.636364-0.708333' -> '>0.64-0.71')."""
    return re.sub(r"\d+\.\d{3,}", lambda m: f"{float(m.group()):.2f}", label)


def bin_axis(ax, labels: Sequence[str], xlabel: str):
    labels = [short_label(x) for x in labels]
    ax.set_xticks(range(len(labels)), labels, rotation=30 if max(len(s) for s in labels) > 5 else 0)
    ax.set_xlabel(xlabel)


def fig4(bins, scores, baseline: str, out_dir: str, formats=style.FORMATS, metric: str = "BLEU"):
    """(a) ``metric`` per reference-length bin, every system; (b) each system minus ``baseline``."""
    labels = [f"{b}\n({n})" for b, n in bins]
    if not [s for s in scores if s != baseline]:
        raise FigureInputError(f"hc-fig4: only the baseline {baseline!r} is in the file; nothing to compare")
    with style.styled():
        fig, axes = style.panels(1, 2)
        a, b = axes[0]
        for i, s in enumerate(scores):
            style.plot_ours(a, range(len(bins)), scores[s][metric], s, i)
        for i, s in enumerate(scores):
            if s != baseline:
                diff = np.asarray(scores[s][metric]) - np.asarray(scores[baseline][metric])
                style.plot_ours(b, range(len(bins)), diff, f"{s} - {baseline}", i)
        b.axhline(0.0, color="0.3", linewidth=0.6)
        for ax in (a, b):
            bin_axis(ax, labels, "reference length (words), bin (sentences)")
            style.legend(ax)
        a.set_ylabel(metric)
        a.set_title(f"{metric} by reference length")
        b.set_ylabel(f"{metric} difference to {baseline}")
        b.set_title(f"{metric} difference to {baseline}")
        style.note(fig, "HC Fig. 4 (the paper plots the difference; WMT14 En-De, five bins). " + absent_note("hc-fig4"))
        style.save(fig, out_dir, "hc_fig4", formats)
    return fig


def distance_order(b: str):
    return (1, int(b[1:])) if b.startswith(">") else (0, int(b))


def fig5(systems: List[Tuple[str, List[Tuple[str, int, int]]]], out_dir: str, formats=style.FORMATS,
         category: str = "subj_verb_agreement"):
    """Accuracy (%) per distance bin, one line per system; a bin a system has no example in is not drawn."""
    all_bins = sorted({b for _, rows in systems for b, _, _ in rows}, key=distance_order)
    with style.styled():
        fig, axes = style.panels(1, 1, panel=(max(3.2, 0.3 * len(all_bins) + 1.5), 2.5))
        ax = axes[0][0]
        for i, (label, rows) in enumerate(systems):
            got = {b: (c, n) for b, c, n in rows if n}
            xs = [k for k, b in enumerate(all_bins) if b in got]
            style.plot_ours(ax, xs, [100.0 * got[all_bins[k]][0] / got[all_bins[k]][1] for k in xs], label, i)
        ax.set_xticks(range(len(all_bins)), all_bins)
        ax.set_xlabel("distance between subject and verb (words)")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{category}: accuracy by distance")
        style.legend(ax)
        style.note(fig, "HC Fig. 5 (LingEval97; a decision is correct when the reference scores higher). "
                   + absent_note("hc-fig5"))
        style.save(fig, out_dir, "hc_fig5", formats)
    return fig


def off_diagonality_panels(panels, out_dir: str, name: str, figure: str, formats=style.FORMATS,
                           metric: str = "BLEU"):
    """One panel per (title, bins, scores): ``metric`` of every system per off-diagonality bin."""
    ncols = min(len(panels), 2)
    nrows = (len(panels) + ncols - 1) // ncols
    with style.styled():
        fig, axes = style.panels(nrows, ncols)
        flat = list(axes.ravel())
        for ax, (title, bins, scores) in zip(flat, panels):
            for i, s in enumerate(scores):
                if metric not in scores[s]:
                    raise FigureInputError(f"{figure} {title!r}: no {metric} for {s} (it has "
                                           f"{', '.join(scores[s])}); pass --metric with one of these")
                style.plot_ours(ax, range(len(bins)), scores[s][metric], s, i)
            bin_axis(ax, [f"{b}\n({n})" for b, n in bins], "off-diagonality, bin (sentences)")
            ax.set_ylabel(metric)
            ax.set_title(title)
        style.legend(flat[0], figure_wide=True)  # the same systems in every panel
        style.hide_unused(flat, len(panels))
        style.note(fig, f"HC {figure.replace('hc-fig', 'Fig. ')}: off-diagonality = share of tokens whose "
                        "attention argmax is >= 2 positions from the query. " + absent_note(figure))
        style.save(fig, out_dir, name, formats)
    return fig


HEADS_LABEL = re.compile(r"^(\d+) heads?, (last layer|1 per layer)$")


def fig7(values: Dict[str, float], out_dir: str, formats=style.FORMATS, metric: str = "BLEU"):
    """``metric`` by the number of learned cross heads: all in the last decoder layer, or one per layer
    (the labels of ``posmix-reproduce --table hc-fig7``: 'N heads, last layer', 'N heads, 1 per layer')."""
    series: Dict[str, Dict[int, float]] = {"last layer": {}, "1 per layer": {}}
    for label, v in values.items():
        m = HEADS_LABEL.match(label)
        if not m:
            raise FigureInputError(f"hc-fig7: system {label!r}: expected 'N heads, last layer' or "
                                   "'N heads, 1 per layer' (the hc-fig7 table's labels)")
        n, where = int(m.group(1)), m.group(2)
        series[where][n] = v
        if n == 1:  # one head in the last layer starts both series
            series["1 per layer"][n] = v
    with style.styled():
        fig, axes = style.panels(1, 1)
        ax = axes[0][0]
        names = {"last layer": "all in the last decoder layer", "1 per layer": "one per layer (the last N layers)"}
        for i, where in enumerate(series):
            xs = sorted(series[where])
            if xs:
                style.plot_ours(ax, xs, [series[where][n] for n in xs], names[where], i)
        ax.set_xlabel("learned cross-attention heads")
        ax.set_ylabel(metric)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title("where to add cross-attention heads")
        style.legend(ax)
        style.note(fig, "HC Fig. 7 (WMT16 En-Ro in the paper). " + absent_note("hc-fig7")
                   + partial_note("hc-fig7", values))
        style.save(fig, out_dir, "hc_fig7", formats)
    return fig


def choose_metric(scores: Dict[str, Dict[str, List[float]]], metric: Optional[str], path: str) -> str:
    found = sorted({m for s in scores.values() for m in s})
    if metric not in found:
        raise FigureInputError(f"--metric {metric!r}: {path} has {', '.join(found)}")
    return metric
