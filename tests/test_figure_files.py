"""How posmix-plot writes its files and lays out its figures: --dpi sets the PNG resolution (refused outside its
range), a failure while writing leaves nothing behind, HC Fig. 2's bar colours (the layers) have a legend, token
labels of attention maps never overlap (and thin out on long sentences), fonts grow with the canvas, single-head
figures have large cells, and legends never cover a panel."""
import os

import matplotlib.image
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from posmix_fairseq.harness.figures import attention_maps, gpa, hc, paper_numbers, plot, style


def small_figure():
    with style.styled():
        fig, axes = style.panels(1, 1, panel=(2.0, 1.5))
        axes[0][0].plot([0, 1], [0, 1])
    return fig


def test_dpi_sets_the_png_resolution(tmp_path):
    fig = small_figure()
    style.save(fig, str(tmp_path / "a"), "f", ["png"])
    with style.resolution(250):
        style.save(fig, str(tmp_path / "b"), "f", ["png"])
    low = matplotlib.image.imread(str(tmp_path / "a" / "f.png")).shape[:2]
    high = matplotlib.image.imread(str(tmp_path / "b" / "f.png")).shape[:2]
    assert low == (150, 200) and high == (375, 500)


def test_dpi_outside_its_range_is_refused(tmp_path):
    csv = tmp_path / "argmax_distance.csv"
    csv.write_text("sublayer,layer,head,mean_argmax_distance\nencoder_self,1,1,0.5\n")
    with pytest.raises(SystemExit, match=r"--dpi 20: must be 50\.\.600"):
        plot.main(["hc-fig2", str(csv), "--out", str(tmp_path / "out"), "--dpi", "20"])
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_a_failed_save_leaves_no_file(tmp_path, monkeypatch):
    fig = small_figure()
    real = fig.savefig

    def savefig(path, format, **kw):
        if format == "svg":
            raise OSError("disk full")
        return real(path, format=format, **kw)
    monkeypatch.setattr(fig, "savefig", savefig)
    with pytest.raises(OSError, match="disk full"):
        style.save(fig, str(tmp_path), "f", ["png", "svg"])
    assert os.listdir(tmp_path) == []  # neither f.png nor a temporary file


def test_hc_fig2_has_a_legend_for_the_layer_colours(tmp_path):
    rows = [{"sublayer": s, "layer": layer, "head": h, "mean_argmax_distance": 0.1 * h}
            for s in ("encoder_self", "decoder_self") for layer in (1, 2, 3) for h in (1, 2)]
    fig = hc.fig2(rows, str(tmp_path), ["png"])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["layer 1", "layer 2", "layer 3"]
    assert [tuple(p.get_facecolor()) for p in legend.get_patches()] == [
        tuple(matplotlib.colors.to_rgba(style.colour(i))) for i in range(3)]
    bars = fig.axes[0].patches
    assert tuple(bars[2].get_facecolor()) == tuple(matplotlib.colors.to_rgba(style.colour(1)))  # layer 2, head 1


def test_a_partial_grid_is_said_on_the_figure(tmp_path):
    from posmix_fairseq.harness.paper_tables import TABLES
    from posmix_fairseq.harness.figures import gpa

    labels = [s.label for s in TABLES["gpa-6"].systems]
    some = {labels[0]: 30.0, labels[1]: 31.0}
    note = gpa.fig2(some, str(tmp_path), ["png"], metric="BLEU").texts[-1].get_text()
    assert f"Partial grid: ours has 2 of the {len(labels)} systems of gpa-6 (missing: {labels[2]};" in note
    full = gpa.fig2({label: 30.0 for label in labels}, str(tmp_path), ["png"], metric="BLEU")
    assert "Partial grid" not in full.texts[-1].get_text()


def sentence_entry(n: int, heads: int = 4, layers: int = 2):
    """An attention_maps/sentence<ID>.json entry of n source and target pieces (long words among them)."""
    pieces = ["\u2581" + ("orangefarbenen" if i % 7 == 3 else f"w{i}") for i in range(n - 1)] + ["</s>"]
    weights = np.random.default_rng(n).dirichlet(np.ones(n), size=(heads, n))
    cross = {"queries": "target", "keys": "source", "layers": [weights.tolist()] * layers}
    return {"sentence_id": n, "source_pieces": pieces, "target_pieces": pieces,
            "decoder_input_pieces": ["</s>"] + pieces[:-1], "sublayers": {"decoder_cross": cross}}


def shown_labels(fig, ax, axis: str):
    """The visible tick labels of one axis after drawing, with their extents on the canvas."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [(t.get_text(), t.get_fontsize(), t.get_window_extent(renderer)) for t in labels
            if t.get_visible() and t.get_text()]


def assert_apart(labels, axis: str):
    """No two labels' extents overlap along the axis."""
    spans = sorted((b.x0, b.x1) if axis == "x" else (b.y0, b.y1) for _, _, b in labels)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, f"{axis} tick labels overlap: {end:.1f} > {start:.1f}"


