"""The numbers behind the papers' figures that the paper texts state (docs/papers.md), each with
where it is written. A figure whose numbers the text does not state is drawn with ours only, and
says so (:data:`NOT_IN_TEXT`). ``tests/test_figures.py`` checks that every number here occurs in
its paper's text.
"""
from ..paper_tables import GPA, HC, POSNET, TABLES

#: HC Fig. 3 caption: "with a four layer encoder and decoder, the BLEU gap between BASE-FF and BASE
#: is 1.8, while the gap between HC-SA and HC-SA-FF is 3.2" (WMT16 En-Ro)
HC_FIG3_LAYERS = 4
HC_FIG3_FF_GAP = {"BASE": 1.8, "HC-SA": 3.2}

#: GPA Fig. 2 plots the COMET of Table 6 (the caption: "provide the full Table showing BLEU, BLEURT,
#: and COMET in Appendix D", i.e. Table 6); the approaches in the figure's order (Section 7.1: "in
#: order of their attention weight expressiveness") with what their queries and keys see
GPA_FIG2_APPROACHES = [("aPosNet", "position-position"), ("rPosNet", "position-position"),
                       ("Rel. Self-Attention", "token-position"), ("Transformer", "token-token"),
                       ("Shaw et al. (2018)", "token-token + token-position")]
GPA_FIG2_TABLE = "gpa-6"


def gpa_fig2(metric: str):
    """{(approach, gating 'off'/'on'): value} of GPA Table 6 for ``metric`` (COMET, BLEU or BLEURT);
    empty when Table 6 has no such column."""
    reported = TABLES[GPA_FIG2_TABLE].reported
    column = f"En-De {metric}"
    out = {}
    for approach, _ in GPA_FIG2_APPROACHES:
        for gating in ("off", "on"):
            value = reported.get(f"{approach} gating {gating}", {}).get(column)
            if value is not None:
                out[(approach, gating)] = value
    return out


#: figures whose numbers are not in the available text (drawn with ours only)
NOT_IN_TEXT = {
    "hc-fig2": HC, "hc-fig4": HC, "hc-fig5": HC, "hc-fig6": HC, "hc-fig7": HC, "hc-fig8": HC,
    "posnet-fig2": POSNET, "posnet-fig3": POSNET, "posnet-fig4": POSNET,
}
PAPERS = {"hc": HC, "gpa": GPA, "posnet": POSNET}


def absent_note(figure: str) -> str:
    return f"{NOT_IN_TEXT[figure].split(':')[0]}'s text does not state this figure's numbers; ours only."
