"""posmix-plot: every figure, drawn from the analysis outputs of one tiny HC-SA model (conftest
``tiny_hc_sa``; its checkpoints at updates 4 and 8 are two "systems") and from tiny models built here
for the learned-position pictures. Each test checks that the PNG and SVG exist, that the figure has
the expected number of panels, and that the plotted values (read back from the matplotlib artists)
equal the analysis output's, or the model's own attention weights in a forward pass."""
import json
import math
import os

import numpy as np
import pytest
import torch
from helpers import build_model_from_args, paper_text, parse_model_args, random_batch
from test_cli_end_to_end import run_generate
from test_evaluation_reproduce import _value_in

from posmix_fairseq.harness import freeze
from posmix_fairseq.harness.evaluation import attention, contrastive, forward_time, length_bins, ngram_orders, score
from posmix_fairseq.harness.evaluation.attention import AttentionRecorder
from posmix_fairseq.harness.fairseq_loading import load_for_inference
from posmix_fairseq.harness.paper_tables import TABLES
from posmix_fairseq.harness.figures import attention_maps, learned_positions, paper_numbers, plot, style
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINGEVAL97_EXAMPLE = os.path.join(ROOT, "tests", "data", "lingeval97_tiny.json")


def panels(fig):
    return style.data_axes(fig)


def lines_of(ax):
    """{legend label: (x, y)} of an axes' lines."""
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()
            if not ln.get_label().startswith("_")}


def assert_written(out_dir, name):
    for fmt in ("png", "svg"):
        path = os.path.join(out_dir, f"{name}.{fmt}")
        assert os.path.getsize(path) > 1000, path
    assert open(os.path.join(out_dir, f"{name}.png"), "rb").read(4) == b"\x89PNG"
    assert "<svg" in open(os.path.join(out_dir, f"{name}.svg"), encoding="utf-8").read(2000)


@pytest.fixture(scope="module")
def outputs(tiny_hc_sa, tmp_path_factory):
    """The analysis commands on the tiny model: posmix-attention (sentence 0 drawn), fairseq-generate of its
    last checkpoint ('last') and the same hypotheses with their words reversed ('reversed', a second system
    without a second decoding run), posmix-score, posmix-length-bins by reference length and by
    off-diagonality, posmix-ngram-orders, and posmix-contrastive of the checkpoints at updates 4 and 8."""
    data, ckpt_dir = tiny_hc_sa
    out = tmp_path_factory.mktemp("analyses")
    ckpts = {"early": next(os.path.join(ckpt_dir, f) for f in sorted(os.listdir(ckpt_dir)) if f.endswith("_4.pt")),
             "last": os.path.join(ckpt_dir, "checkpoint_last.pt")}
    attn = str(out / "attn")
    raw = os.path.join(os.path.dirname(data), "raw")  # the shortest test pair draws fastest
    lengths = [len(a.split()) + len(b.split()) for a, b in zip(open(os.path.join(raw, "test.src")),
                                                               open(os.path.join(raw, "test.tgt")))]
    sid = lengths.index(min(lengths))
    attention.main([data, "--path", ckpts["last"], "--out", attn, "--heatmaps", str(sid)])
    result = {"data": data, "ckpts": ckpts, "attn": attn, "dir": str(out), "sentence": sid}
    stdout, _ = run_generate(data, ckpts["last"])
    reversed_ = []
    for line in stdout.splitlines():
        if line.startswith("H-"):
            head, lp, hyp = line.split("\t")
            line = "\t".join([head, lp, " ".join(reversed(hyp.split()))])
        reversed_.append(line)
    for name, text in (("last", stdout), ("reversed", "\n".join(reversed_) + "\n")):
        gen = out / f"gen.{name}.txt"
        gen.write_text(text)
        result[f"gen.{name}"] = str(gen)
        score.main([str(gen), "--names", name, "--metrics", "bleu,chrf++", "--paired-bs-n", "0",
                    "--json", str(out / f"scores.{name}.json")])
        result[f"scores.{name}"] = str(out / f"scores.{name}.json")
    for name, ckpt in ckpts.items():
        contrastive.main([data, "--path", ckpt, "--set", LINGEVAL97_EXAMPLE,
                          "--json", str(out / f"contrastive.{name}.json")])
        result[f"contrastive.{name}"] = str(out / f"contrastive.{name}.json")
    both = [result["gen.last"], "--baseline", result["gen.reversed"], "--names", "last", "reversed"]
    length_bins.main(both + ["--by", "ref", "--bins", "quantiles:3", "--metrics", "bleu,chrf++",
                             "--json", str(out / "bins.ref.json")])
    for kind in ("encoder_self", "decoder_cross"):
        length_bins.main(both + ["--key-file", os.path.join(attn, f"offdiag.{kind}.txt"), "--bins", "0.2,0.5",
                                 "--metrics", "bleu", "--json", str(out / f"bins.{kind}.json")])
    ngram_orders.main(both + ["--char-orders", "1-8", "--word-orders", "1-3", "--bleu-orders", "1-4",
                              "--json", str(out / "ngram.json")])
    return result


