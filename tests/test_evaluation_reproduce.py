"""posmix-reproduce: every table's paper-scale command listing (each system a valid fairseq configuration
of a registered arch), the reported numbers against the paper texts, and the table rendering.
(A tiny grid of 2 systems takes about 2 minutes on 2 shared cores, so it is not run here; the recipe
it is built on runs end to end in tests/test_recipe.py.)"""
import os
import re
import shlex

import pytest
from conftest import parse_model_args  # fairseq's own parser with the plugin, as fairseq-train builds it
from fairseq.models import ARCH_MODEL_REGISTRY
from helpers import paper_text

from posmix_fairseq.harness.evaluation import reproduce
from posmix_fairseq.harness.evaluation.paper_tables import TABLES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUFFIX = {("gpa", "small"): "iwslt_de_en", ("hc", "small"): "iwslt_small", ("*", "small"): "iwslt_de_en",
          ("*", "base"): "wmt_en_de", ("*", "big"): "wmt_en_de_big"}


def test_every_rerunnable_paper_table_is_listed():
    assert set(TABLES) == {"gpa-2", "gpa-3-big", "gpa-3-small", "gpa-4", "gpa-5", "gpa-6", "gpa-7", "hc-1", "hc-3",
                           "hc-4", "hc-5", "hc-6", "hc-7", "hc-fig7", "ape-1", "ape-2", "ape-3", "ape-4", "rpe", "rpe-big",
                           "rpe-ablation", "posnet-1", "posnet-2", "posnet-3"}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_paper_scale_listing_is_a_valid_grid(name, capsys, tmp_path):
    cmds = reproduce.main(["--table", name, "--scale", "paper", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    table = TABLES[name]
    assert len(cmds) == len(table.systems) and printed.count("bash examples/") == len(cmds)
    assert os.path.isfile(os.path.join(ROOT, cmds[0]["recipe"]))
    assert cmds[0]["env"]["STAGES"].startswith("download prepare preprocess")
    assert all("download" not in c["env"]["STAGES"] for c in cmds[1:])
    assert len({c["env"]["NAME"] for c in cmds}) == len(cmds)  # distinct checkpoint dirs
    for c in cmds:
        env = c["env"]
        paper, size = env["PAPER"], env["SIZE"]
        arch = env.get("ARCH") or f"{env['VARIANT']}_{SUFFIX.get((paper, size), SUFFIX[('*', size)])}"
        assert arch in ARCH_MODEL_REGISTRY, arch
        args = parse_model_args(["--arch", arch, *shlex.split(env.get("TRAIN_FLAGS", ""))], tiny=False)
        assert args.arch == arch
        assert shlex.split(printed.splitlines()[3 + cmds.index(c)])[-1] == c["recipe"]


def _value_in(text, v):
    g = f"{v:g}"
    tail = "0*" if "." in g else r"(\.0+)?"  # 61.5 is printed 61.50, 24 is printed 24.0
    return re.search(rf"(?<![\d.]){re.escape(g)}{tail}(?!\d)", text) is not None


@pytest.mark.parametrize("name", [n for n, t in sorted(TABLES.items()) if t.reported])
def test_reported_numbers_are_in_the_paper_text(name):
    table = TABLES[name]
    text = paper_text(table.paper)
    missing = [(lbl, c, v) for lbl, cols in table.reported.items() for c, v in cols.items() if not _value_in(text, v)]
    assert not missing
    assert set(table.reported) <= {s.label for s in table.systems}


def test_render_places_ours_beside_the_paper():
    table = TABLES["posnet-1"]
    labels = ["SAPE", "PosNet-Embed"]
    out = reproduce.render(table, labels, {"SAPE": {"BLEU": 12.345, "chrF2++": 40.0}}, "tiny")
    lines = out.splitlines()
    assert lines[2].startswith("| system | ours (tiny) BLEU | ours (tiny) chrF2++ | paper En-De BLEU")
    assert lines[4].startswith("| SAPE | 12.35 | 40.00 | 27.48 | 53.97")
    assert lines[5].startswith("| PosNet-Embed | - | - | 27.68")


def test_bad_table_name():
    with pytest.raises(SystemExit, match="--table 'gpa-9': valid tables are gpa-2"):
        reproduce.main(["--table", "gpa-9"])


def test_gpa_table_7_rows_4_and_5_as_the_appendix_prose_restores_them():
    """Row 5 (+ GeLU gating) is row 4 (LightConv with GLU) + 0.5 BLEU, 0.2 BLEURT, 1.3 COMET; row 6 is row 5
    + 0.1 BLEU, 0.2 BLEURT, + 0 COMET (GPA Appendix E)."""
    rep = TABLES["gpa-7"].reported
    row4, row5, row6 = (rep[k] for k in ("LightConv", "+ GeLU Gating", "+ Global Context"))
    for col, step in (("En-Zh BLEU", 0.5), ("En-Zh BLEURT", 0.2), ("En-Zh COMET", 1.3)):
        assert row5[col] - row4[col] == pytest.approx(step)
    for col, step in (("En-Zh BLEU", 0.1), ("En-Zh BLEURT", 0.2), ("En-Zh COMET", 0.0)):
        assert row6[col] - row5[col] == pytest.approx(step)
    assert [s.label for s in TABLES["gpa-7"].systems][3] == "LightConv"


def test_training_log_gives_peak_memory_and_speed(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("INFO | fairseq.utils | rank   0: capabilities =  8.0  ; total memory = 79.189 GB ; name = H100\n"
                   "train_inner | epoch 001:    100 / 9 loss=9.1, wps=1000, ups=1, gb_free=70.1, wall=5\n"
                   "train_inner | epoch 001:    200 / 9 loss=8.1, wps=3000, ups=1, gb_free=69.2, wall=9\n"
                   "train_inner | epoch 001:    300 / 9 loss=7.1, wps=5000, ups=1, gb_free=69.6, wall=12\n")
    stats = reproduce.training_log_stats(str(log))
    assert stats["train peak GB"] == pytest.approx(79.189 - 69.2) and stats["train wps"] == pytest.approx(4000)


def test_plan_mode_prints_each_systems_plan(capsys, tmp_path):
    plans = reproduce.main(["--table", "gpa-4", "--scale", "paper", "--plan", "--out", str(tmp_path)])
    assert len(plans) == 4 and all("## Plan: wmt14_en_de" in p for p in plans)
    assert all(" -m posmix_fairseq.harness.evaluation.decode_speed " in p and "--setting gpa-4" in p for p in plans)
    assert not os.listdir(tmp_path)
