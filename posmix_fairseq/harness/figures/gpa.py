"""GPA Fig. 2: the COMET of each approach
with and without gating, the approaches ordered by what their queries and keys see (Section 7.1).

Ours come from the ``scores.<system>.json`` of ``posmix-reproduce --table gpa-6`` (or any
``posmix-score --json`` per system); the paper's are its Table 6 (the figure's numbers, Appendix
D), drawn in a panel of their own beside ours, since the data and model sizes differ.
"""
from typing import Dict

import numpy as np

from . import style
from .data import partial_note
from .paper_numbers import GPA_FIG2_APPROACHES, gpa_fig2

GATING = ("off", "on")


def fig2(ours: Dict[str, float], out_dir: str, formats=style.FORMATS, metric: str = "COMET",
         ours_title: str = "ours"):
    """``ours``: {'<approach> gating off|on': value} (the gpa-6 table's labels)."""
    paper = gpa_fig2(metric)
    approaches = [a for a, _ in GPA_FIG2_APPROACHES]
    ticks = [f"{a}\n({what})" for a, what in GPA_FIG2_APPROACHES]
    with style.styled():
        ncols = 2 if paper else 1
        fig, axes = style.panels(1, ncols, panel=(4.2, 2.8), sharex=True)
        series = [(axes[0][0], {(a, g): ours[f"{a} gating {g}"] for a in approaches for g in GATING
                                if f"{a} gating {g}" in ours}, style.plot_ours, ours_title)]
        if paper:
            series.append((axes[0][1], paper, style.plot_paper, "paper (GPA Table 6, WMT14 En-De, Base)"))
        for ax, values, plot, title in series:
            for i, g in enumerate(GATING):  # markers only: the approaches are categories, not a scale
                xs = [k for k, a in enumerate(approaches) if (a, g) in values]
                plot(ax, [k + (i - 0.5) * 0.16 for k in xs], [values[(approaches[k], g)] for k in xs],
                     f"gating {g}", i, linestyle="none", markersize=6)
            ax.set_xticks(np.arange(len(approaches)), ticks, rotation=35, ha="right")
            ax.set_ylabel(metric)
            ax.set_title(title)
        style.legend([ax for ax, _, _, _ in series])  # ours and the paper's markers
        style.note(fig, "GPA Fig. 2: queries and keys see positions only (left) ... tokens and positions (right)."
                   + ("" if paper else f" GPA Table 6 has no {metric} column; ours only.")
                   + partial_note("gpa-6", ours))
        style.save(fig, out_dir, "gpa_fig2", formats)
    return fig