# ---- attention that a person can read -----------------------------------------------------------------
def test_attention_maps_one_figure_per_sentence_and_sublayer(outputs, tmp_path):
    sid = outputs["sentence"]
    path = os.path.join(outputs["attn"], "attention_maps", f"sentence{sid}.json")
    entry = json.load(open(path))
    _, task, _ = load_for_inference(outputs["data"], outputs["ckpts"]["last"])
    sample = task.dataset("test")[sid]  # the pieces of the sentence, read independently
    assert entry["source_pieces"] == [task.source_dictionary[int(t)] for t in sample["source"]]
    assert entry["target_pieces"] == [task.target_dictionary[int(t)] for t in sample["target"]]
    assert entry["decoder_input_pieces"] == ["</s>"] + entry["target_pieces"][:-1]
    assert set(entry["sublayers"]) == {"encoder_self", "decoder_self", "decoder_cross"}
    names = {"source": "source_pieces", "target": "target_pieces", "decoder_input": "decoder_input_pieces"}
    for kind, sub in entry["sublayers"].items():
        assert_written(os.path.join(outputs["attn"], "attention_maps"), f"sentence{sid}.{kind}")  # by posmix-attention
        fig = attention_maps.draw_sentence(entry, kind, str(tmp_path), formats=("png",))
        axes = panels(fig)
        assert len(axes) == 2 * 4  # layers x heads
        assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1  # one colour scale
        for i, ax in enumerate(axes):
            layer, head = divmod(i, 4)
            np.testing.assert_allclose(ax.images[0].get_array(), np.asarray(sub["layers"][layer])[head])
            assert ax.images[0].norm.vmin == 0.0
        rows = attention_maps.display_pieces(entry[names[sub["queries"]]])
        cols = attention_maps.display_pieces(entry[names[sub["keys"]]])
        assert [t.get_text() for t in axes[4].get_yticklabels()] == rows  # left column: the queries
        assert [t.get_text() for t in axes[4].get_xticklabels()] == cols  # bottom row: the keys
        assert attention_maps.sentence_text(entry["source_pieces"]) in " ".join(fig._suptitle.get_text().split())
    singles = attention_maps.draw_single_heads(entry, "decoder_cross", str(tmp_path), formats=("png",))
    assert len(singles) == 2 * 4  # --single-heads: one per layer and head
    written = plot.main(["attention", path, "--out", str(tmp_path / "cli"), "--formats", "png"])
    assert len(written) == 3  # posmix-plot attention: one figure per sublayer


def test_attention_maps_of_a_layer_without_the_sublayer(outputs, tmp_path):
    """SH-X has cross-attention in the last decoder layer only: the other layers are a note, not panels."""
    entry = json.load(open(os.path.join(outputs["attn"], "attention_maps", f"sentence{outputs['sentence']}.json")))
    entry["sublayers"]["decoder_cross"]["layers"][0] = None
    fig = attention_maps.draw_sentence(entry, "decoder_cross", str(tmp_path), formats=("png",))
    assert len(panels(fig)) == 4  # layer 2's heads
    assert any(ax.get_label() == "<no weights>" for ax in fig.axes)
    entry["sublayers"]["decoder_cross"]["layers"][1] = None
    with pytest.raises(ValueError, match="the decoder_cross sublayer returned no weights in any layer"):
        attention_maps.draw_sentence(entry, "decoder_cross", str(tmp_path))


