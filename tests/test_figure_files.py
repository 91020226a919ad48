"""How posmix-plot writes its files: --dpi sets the PNG resolution (refused outside its range), a failure
while writing leaves nothing behind, and HC Fig. 2's bar colours (the layers) have a legend."""
import os

import matplotlib.image
import pytest

from posmix_fairseq.harness.figures import hc, plot, style


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
    from posmix_fairseq.harness.evaluation.paper_tables import TABLES
    from posmix_fairseq.harness.figures import gpa

    labels = [s.label for s in TABLES["gpa-6"].systems]
    some = {labels[0]: 30.0, labels[1]: 31.0}
    note = gpa.fig2(some, str(tmp_path), ["png"], metric="BLEU").texts[-1].get_text()
    assert f"Partial grid: ours has 2 of the {len(labels)} systems of gpa-6 (missing: {labels[2]};" in note
    full = gpa.fig2({label: 30.0 for label in labels}, str(tmp_path), ["png"], metric="BLEU")
    assert "Partial grid" not in full.texts[-1].get_text()
