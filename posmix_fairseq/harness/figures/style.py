"""The one style of every posmix figure: fonts, colours, panel sizes, how "ours" and "paper" look,
and how a figure is written (PNG and SVG).

Figures are built on :class:`matplotlib.figure.Figure` directly (never pyplot), so drawing needs no
GUI backend, keeps no global figure state, and works in a process that imported pyplot with any
backend. The rc settings apply only inside :func:`styled`.

- Colours: the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies);
  one colour per system, the same in every panel of a figure.
- Ours: solid lines, filled markers. Paper: dashed lines, open markers, "(paper)" in the label,
  or a panel of its own whose title says "paper" when the scales differ (another data set, size).
- Weights (attention, softmax profiles): the sequential ``viridis`` map from 0. Energies and
  other signed values: the diverging ``RdBu_r`` map, symmetric around 0.
"""
import contextlib
import logging
import math
import os
from dataclasses import dataclass
from typing import Iterable, List, Sequence, Tuple

# importing fairseq sets the root logger to DEBUG (fairseq/models/wav2vec/wav2vec2_classification.py);
# matplotlib would then log every font lookup
logging.getLogger("matplotlib").setLevel(logging.WARNING)

import matplotlib  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
SEQUENTIAL = "viridis"
DIVERGING = "RdBu_r"
PANEL = (3.2, 2.5)          # inches per line-plot panel
FORMATS = ("png", "svg")
DPI = 100
OURS = dict(linestyle="-", marker="o", markersize=4, linewidth=1.4)
PAPER = dict(linestyle="--", marker="s", markersize=5, linewidth=1.0, markerfacecolor="white")
NOTE_COLOUR = "0.35"

RC = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.color": "0.88", "grid.linewidth": 0.6, "axes.axisbelow": True,
    "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO), "svg.fonttype": "none", "image.cmap": SEQUENTIAL,
    "figure.dpi": DPI, "savefig.dpi": DPI,  # constrained layout fits the panels (no second, "tight" pass)
    "svg.hashsalt": "posmix",  # reproducible SVG ids
}


FONT_KEYS = ("font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize", "ytick.labelsize", "legend.fontsize")
SUPTITLE_SIZE = 8           # points, at scale 1
NOTE_SIZE = 6.5


@contextlib.contextmanager
def styled(scale: float = 1.0):
    """The rc settings of every posmix figure, for the drawing done inside; ``scale`` multiplies every
    font size (a larger canvas gets larger fonts, :class:`HeatmapLayout`)."""
    rc = dict(RC, **{k: RC[k] * scale for k in FONT_KEYS})
    with matplotlib.rc_context(rc):
        yield


def font_scale() -> float:
    """The scale of the active :func:`styled` context."""
    return float(matplotlib.rcParams["font.size"]) / RC["font.size"]


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def panels(nrows: int = 1, ncols: int = 1, panel: Tuple[float, float] = PANEL, **kwargs):
    """(figure, 2-D array of axes) of nrows x ncols panels of ``panel`` inches each."""
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


CELL_INCHES = 0.17          # a cell of a layers x heads grid of token maps
MAX_PANEL_INCHES = 7.0      # beyond it a panel stops growing and its token labels thin out
TOKEN_FONT = (6.0, 10.0)    # points: the smallest and largest token label
LABEL_PITCH = 1.4           # a token label needs this many times its font size along its axis
REFERENCE_PANEL = 2.5       # inches: the panel side at which fonts have their rc sizes


@dataclass(frozen=True)
class AxisLabels:
    """The token labels of one axis of a heatmap: their font size (points) and every ``step``-th cell
    labelled, so that neighbouring labels never overlap."""
    fontsize: float
    step: int


def axis_labels(cells: int, inches: float) -> AxisLabels:
    """The largest label font within :data:`TOKEN_FONT` that ``cells`` labels fit along ``inches``; when
    even the smallest does not fit one per cell, every ``step``-th cell is labelled."""
    pitch = inches * 72.0 / max(cells, 1)  # points per cell
    size = min(TOKEN_FONT[1], max(TOKEN_FONT[0], pitch / LABEL_PITCH))
    return AxisLabels(size, max(1, math.ceil(size * LABEL_PITCH / pitch - 1e-9)))


