"""Attention that a person can read: one figure per sentence and sublayer, the layers as rows and
the heads as columns, the sentence's tokens on the axes, one colour scale for all panels (with its
colour bar), the sentence pair in the title. ``single_heads`` also writes one figure per head.

Input: the ``attention_maps/sentence<ID>.json`` files of ``posmix-attention --heatmaps ID,...``
(:mod:`posmix_fairseq.harness.evaluation.sentence_attention`). Rows are the queries, columns the keys.
Decoder rows are labelled with the reference token each query predicts; decoder self-attention
columns with the decoder's input at that position (EOS, then the reference shifted by one), so the
causal mask is the upper triangle above the diagonal.

Tokens are shown as the pieces of the model's vocabulary with the subword marks undone: a
SentencePiece piece that starts a word ("▁Ein") is shown without its mark ("Ein"), a piece that
continues a word with a leading "·" ("·gang"); subword-nmt's "Ein@@" is shown as "Ein·".
"""
import os
import textwrap
from typing import Dict, List, Sequence

import numpy as np

from . import style
from .data import FigureInputError, read_json

SPM_MARK = "\u2581"
JOIN_MARK = "\u00b7"
SPECIALS = {"</s>", "<s>", "<pad>", "<unk>"}
TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
          "decoder_cross": "decoder cross-attention"}
PIECES_OF = {"source": "source_pieces", "target": "target_pieces", "decoder_input": "decoder_input_pieces"}
SINGLE_HEAD_CELL_INCHES = 0.3  # a single head's figure: cells large enough for 10-point token labels
AXIS_NAMES = {"source": "source", "target": "predicted target token", "decoder_input": "decoder input"}


def display_pieces(pieces: Sequence[str]) -> List[str]:
    """Pieces with their subword marks undone (see the module docstring)."""
    spm = any(p.startswith(SPM_MARK) for p in pieces)
    out = []
    for p in pieces:
        if p in SPECIALS:
            out.append(p)
        elif spm:
            out.append(p[1:] if p.startswith(SPM_MARK) else JOIN_MARK + p)
        elif p.endswith("@@"):
            out.append(p[:-2] + JOIN_MARK)
        else:
            out.append(p)
    return out


def sentence_text(pieces: Sequence[str]) -> str:
    """The detokenised sentence (specials dropped)."""
    words = [p for p in pieces if p not in SPECIALS]
    if any(p.startswith(SPM_MARK) for p in words):
        return "".join(words).replace(SPM_MARK, " ").strip()
    return " ".join(words).replace("@@ ", "").replace("@@", "")


def load_sentence(path: str) -> Dict:
    entry = read_json(path, "posmix-attention --heatmaps output")
    need = {"sentence_id", "source_pieces", "target_pieces", "decoder_input_pieces", "sublayers"}
    if not isinstance(entry, dict) or not need <= set(entry):
        raise FigureInputError(f"{path}: expected an attention_maps/sentence<ID>.json of posmix-attention --heatmaps")
    return entry


def _title(entry: Dict, kind: str, width: int) -> str:
    src, tgt = sentence_text(entry["source_pieces"]), sentence_text(entry["target_pieces"])
    lines = [f"sentence {entry['sentence_id']}, {TITLES[kind]}"]
    lines += textwrap.wrap(f"source: {src}", width) + textwrap.wrap(f"reference: {tgt}", width)
    return "\n".join(lines)


def _axes_tokens(entry: Dict, sub: Dict):
    return display_pieces(entry[PIECES_OF[sub["queries"]]]), display_pieces(entry[PIECES_OF[sub["keys"]]])


def _title_width(layout: style.HeatmapLayout, panels: int) -> int:
    """Characters of the title's font per line over the panels' width."""
    return max(40, int((layout.width * panels + 1.0) * 13 / layout.scale))


def _longest(rows: List[str], cols: List[str]):
    return max(map(len, rows), default=0), max(map(len, cols), default=0)


def _label(axes, rows: List[str], cols: List[str], layout: style.HeatmapLayout):
    """Token labels on the axes (shared by all panels of a figure: the outer panels show them), as large
    as the cells allow and never overlapping (:class:`style.HeatmapLayout`)."""
    style.token_ticks(np.asarray(axes).ravel()[0], rows, cols, layout)


