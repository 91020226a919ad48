"""Figures: the papers' figures and readable pictures of attention and of learned positions, drawn
from what the analysis commands write (``posmix-plot``, :mod:`.plot`).

One module per idea:

- ``style``: the one style (fonts, colours, "ours" and "paper", PNG and SVG);
- ``data``: reading the analysis outputs (CSV/JSON), with clear errors;
- ``paper_numbers``: the numbers behind the figures that the paper texts state;
- ``hc``, ``gpa``, ``posnet``: each paper's figures;
- ``attention_maps``: one figure per sentence and sublayer (layers x heads, tokens, one colour bar);
- ``learned_positions``: what a position-based model learned, from any checkpoint, no sentence needed.
"""
