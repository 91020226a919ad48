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
import os
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


@contextlib.contextmanager
def styled():
    """The rc settings of every posmix figure, for the drawing done inside."""
    with matplotlib.rc_context(RC):
        yield


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def panels(nrows: int = 1, ncols: int = 1, panel: Tuple[float, float] = PANEL, **kwargs):
    """(figure, 2-D array of axes) of nrows x ncols panels of ``panel`` inches each."""
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def heatmap_panels(nrows: int, ncols: int, rows: int, cols: int, min_inches: float = 1.3,
                   inches_per_cell: float = 0.17):
    """Panels for images of rows x cols cells, big enough for one tick label per cell; the panels
    share their axes, so only the outer ones carry tick labels."""
    width = max(min_inches, inches_per_cell * cols)
    height = max(min_inches, inches_per_cell * rows)
    fig = Figure(figsize=(width * ncols + 1.0, height * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    return fig, axes


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


def note(fig, text: str):
    """A small grey line under the figure: where the numbers come from, or that the paper's are absent
    (the panels are laid out above it)."""
    height = fig.get_size_inches()[1]
    lines = 1 + len(text) // int(fig.get_size_inches()[0] * 17)
    margin = min(0.3, (0.14 * lines + 0.04) / height)
    fig.get_layout_engine().set(rect=(0, margin, 1, 1 - margin))
    fig.text(0.005, margin - 0.02 / height, text, ha="left", va="top", fontsize=6.5, color=NOTE_COLOUR, wrap=True)


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