def test_subword_marks_are_undone_for_display():
    assert attention_maps.display_pieces(["\u2581Ein", "gang", "\u2581.", "</s>"]) == ["Ein", "\u00b7gang", ".", "</s>"]
    assert attention_maps.display_pieces(["Ein@@", "gang", "."]) == ["Ein\u00b7", "gang", "."]
    assert attention_maps.sentence_text(["\u2581Ein", "gang", "\u2581ist", "</s>"]) == "Eingang ist"
    assert attention_maps.sentence_text(["Ein@@", "gang", "ist", "</s>"]) == "Eingang ist"


# ---- the papers' figures --------------------------------------------------------------------------------
def test_hc_fig2_argmax_distance_of_every_head(outputs, tmp_path):
    import csv

    fig = plot.main(["hc-fig2", os.path.join(outputs["attn"], "argmax_distance.csv"), "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig2")
    rows = list(csv.DictReader(open(os.path.join(outputs["attn"], "argmax_distance.csv"))))
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["encoder self-attention", "decoder self-attention",
                                               "decoder cross-attention"]
    for ax, kind in zip(axes, ("encoder_self", "decoder_self", "decoder_cross")):
        mine = [float(r["mean_argmax_distance"]) for r in rows if r["sublayer"] == kind]
        assert [p.get_height() for p in ax.patches] == pytest.approx(mine)
        assert len(mine) == 2 * 4


def test_score_based_figures_hc_fig3_hc_fig7_gpa_fig2_posnet_fig3(outputs, tmp_path):
    other, last = outputs["scores.reversed"], outputs["scores.last"]
    bleu = {n: next(r["score"] for r in json.load(open(outputs[f"scores.{n}"]))["rows"] if r["metric"] == "BLEU")
            for n in ("reversed", "last")}
    fig = plot.main(["hc-fig3", "--score", f"BASE:1={other}", "--score", f"BASE/-FF:1={last}", "--score",
                     f"BASE:2={last}", "--score", f"BASE/-FF:2={other}", "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig3")
    a, b = panels(fig)
    assert lines_of(a)["BASE"] == ([1, 2], pytest.approx([bleu["reversed"], bleu["last"]]))
    gaps = lines_of(b)
    assert gaps["BASE - BASE/-FF"][1] == pytest.approx([bleu["reversed"] - bleu["last"],
                                                        bleu["last"] - bleu["reversed"]])
    assert gaps["BASE - BASE/-FF (paper)"] == ([4], [1.8])  # the caption's gap at 4 layers

    fig = plot.main(["hc-fig7", "--score", f"1 head, last layer={other}", "--score", f"2 heads, last layer={last}",
                     "--score", f"2 heads, 1 per layer={other}", "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig7")
    got = lines_of(panels(fig)[0])
    assert got["all in the last decoder layer"] == ([1, 2], pytest.approx([bleu["reversed"], bleu["last"]]))
    assert got["one per layer (the last N layers)"] == ([1, 2], pytest.approx([bleu["reversed"], bleu["reversed"]]))

    fig = plot.main(["gpa-fig2", "--score", f"rPosNet gating on={last}", "--score", f"rPosNet gating off={other}",
                     "--metric", "BLEU", "--out", str(tmp_path)])
    assert_written(str(tmp_path), "gpa_fig2")
    ours, paper = panels(fig)
    assert lines_of(ours)["gating off"] == ([pytest.approx(0.92)], pytest.approx([bleu["reversed"]]))  # rPosNet: 2nd
    assert lines_of(ours)["gating on"] == ([pytest.approx(1.08)], pytest.approx([bleu["last"]]))
    table6 = TABLES["gpa-6"].reported
    for gating in ("off", "on"):
        assert lines_of(paper)[f"gating {gating} (paper)"][1] == [
            table6[f"{a} gating {gating}"]["En-De BLEU"] for a, _ in paper_numbers.GPA_FIG2_APPROACHES]

    fig = plot.main(["posnet-fig3", "--score", f"16={other}", "--score", f"64={last}", "--out", str(tmp_path)])
    assert_written(str(tmp_path), "posnet_fig3")
    assert lines_of(panels(fig)[0])["PosNet-Embed"] == ([16, 64], pytest.approx([bleu["reversed"], bleu["last"]]))


def test_length_bin_figures_hc_fig4_fig6_fig8(outputs, tmp_path):
    bins = json.load(open(os.path.join(outputs["dir"], "bins.ref.json")))["bins"]
    fig = plot.main(["hc-fig4", os.path.join(outputs["dir"], "bins.ref.json"), "--baseline", "reversed",
                     "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig4")
    a, b = panels(fig)
    assert lines_of(a)["last"][1] == pytest.approx([r["last/BLEU"] for r in bins])
    assert lines_of(b)["last - reversed"][1] == pytest.approx([r["last/BLEU"] - r["reversed/BLEU"] for r in bins])
    assert len(bins) == 3
    fig = plot.main(["hc-fig6", os.path.join(outputs["dir"], "bins.decoder_cross.json"), "--title", "cross",
                     "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig6")
    cross = json.load(open(os.path.join(outputs["dir"], "bins.decoder_cross.json")))["bins"]
    assert lines_of(panels(fig)[0])["reversed"][1] == pytest.approx([r["reversed/BLEU"] for r in cross])
    fig = plot.main(["hc-fig8", "--panel", f"encoder self={os.path.join(outputs['dir'], 'bins.encoder_self.json')}",
                     "--panel", f"cross={os.path.join(outputs['dir'], 'bins.decoder_cross.json')}",
                     "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig8")
    assert [ax.get_title() for ax in panels(fig)] == ["encoder self", "cross"]
    enc = json.load(open(os.path.join(outputs["dir"], "bins.encoder_self.json")))["bins"]
    assert lines_of(panels(fig)[0])["last"][1] == pytest.approx([r["last/BLEU"] for r in enc])
    with pytest.raises(SystemExit, match=r"--baseline 'BASE': .* has the systems last, reversed"):
        plot.main(["hc-fig4", os.path.join(outputs["dir"], "bins.ref.json"), "--baseline", "BASE",
                   "--out", str(tmp_path)])


def test_hc_fig5_agreement_accuracy_by_distance(outputs, tmp_path):
    fig = plot.main(["hc-fig5", "--system", f"early={outputs['contrastive.early']}", "--system",
                     f"last={outputs['contrastive.last']}", "--out", str(tmp_path)])
    assert_written(str(tmp_path), "hc_fig5")
    for name in ("early", "last"):
        by_distance = json.load(open(outputs[f"contrastive.{name}"]))["by_distance"]["subj_verb_agreement"]
        assert list(by_distance) == ["1", "7"]
        assert lines_of(panels(fig)[0])[name] == (
            [0, 1], pytest.approx([100.0 * v["correct"] / v["total"] for v in by_distance.values()]))
    with pytest.raises(SystemExit, match="no accuracy by distance for 'agreement'.*subj_verb_agreement"):
        plot.main(["hc-fig5", "--system", f"x={outputs['contrastive.last']}", "--category", "agreement",
                   "--out", str(tmp_path)])


def test_posnet_fig4_gaps_by_ngram_order_equal_sacrebleu(outputs, tmp_path):
    import sacrebleu

    result = json.load(open(os.path.join(outputs["dir"], "ngram.json")))
    fig = plot.main(["posnet-fig4", os.path.join(outputs["dir"], "ngram.json"), "--out", str(tmp_path)])
    assert_written(str(tmp_path), "posnet_fig4")
    axes = panels(fig)
    assert len(axes) == 3
    for ax, key in zip(axes, ("chrf_char_orders", "chrf_word_orders", "bleu_orders")):
        block = result[key]
        gap = np.subtract(block["scores"]["last"], block["scores"]["reversed"])
        assert lines_of(ax)["last"] == (block["orders"], pytest.approx(gap.tolist()))
    # each order's score is sacreBLEU's own at that order
    from posmix_fairseq.harness.evaluation.generate_output import read_generate_output

    gen = read_generate_output(outputs["gen.last"])
    hyps, refs = gen.hypotheses, gen.references
    chrf = result["chrf_char_orders"]["scores"]["last"]
    for k, n in enumerate(result["chrf_char_orders"]["orders"]):
        assert chrf[k] == pytest.approx(sacrebleu.CHRF(char_order=n, word_order=2).corpus_score(hyps, [refs]).score)
    for k, n in enumerate(result["chrf_word_orders"]["orders"]):
        assert result["chrf_word_orders"]["scores"]["last"][k] == pytest.approx(
            sacrebleu.CHRF(char_order=6, word_order=n).corpus_score(hyps, [refs]).score)
    assert result["chrf_char_orders"]["scores"]["last"][5] == pytest.approx(
        sacrebleu.CHRF(word_order=2).corpus_score(hyps, [refs]).score)  # n = 6: chrF++
    for k, n in enumerate(result["bleu_orders"]["orders"]):
        assert result["bleu_orders"]["scores"]["last"][k] == pytest.approx(
            sacrebleu.BLEU(max_ngram_order=n).corpus_score(hyps, [refs]).score)


def test_posnet_fig2_forward_time_of_each_method(tmp_path):
    tiny = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
            "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
            "--decoder-attention-heads 2")
    out = tmp_path / "forward.json"
    result = forward_time.main(["--table", "posnet-1", "--size", "small", "--model-flags", tiny, "--repeats", "2",
                                "--batch-size", "2", "--length", "6", "--vocab", "40", "--json", str(out)])
    assert [s["label"] for s in result["systems"]] == [s.label for s in TABLES["posnet-1"].systems]
    assert all(len(s["seconds"]) == 2 and s["total_seconds"] == pytest.approx(sum(s["seconds"]))
               for s in result["systems"])
    fig = plot.main(["posnet-fig2", str(out), "--out", str(tmp_path)])
    assert_written(str(tmp_path), "posnet_fig2")
    ax = panels(fig)[0]
    assert [p.get_height() for p in ax.patches] == pytest.approx([s["total_seconds"] for s in result["systems"]])
    assert [t.get_text() for t in ax.get_xticklabels()] == [s["label"] for s in result["systems"]]


def test_bad_inputs_are_clear_errors(outputs, tmp_path, capsys):
    with pytest.raises(SystemExit, match=r"no COMET score \(it has BLEU, chrF2\+\+\); pass --metric"):
        plot.main(["gpa-fig2", "--score", f"rPosNet gating on={outputs['scores.last']}", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="not a system of gpa-6; its systems are: Transformer gating off"):
        plot.main(["gpa-fig2", "--score", f"rposnet={outputs['scores.last']}", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"--score 'BASE': expected SYSTEM:LAYERS=PATH"):
        plot.main(["hc-fig3", "--score", f"BASE={outputs['scores.last']}", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="missing.json: no such file"):
        plot.main(["posnet-fig4", str(tmp_path / "missing.json"), "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as usage:  # argparse's usage error, before anything is read
        plot.main(["hc-fig2", os.path.join(outputs["attn"], "argmax_distance.csv"), "--out", str(tmp_path),
                   "--formats", "gif"])
    assert usage.value.code == 2 and "argument --formats: 'gif': gif not supported" in capsys.readouterr().err


def test_paper_numbers_drawn_beside_ours_are_in_the_paper_texts():
    hc = paper_text(paper_numbers.HC)
    assert all(_value_in(hc, v) for v in paper_numbers.HC_FIG3_FF_GAP.values())
    assert "with a four layer encoder and decoder" in hc and paper_numbers.HC_FIG3_LAYERS == 4
    gpa = paper_text(paper_numbers.GPA)
    comet = paper_numbers.gpa_fig2("COMET")
    assert len(comet) == 10 and all(_value_in(gpa, v) for v in comet.values())
    # the gains Section 7.1 states: 3.5 (aPosNet, rPosNet), 2.6 (relative), 2 (Transformer), 0.9 (Shaw)
    gains = [round(comet[(a, "on")] - comet[(a, "off")], 1) for a, _ in paper_numbers.GPA_FIG2_APPROACHES]
    assert gains == [3.5, 3.5, 2.6, 2.0, 0.9]
    assert paper_numbers.gpa_fig2("chrF") == {}


# ---- what a position-based model learned ----------------------------------------------------------------
def attention_of(model, length):
    """{(kind, layer): (H, P, P)} weights of the model's own forward on a P-token sentence pair."""
    d = model.encoder.dictionary
    src, src_len = random_batch(d, [length])
    prev, _ = random_batch(d, [length], seed=1)
    prev = torch.cat([prev[:, -1:], prev[:, :-1]], dim=1)  # EOS first, as fairseq's decoder input
    rec = AttentionRecorder(model)
    try:
        with torch.no_grad():
            model(src, src_len, prev)
    finally:
        rec.remove()
    return {k: w[:, 0] for k, w in rec.weights.items() if w is not None}


HEADS = 2  # built models: 2 layers x 2 heads (fewer panels to render)


def build(flags):
    args = parse_model_args(flags + ["--encoder-attention-heads", str(HEADS), "--decoder-attention-heads", str(HEADS)])
    model, d = build_model_from_args(args)
    return model.eval(), args, d


P = 10


def test_rposnet_pictures_equal_the_models_attention_trained_and_frozen(tmp_path):
    model, args, d = build(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet",
                            "--length-ratio", "1.3"])
    data = learned_positions.extract(model, P, [0, 4, 9])
    figs = learned_positions.draw(data, str(tmp_path))
    seen = attention_of(model, P)
    for kind in ("encoder_self", "decoder_self", "decoder_cross"):
        assert_written(str(tmp_path), f"rposnet_energy.{kind}")
        energy_axes = panels(figs[f"rposnet_energy.{kind}"])
        profile_axes = panels(figs[f"rposnet_profile.{kind}"])
        assert len(energy_axes) == len(profile_axes) == 2 * HEADS
        gamma = 1.3 if kind == "decoder_cross" else 1.0
        k = data["rposnet"][kind]["k"]
        for i, (ea, pa) in enumerate(zip(energy_axes, profile_axes)):
            layer, head = divmod(i, HEADS)
            image = ea.images[0].get_array()
            block = getattr(model, "encoder" if kind == "encoder_self" else "decoder").layers[layer]
            energy = (block.encoder_attn if kind == "decoder_cross" else block.self_attn).energy
            np.testing.assert_allclose(image.data, energy.energy_table(P)[head].detach().numpy(), rtol=1e-6)
            assert image.mask[:, :k].all() == (kind == "decoder_self")  # later keys: blank in the decoder
            # the softmax over the picture's row, read at clip(floor(gamma n) - m, K) + K, is the model's attention
            for n in (0, 4, 9):
                m = np.arange(P if kind != "decoder_self" else n + 1)
                e = image.data[n, np.clip(math.floor(gamma * n) - m, -k, k) + k]
                expected = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
                np.testing.assert_allclose(seen[(kind, layer)][head, n, :len(m)].numpy(), expected, atol=1e-6)
                np.testing.assert_allclose(lines_of(pa)[f"n = {n}"][1][:len(m)], expected, atol=1e-6)
    # the frozen model (posmix-freeze's tables) draws the same pictures
    task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
    frozen, _ = freeze.freeze_model(task, model, args, 16)
    frozen_data = learned_positions.extract(frozen, P, [0, 4, 9])
    assert all(block["frozen"] for block in frozen_data["rposnet"].values())
    for kind, block in frozen_data["rposnet"].items():
        for a, b in zip(block["layers"], data["rposnet"][kind]["layers"]):
            np.testing.assert_allclose(a["energy"], b["energy"], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(a["profiles"], b["profiles"], atol=1e-6)
    with pytest.raises(Exception, match=r"--positions 17: this model covers positions 0..15"):
        learned_positions.extract(frozen, 17)


def test_gaussian_pictures_from_a_trained_checkpoint(tiny_hc_sa, tmp_path):
    """posmix-plot positions CHECKPOINT: no sentence needed; HC-SA's heads are N(m; n + o_h, 1), cut
    (not renormalised), the decoder's at the current position."""
    _, ckpt_dir = tiny_hc_sa
    figs = plot.main(["positions", os.path.join(ckpt_dir, "checkpoint_last.pt"), "--out", str(tmp_path),
                      "--positions", "8"])
    assert set(figs) == {"gaussian.encoder_self", "gaussian.decoder_self"}
    title = figs["gaussian.encoder_self"]._suptitle.get_text()
    assert "encoder self-attention (hc_sa_iwslt_de_en)" in title and "checkpoint" not in title  # the model, not the file
    stored = json.load(open(tmp_path / "positions.json"))
    n, m = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    for kind, offsets in (("encoder_self", (-1, 1, -1, 1)), ("decoder_self", (-1, 0, -1, 0))):
        assert_written(str(tmp_path), f"gaussian.{kind}")
        axes = panels(figs[f"gaussian.{kind}"])
        assert len(axes) == 2 * 4
        for i, ax in enumerate(axes):
            layer, head = divmod(i, 4)
            expected = np.exp(-0.5 * (m - (n + offsets[head])) ** 2) / math.sqrt(2 * math.pi)
            if kind == "decoder_self":
                expected = np.where(m > n, 0.0, expected)
            np.testing.assert_allclose(ax.images[0].get_array().filled(0.0), expected, atol=1e-6)
            np.testing.assert_allclose(stored["gaussian"][kind]["layers"][layer]["weights"][head], expected, atol=1e-6)


# arch -> the figure learned_positions draws of its position-only parts (one case per family of pictures)
PICTURES = {"aposnet": "aposnet_energy.encoder_self", "t5bias": "t5_bias", "at5bias": "t5_bias",
            "linearnet": "linear.encoder_self", "posnet_attn": "posnet_kernels", "posnet_embed": "posnet_kernels"}


@pytest.mark.parametrize("arch", sorted(PICTURES))
def test_other_position_pictures_equal_the_model(arch, tmp_path):
    flags = ["--arch", f"{arch}_iwslt_de_en"]
    if arch in ("t5bias", "at5bias"):
        flags += ["--encoder-self-t5-buckets", "8"] if arch == "t5bias" else []  # log-spaced buckets from 2 on
    model, _, _ = build(flags)
    if arch in ("t5bias", "at5bias"):  # no content term: the attention is the softmax of the bias alone
        for layer in model.encoder.layers:
            for proj in (layer.self_attn.energy.q_proj, layer.self_attn.energy.k_proj):
                torch.nn.init.zeros_(proj.weight)
                torch.nn.init.zeros_(proj.bias)
    data = learned_positions.extract(model, P)
    figs = learned_positions.draw(data, str(tmp_path))
    name = PICTURES[arch]
    assert_written(str(tmp_path), name)
    axes = panels(figs[name])
    seen = attention_of(model, P)
    if arch in ("aposnet", "linearnet"):
        assert len(axes) == 2 * HEADS
        for i, ax in enumerate(axes):
            layer, head = divmod(i, HEADS)
            image = ax.images[0].get_array().data
            if arch == "aposnet":  # the model's attention is the softmax of the picture's rows
                expected = torch.softmax(torch.tensor(image), -1).numpy()
            else:  # LinearNet mixes with the matrix itself
                expected = model.encoder.layers[layer].self_attn.energy.weight[head, :P, :P].detach().numpy()
                np.testing.assert_allclose(image, expected, rtol=1e-6)
            np.testing.assert_allclose(seen[("encoder_self", layer)][head].numpy(), expected, atol=1e-6)
        dec = panels(figs[name.replace("encoder", "decoder")])[0].images[0].get_array()
        assert dec.mask[0, 1:].all() and not dec.mask[:, 0].any()  # later keys blank in the decoder
    elif arch in ("t5bias", "at5bias"):
        assert [ax.get_title().split(", ")[1] for ax in axes] == ["encoder self-attention", "decoder self-attention"]
        for head in range(HEADS):
            x, y = lines_of(axes[0])[f"head {head + 1}"]
            bias = dict(zip(x, y))
            for q in (0, 5):
                expected = torch.softmax(torch.tensor([bias[q - k] for k in range(P)]), -1)
                np.testing.assert_allclose(seen[("encoder_self", 0)][head, q].numpy(), expected.numpy(), atol=1e-6)
        assert min(lines_of(axes[1])["head 1"][0]) == 0  # the decoder sees only n - m >= 0
    else:
        kernels = ([m.self_attn.values.kernels.weight for m in (model.encoder.layers[0], model.decoder.layers[0])]
                   if arch == "posnet_attn" else
                   [mod.kernels for nm, mod in model.named_modules() if type(mod).__name__ == "PosNetEmbedding"])
        assert len(axes) == 2
        for ax, weight in zip(axes, kernels):
            (x, y), = lines_of(ax).values()
            assert x == list(range(P))
            norms = [float(weight[p, 0].detach().pow(2).sum().sqrt()) for p in range(P)]
            np.testing.assert_allclose(y, norms, rtol=1e-5)
