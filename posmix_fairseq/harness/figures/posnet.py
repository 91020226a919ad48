"""The figures of PosNet, from the analysis outputs.

- Fig. 2: the time each position-encoding method takes to forward the same batch 10 times
  (``posmix-forward-time --json``).
- Fig. 3: validation BLEU of PosNet-Embed by the kernel dimension d_p (``posmix-score --json`` of
  each model of the sweep).
- Fig. 4: the gap of PosNet-Embed over SAPE at every character / word n-gram order of chrF and
  every BLEU order (``posmix-ngram-orders --json``).

The paper's text states none of these figures' numbers (only that d_p = 128 was best and 96
worse, and that relative position encoding and AT5 are the slow ones), so ours are drawn alone and each figure says so.
"""
from typing import Dict

import numpy as np

from . import style
from .data import FigureInputError
from .paper_numbers import absent_note


def fig2(result: Dict, out_dir: str, formats=style.FORMATS):
    systems = result.get("systems") or []
    if not systems:
        raise FigureInputError("posnet-fig2: the file lists no systems (expected posmix-forward-time --json)")
    with style.styled():
        fig, axes = style.panels(1, 1, panel=(max(3.2, 0.55 * len(systems) + 1.0), 2.6))
        ax = axes[0][0]
        x = np.arange(len(systems))
        ax.bar(x, [s["total_seconds"] for s in systems], color=[style.colour(i) for i in range(len(systems))],
               width=0.7)
        ax.set_xticks(x, [s["label"] for s in systems], rotation=30, ha="right")
        ax.set_ylabel(f"seconds for {result['repeats']} forwards")
        ax.set_title(f"forward time: batch {result['batch_size']} x {result['length']} tokens, {result['device']}")
        style.note(fig, "PosNet Fig. 2 (the same batch forwarded 10 times; Transformer Base on a GPU in the paper). "
                   + absent_note("posnet-fig2"))
        style.save(fig, out_dir, "posnet_fig2", formats)
    return fig


def fig3(points: Dict[int, float], out_dir: str, formats=style.FORMATS, metric: str = "BLEU"):
    dims = sorted(points)
    with style.styled():
        fig, axes = style.panels(1, 1)
        ax = axes[0][0]
        style.plot_ours(ax, dims, [points[d] for d in dims], "PosNet-Embed", 0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(dims, [str(d) for d in dims])
        ax.minorticks_off()
        ax.set_xlabel("kernel dimension d_p")
        ax.set_ylabel(metric)
        ax.set_title(f"PosNet-Embed: {metric} by d_p")
        style.note(fig, "PosNet Fig. 3 (newstest2013 in the paper, where d_p = 128 was best and 96 worse). "
                   + absent_note("posnet-fig3"))
        style.save(fig, out_dir, "posnet_fig3", formats)
    return fig


PANELS = [("chrf_char_orders", "(a) chrF, character n-grams (word order {word_order})", "character n-gram order"),
          ("chrf_word_orders", "(b) chrF, word n-grams (character order {char_order})", "word n-gram order"),
          ("bleu_orders", "(c) BLEU", "maximum n-gram order")]


def fig4(result: Dict, out_dir: str, formats=style.FORMATS):
    baseline = result["baseline"]
    others = [s for s in result["systems"] if s != baseline]
    if not others:
        raise FigureInputError("posnet-fig4: only the baseline is in the file; nothing to compare")
    with style.styled():
        fig, axes = style.panels(1, 3)
        for ax, (key, title, xlabel) in zip(axes[0], PANELS):
            block = result[key]
            base = np.asarray(block["scores"][baseline])
            for i, s in enumerate(others):
                style.plot_ours(ax, block["orders"], np.asarray(block["scores"][s]) - base, s, i, markersize=3)
            ax.axhline(0.0, color="0.3", linewidth=0.6)
            ax.set_title(title.format(**block))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"gap over {baseline}")
        style.legend(axes[0][0], figure_wide=True)  # the same systems in every panel
        style.note(fig, "PosNet Fig. 4 (WMT14 En-De in the paper). " + absent_note("posnet-fig4"))
        style.save(fig, out_dir, "posnet_fig4", formats)
    return fig