def draw_sentence(entry: Dict, kind: str, out_dir: str, formats=style.FORMATS):
    """The layers x heads grid of one sublayer of one sentence; returns the figure."""
    sub = entry["sublayers"][kind]
    layers = sub["layers"]
    present = [np.asarray(w, dtype=float) for w in layers if w is not None]
    if not present:
        raise FigureInputError(f"sentence {entry['sentence_id']}: the {kind} sublayer returned no weights in any layer")
    heads = present[0].shape[0]
    rows, cols = _axes_tokens(entry, sub)
    top = max(float(w.max()) for w in present)
    layout = style.HeatmapLayout.of(len(rows), len(cols))
    title = _title(entry, kind, _title_width(layout, heads))
    with style.styled(layout.scale):
        fig, axes = style.heatmap_panels(len(layers), heads, len(rows), len(cols), layout=layout,
                                         label_chars=_longest(rows, cols), title_lines=title.count("\n") + 1)
        image = None
        for li, w in enumerate(layers):
            for h in range(heads):
                ax = axes[li][h]
                if w is None:
                    ax.set_visible(False)
                    continue
                image = style.image(ax, np.asarray(w, dtype=float)[h], vmax=top)
                ax.set_title(f"layer {li + 1}, head {h + 1}")
            if w is None:
                axes[li][0].set_visible(True)
                axes[li][0].axis("off")
                axes[li][0].text(0, 0.5, f"layer {li + 1}: no weights (no such sublayer in this layer, e.g. SH-X's "
                                 "cross-attention, or one that returns none)",
                                 transform=axes[li][0].transAxes)
                axes[li][0].set_label("<no weights>")
        _label(axes, rows, cols, layout)
        for h in range(heads):
            axes[-1][h].set_xlabel(AXIS_NAMES[sub["keys"]])
        for li in range(len(layers)):
            axes[li][0].set_ylabel(AXIS_NAMES[sub["queries"]])
        style.colour_bar(fig, image, [ax for ax in axes.ravel() if ax.get_visible() and ax.images], "attention weight")
        fig.suptitle(title, fontsize=style.SUPTITLE_SIZE * layout.scale, ha="left", x=0.02)
        style.save(fig, os.path.join(out_dir, "attention_maps"), f"sentence{entry['sentence_id']}.{kind}", formats)
    return fig


def draw_single_heads(entry: Dict, kind: str, out_dir: str, formats=style.FORMATS) -> List[str]:
    """One figure per layer and head, each with its own colour bar."""
    sub = entry["sublayers"][kind]
    rows, cols = _axes_tokens(entry, sub)
    layout = style.HeatmapLayout.of(len(rows), len(cols), cell_inches=SINGLE_HEAD_CELL_INCHES, min_inches=3.0)
    paths = []
    for li, w in enumerate(sub["layers"]):
        if w is None:
            continue
        for h, head in enumerate(np.asarray(w, dtype=float)):
            title = _title(entry, kind, _title_width(layout, 1)) + f"\nlayer {li + 1}, head {h + 1}"
            with style.styled(layout.scale):
                fig, axes = style.heatmap_panels(1, 1, len(rows), len(cols), layout=layout,
                                                 label_chars=_longest(rows, cols), title_lines=title.count("\n") + 1)
                ax = axes[0][0]
                image = style.image(ax, head)
                _label(axes, rows, cols, layout)
                ax.set_xlabel(AXIS_NAMES[sub["keys"]])
                ax.set_ylabel(AXIS_NAMES[sub["queries"]])
                style.colour_bar(fig, image, [ax], "attention weight")
                fig.suptitle(title, fontsize=style.SUPTITLE_SIZE * layout.scale, ha="left", x=0.02)
                paths += style.save(fig, os.path.join(out_dir, "attention_maps"),
                                    f"sentence{entry['sentence_id']}.{kind}.L{li + 1}H{h + 1}", formats)
    return paths


def draw_sentence_files(in_dir: str, ids: Sequence[int], out_dir: str, single_heads: bool = False,
                        formats=style.FORMATS) -> List[str]:
    """Every sublayer figure of the sentences ``ids`` from ``in_dir/attention_maps/sentence<ID>.json``."""
    written = []
    for sid in ids:
        path = os.path.join(in_dir, "attention_maps", f"sentence{sid}.json")
        if not os.path.isfile(path):
            raise FigureInputError(f"sentence {sid}: no {path} (is {sid} a sentence id of the subset, and within "
                                   "--max-sentences?)")
        written += draw_files([path], out_dir, single_heads, formats)
    return written


def draw_files(paths: Sequence[str], out_dir: str, single_heads: bool = False, formats=style.FORMATS) -> List[str]:
    written = []
    for path in paths:
        entry = load_sentence(path)
        for kind in (k for k in TITLES if k in entry["sublayers"]):
            if not any(w is not None for w in entry["sublayers"][kind]["layers"]):
                continue
            draw_sentence(entry, kind, out_dir, formats)
            written += [os.path.join(out_dir, "attention_maps", f"sentence{entry['sentence_id']}.{kind}.{f}")
                        for f in formats]
            if single_heads:
                written += draw_single_heads(entry, kind, out_dir, formats)
    return written