def test_tick_labels_of_a_40_token_sentence_never_overlap_and_fonts_grow_with_the_figure(tmp_path):
    fig = attention_maps.draw_sentence(sentence_entry(40), "decoder_cross", str(tmp_path), formats=["png"])
    grid = np.asarray([ax for ax in fig.axes if ax.images]).reshape(2, 4)
    xs, ys = shown_labels(fig, grid[-1][0], "x"), shown_labels(fig, grid[0][0], "y")
    assert [t for t, _, _ in xs] == attention_maps.display_pieces(sentence_entry(40)["source_pieces"])  # every token
    assert len(ys) == 40 and min(size for _, size, _ in xs + ys) >= style.TOKEN_FONT[0]
    assert_apart(xs, "x")
    assert_apart(ys, "y")
    small = attention_maps.draw_sentence(sentence_entry(8), "decoder_cross", str(tmp_path), formats=["png"])
    assert fig.get_size_inches()[0] > 2 * small.get_size_inches()[0]
    assert fig._suptitle.get_fontsize() > small._suptitle.get_fontsize()  # fonts scale with the canvas
    assert grid[0][0].title.get_fontsize() > small.axes[0].title.get_fontsize()


def test_labels_of_a_very_long_sentence_thin_out_without_overlapping(tmp_path):
    entry = sentence_entry(150, heads=2, layers=1)
    fig = attention_maps.draw_sentence(entry, "decoder_cross", str(tmp_path), formats=["png"])
    ax = [ax for ax in fig.axes if ax.images][0]
    xs = shown_labels(fig, ax, "x")
    step = style.axis_labels(150, style.MAX_PANEL_INCHES).step
    assert step > 1 and [t for t, _, _ in xs] == attention_maps.display_pieces(entry["source_pieces"])[::step]
    assert list(ax.get_xticks()) == list(range(0, 150, step))  # each label stays at its own token's cell
    assert_apart(xs, "x")
    assert_apart(shown_labels(fig, ax, "y"), "y")
    assert fig.get_size_inches()[0] < 2 * style.MAX_PANEL_INCHES + 6  # the canvas stops growing


def test_single_head_figures_have_large_cells_and_labels(tmp_path):
    entry = sentence_entry(6, heads=1, layers=1)
    (png,) = attention_maps.draw_single_heads(entry, "decoder_cross", str(tmp_path), formats=["png"])
    assert png.endswith("sentence6.decoder_cross.L1H1.png")
    layout = style.HeatmapLayout.of(6, 6, attention_maps.SINGLE_HEAD_CELL_INCHES, 3.0)
    assert layout.x.fontsize == layout.y.fontsize == style.TOKEN_FONT[1] and layout.x.step == 1
    # the saved image: each cell at least SINGLE_HEAD_CELL_INCHES on the page (the panel keeps its size)
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width >= 6 * attention_maps.SINGLE_HEAD_CELL_INCHES * style.DPI
    long_entry = sentence_entry(30, heads=1, layers=1)
    attention_maps.draw_single_heads(long_entry, "decoder_cross", str(tmp_path), formats=["png"])
    layout = style.HeatmapLayout.of(30, 30, attention_maps.SINGLE_HEAD_CELL_INCHES, 3.0)
    assert layout.x.step == 1 and layout.x.fontsize >= 8


def legend_figures(out: str):
    """Every kind of legend of the papers' figures: one per panel (HC Figs. 3, 7), merged over panels
    (GPA Fig. 2: ours and the paper's markers), one for panels of the same systems (HC Fig. 8)."""
    yield hc.fig3({"BASE": {1: 20.0, 2: 26.0, 4: 28.0}, "BASE/-FF": {1: 12.0, 2: 20.0, 4: 26.0},
                   "HC-SA": {1: 19.0, 2: 25.0, 4: 27.5}, "HC-SA/-FF": {1: 9.0, 2: 18.0, 4: 24.0}}, out, ["png"])
    yield hc.fig7({"1 head, last layer": 20.0, "2 heads, last layer": 21.0, "2 heads, 1 per layer": 22.5}, out, ["png"])
    yield gpa.fig2({f"{a} gating {g}": 20.0 + i + (g == "on") for i, (a, _) in
                    enumerate(paper_numbers.GPA_FIG2_APPROACHES) for g in ("off", "on")}, out, ["png"], metric="BLEU")
    bins = [("0-0.2", 100), ("0.2-0.5", 90), (">0.5", 80)]
    scores = {s: {"BLEU": [20.0 + i, 21.0 - i, 22.0 + 2 * i]} for i, s in enumerate(["BASE", "HC-SA", "HC-ALL"])}
    yield hc.off_diagonality_panels([("encoder self-attention", bins, scores), ("decoder self-attention", bins, scores),
                                     ("decoder cross-attention", bins, scores)], out, "hc_fig8", "hc-fig8", ["png"])


def test_legends_are_outside_every_panel_and_name_every_line(tmp_path):
    for fig in legend_figures(str(tmp_path)):
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends, fig._suptitle
        panels = style.data_axes(fig)
        for made in legends:
            box = made.get_window_extent(renderer)
            for ax in panels:  # the legend covers no panel, so none of its lines' points
                assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
            assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1 - 1, box.y1 - 1)  # on the canvas
        named = {t.get_text() for made in legends for t in made.get_texts()}
        drawn = {line.get_label() for ax in panels for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert drawn <= named