@dataclass(frozen=True)
class HeatmapLayout:
    """The panel size of images of rows x cols cells, the font scale of the figure and the token labels
    of its axes: panels grow with the cells (``cell_inches`` each, at least ``min_inches``, at most
    :data:`MAX_PANEL_INCHES`), fonts grow with the panels (up to twice their rc size), and labels are as
    large as the cells allow, thinned out where the smallest does not fit."""
    width: float
    height: float
    scale: float
    x: AxisLabels
    y: AxisLabels

    @classmethod
    def of(cls, rows: int, cols: int, cell_inches: float = CELL_INCHES, min_inches: float = 1.3):
        width = min(MAX_PANEL_INCHES, max(min_inches, cell_inches * cols))
        height = min(MAX_PANEL_INCHES, max(min_inches, cell_inches * rows))
        scale = min(2.0, max(1.0, max(width, height) / REFERENCE_PANEL))
        return cls(width, height, scale, axis_labels(cols, width), axis_labels(rows, height))


def heatmap_panels(nrows: int, ncols: int, rows: int, cols: int, min_inches: float = 1.3,
                   inches_per_cell: float = 0.17, layout: HeatmapLayout = None, label_chars: Tuple[int, int] = (0, 0),
                   title_lines: int = 1):
    """Panels for images of rows x cols cells (``layout``, or one of ``inches_per_cell``); the panels
    share their axes, so only the outer ones carry tick labels. The margins hold the axis labels, the
    colour bar, a title of ``title_lines`` lines and tick labels of up to ``label_chars`` (rows, cols)
    characters at the layout's fonts, so that the panels keep their size."""
    layout = layout or HeatmapLayout.of(rows, cols, inches_per_cell, min_inches)
    row_labels = label_chars[0] * layout.y.fontsize * 0.62 / 72
    col_labels = label_chars[1] * layout.x.fontsize * 0.62 / 72
    title = title_lines * SUPTITLE_SIZE * layout.scale * 1.3 / 72
    panel_titles = nrows * RC["axes.titlesize"] * layout.scale * 1.6 / 72
    fig = Figure(figsize=(layout.width * ncols + 1.0 * layout.scale + row_labels,
                          layout.height * nrows + 0.6 * layout.scale + col_labels + title + panel_titles),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    return fig, axes


def token_ticks(ax, rows: Sequence[str], cols: Sequence[str], layout: HeatmapLayout):
    """One tick label per cell (or every ``step``-th, :class:`AxisLabels`) on both axes; x labels vertical."""
    xs, ys = range(0, len(cols), layout.x.step), range(0, len(rows), layout.y.step)
    ax.set_xticks(list(xs), [cols[i] for i in xs], rotation=90, fontsize=layout.x.fontsize)
    ax.set_yticks(list(ys), [rows[i] for i in ys], fontsize=layout.y.fontsize)
    for a in ax.get_shared_x_axes().get_siblings(ax) + [ax]:
        a.tick_params(axis="both", length=0)
        a.tick_params(axis="x", labelrotation=90, labelsize=layout.x.fontsize)
        a.tick_params(axis="y", labelsize=layout.y.fontsize)
        a.grid(False)


def image(ax, values, signed: bool = False, vmax: float = None, vmin: float = None, **kwargs):
    """imshow with the house colour maps: weights from 0 (``viridis``), signed values symmetric
    around 0 (``RdBu_r``). Missing cells (NaN or masked) stay blank."""
    values = np.ma.masked_invalid(np.asarray(values, dtype=float)) if not np.ma.isMaskedArray(values) else values
    if signed:
        bound = vmax if vmax is not None else float(np.ma.max(np.abs(values))) if values.count() else 1.0
        bound = bound or 1.0
        kwargs.update(cmap=DIVERGING, vmin=-bound, vmax=bound)
    else:
        top = vmax if vmax is not None else (float(values.max()) if values.count() else 1.0)
        kwargs.update(cmap=SEQUENTIAL, vmin=0.0 if vmin is None else vmin, vmax=top or 1.0)
    return ax.imshow(values, aspect="auto", interpolation="nearest", **kwargs)


def colour_bar(fig, mappable, axes, label: str):
    bar = fig.colorbar(mappable, ax=np.asarray(axes).ravel().tolist(), shrink=0.8, aspect=30)
    bar.set_label(label)
    return bar


def plot_ours(ax, x, y, label: str, i: int, **kwargs):
    return ax.plot(list(x), list(y), color=colour(i), label=label, **{**OURS, **kwargs})[0]


def plot_paper(ax, x, y, label: str, i: int, **kwargs):
    return ax.plot(list(x), list(y), color=colour(i), label=f"{label} (paper)", **{**PAPER, **kwargs})[0]


def legend(axes, figure_wide: bool = False):
    """The legend of the lines of ``axes`` (one Axes, or several whose labels are merged), outside the
    plotting area so that it never covers data: right of the axes, or with ``figure_wide`` (the same
    systems in every panel) right of all panels. The figure widens by the legend's width, so the panels
    keep their size. Returns the legend, or None when no line has a label."""
    many = list(np.asarray(axes, dtype=object).ravel()) if isinstance(axes, (list, tuple, np.ndarray)) else [axes]
    handles, labels = [], []
    for ax in many:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if not handles:
        return None
    fig = many[0].figure
    if figure_wide or len(many) > 1:
        made = fig.legend(handles, labels, loc="outside right upper")
    else:
        made = many[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    size = float(matplotlib.rcParams["legend.fontsize"])
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + (max(map(len, labels)) * 0.6 + 4.0) * size / 72, height)
    return made


def note(fig, text: str):
    """A small grey line under the figure: where the numbers come from, or that the paper's are absent
    (the panels are laid out above it)."""
    height = fig.get_size_inches()[1]
    scale = font_scale()
    lines = 1 + len(text) // max(1, int(fig.get_size_inches()[0] * 17 / scale))
    margin = min(0.3, (0.14 * scale * lines + 0.04) / height)
    fig.get_layout_engine().set(rect=(0, margin, 1, 1 - margin))
    fig.text(0.005, margin - 0.02 / height, text, ha="left", va="top", fontsize=NOTE_SIZE * font_scale(),
             color=NOTE_COLOUR, wrap=True)


def hide_unused(axes: Iterable, used: int):
    for ax in list(np.asarray(axes).ravel())[used:]:
        ax.set_visible(False)


def data_axes(fig) -> List:
    """The panels of a figure: not its colour bars (label '<colorbar>'), notes in place of a panel
    ('<no weights>') or hidden spare panels."""
    return [ax for ax in fig.axes if ax.get_visible() and not ax.get_label().startswith("<")]


#: Resolution of the PNGs written while :func:`resolution` is active (``posmix-plot --dpi``).
_OUTPUT_DPI = [DPI]
DPI_RANGE = (50, 600)


@contextlib.contextmanager
def resolution(dpi: int):
    """PNGs written inside have ``dpi`` dots per inch (fonts and lines scale with it: sizes are in points)."""
    if not DPI_RANGE[0] <= dpi <= DPI_RANGE[1]:
        raise ValueError(f"--dpi {dpi}: must be {DPI_RANGE[0]}..{DPI_RANGE[1]}")
    _OUTPUT_DPI.append(dpi)
    try:
        yield
    finally:
        _OUTPUT_DPI.pop()


def save(fig, out_dir: str, name: str, formats: Sequence[str] = FORMATS, dpi: int = None) -> List[str]:
    """Write ``out_dir/name.<format>`` for each format; returns the paths. All or nothing: each file is
    written under a temporary name and renamed only when every format has been drawn, so a failure
    leaves no partial or stale-looking file behind."""
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad or not formats:
        raise ValueError(f"--formats: {','.join(bad) or '(empty)'} not supported; valid: png, svg, pdf")
    os.makedirs(out_dir, exist_ok=True)
    paths, written = [], []
    try:
        for fmt in formats:
            path = os.path.join(out_dir, f"{name}.{fmt}")
            tmp = os.path.join(out_dir, f".{name}.{os.getpid()}.partial.{fmt}")
            written.append(tmp)
            fig.savefig(tmp, format=fmt, dpi=dpi or _OUTPUT_DPI[-1], metadata={"Date": None} if fmt == "svg" else None)
            paths.append(path)
    except BaseException:
        for tmp in written:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise
    for tmp, path in zip(written, paths):
        os.replace(tmp, path)
    return paths
