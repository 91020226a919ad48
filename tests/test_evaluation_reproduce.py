"""posmix-reproduce: every table's paper-scale command listing (each system a valid fairseq configuration
of a registered arch), the reported numbers against the paper texts, and the table rendering.
(A tiny grid of 2 systems takes about 2 minutes on 2 shared cores, so it is not run here; the recipe
it is built on runs end to end in tests/test_recipe.py.)"""
import json
import os
import re
import shlex

import pytest
from conftest import parse_model_args  # fairseq's own parser with the plugin, as fairseq-train builds it
from fairseq.models import ARCH_MODEL_REGISTRY
from helpers import paper_text

from posmix_fairseq.harness.command import UsageError
from posmix_fairseq.harness.evaluation import reproduce
from posmix_fairseq.harness.paper_tables import PAPER_NUMBERS, TABLES, Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.environ.get("POSMIX_MULTI30K", os.path.join(ROOT, "..", "shared", "data", "multi30k"))
SUFFIX = {("gpa", "small"): "iwslt_de_en", ("hc", "small"): "iwslt_small", ("*", "small"): "iwslt_de_en",
          ("*", "base"): "wmt_en_de", ("*", "big"): "wmt_en_de_big"}


def test_every_rerunnable_paper_table_is_listed():
    assert set(TABLES) == {"gpa-2", "gpa-3-big", "gpa-3-small", "gpa-4", "gpa-5", "gpa-6", "gpa-7", "hc-1", "hc-3",
                           "hc-4", "hc-5", "hc-6", "hc-7", "hc-fig7", "pea-1", "pea-2", "pea-3", "pea-4", "recpe", "recpe-big",
                           "recpe-ablation", "posnet-1", "posnet-2", "posnet-3"}


def _columns(lines):
    """The header's column offsets and the rows cut at them; every row's cells start at their header's
    offset after a gap of blanks (the systems column: right-aligned numbers ending at its edge)."""
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    rows = []
    for line in lines[1:]:
        for i, a in enumerate(starts[1:], 1):
            if i == 3:
                assert line[starts[4] - 3].isdigit() and line[starts[4] - 2:starts[4]] == "  ", line
            else:
                assert line[a] != " " and line[a - 2:a] == "  ", line
        rows.append([line[a:b].strip() for a, b in zip(starts, starts[1:] + [len(line)])])
    return starts, rows


def test_list_is_aligned_and_in_paper_order(capsys):
    """--list: the papers in docs/papers.md's order (GPA, HC, PEA, RecPE, PosNet), each paper's tables by
    their own number (tables before figures), every row naming that number as the table's title does."""
    reproduce.main(["--list"])
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert lines[0].split() == ["paper", "number", "--table", "systems", "recipe", "title"]
    starts, rows = _columns(lines)
    assert len(rows) == len(TABLES) and {r[2] for r in rows} == set(TABLES)
    papers = [r[0] for r in rows]
    assert [p for i, p in enumerate(papers) if p not in papers[:i]] == ["GPA", "HC", "PEA", "RecPE", "PosNet"]
    assert papers == sorted(papers, key=["GPA", "HC", "PEA", "RecPE", "PosNet"].index)  # grouped

    def key(number):
        if "unnumbered" in number:
            return (2, ["main results", "ablation"].index(number.split(" (")[0]), number)
        return (int(number.startswith("Fig.")), int(re.search(r"(\d+)", number).group(1)), number)

    for paper in set(papers):
        numbers = [r[1] for r in rows if r[0] == paper]
        assert numbers == sorted(numbers, key=key), (paper, numbers)
    for paper, number, name, systems, recipe, _ in rows:
        table = TABLES[name]
        assert int(systems) == len(table.systems) and recipe == f"examples/{table.recipe}/run.sh"
        if "unnumbered" not in number:  # the number the table's own title gives
            assert re.search(rf"\b{re.escape(number.replace('Appendix ', ''))}(?!\d)", table.title), (name, number)
    assert [r[1] for r in rows if r[0] == "GPA"][:3] == ["Table 2", "Table 3 (left)", "Table 3 (right)"]
    assert [r[2] for r in rows if r[0] == "HC"][0] == "hc-1" and rows[[r[2] for r in rows].index("hc-fig7") - 1][2] == "hc-7"


def test_list_columns_align_whatever_the_lengths():
    long_name = Table("a-table-with-a-very-long-name", "GPA Table 9: x", TABLES["gpa-2"].paper, "a_much_longer_recipe_name",
                      {}, TABLES["gpa-2"].systems * 12)
    PAPER_NUMBERS[long_name.name] = "Table 9"
    try:
        lines = reproduce.table_listing([TABLES["gpa-2"], long_name, TABLES["recpe-ablation"]]).split("\n")
    finally:
        del PAPER_NUMBERS[long_name.name]
    starts, rows = _columns(lines)
    assert [r[2] for r in rows] == ["gpa-2", "a-table-with-a-very-long-name", "recpe-ablation"]
    assert [r[3] for r in rows] == ["9", "108", "10"] and rows[1][4] == "examples/a_much_longer_recipe_name/run.sh"
    assert rows[1][5] == "x"


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
    with pytest.raises(UsageError, match="--table 'gpa-9': valid tables are gpa-2"):  # exit status 2
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
    assert len(plans) == 5 and all("## Plan: wmt14_en_de" in p for p in plans[:4])  # each system's, then the grid's
    assert all(" -m posmix_fairseq.harness.evaluation.decode_speed " in p and "--setting gpa-4" in p for p in plans[:4])
    assert "## Grid summary: gpa-4, 4 systems" in plans[4]
    assert not os.listdir(tmp_path)


# ---- outputs where the caller asks, tables of ours, the grid's plan ---------------------------------

def _checkout_entries():
    return set(os.listdir(ROOT))


def test_render_only_without_results_is_an_error_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """From another directory with a relative --out: no results of ours is an error naming the folder it
    looked in (the caller's), unless --paper-only asks for the paper's numbers alone; nothing is written."""
    before = _checkout_entries()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--table", "gpa-6", "--render-only", "--out", "rel_out"])
    assert "no results of ours" in str(e.value.code) and str(tmp_path / "rel_out" / "gpa-6") in str(e.value.code)
    assert reproduce.main(["--table", "gpa-6", "--render-only", "--paper-only", "--out", "rel_out"]) == {}
    assert "| Transformer gating off | 66.5 | 26.3 |" in capsys.readouterr().out
    with pytest.raises(UsageError, match="--paper-only: only with --render-only"):
        reproduce.main(["--table", "gpa-6", "--paper-only"])
    assert not os.listdir(tmp_path) and _checkout_entries() == before


def _generate_output(path, hyps):
    path.write_text("".join(f"S-{i}\tsrc {i}\nH-{i}\t-0.5\t{h}\n" for i, h in enumerate(hyps)), encoding="utf-8")


def test_tables_show_our_intervals_and_significance_against_the_baseline(tmp_path, monkeypatch, capsys):
    """posmix-score's own JSON (two systems' translations against the table's baseline) rendered from a
    relative --out in another directory: each score with its 95% half-width, the other system's paired
    p-value, the baseline marked; the per-system scores alone give intervals only."""
    from posmix_fairseq.harness.evaluation import score

    monkeypatch.chdir(tmp_path)
    a = reproduce.main(["--table", "gpa-6", "--systems", "0,9", "--scale", "paper", "--out", "rel_out"])
    out_dir = tmp_path / "rel_out" / "gpa-6"
    assert [c["env"]["OUT"] for c in a] == [str(out_dir)] * 2
    out_dir.mkdir(parents=True)
    refs = [f"the cat number {i} sat on the mat today" for i in range(30)]
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    _generate_output(tmp_path / "base.txt", [r if i % 3 else "a dog" for i, r in enumerate(refs)])
    _generate_output(tmp_path / "rpos.txt", [r if i % 5 else "the cat" for i, r in enumerate(refs)])
    base, rpos = "Transformer gating off", "rPosNet gating on"
    score.main([str(tmp_path / "rpos.txt"), "--baseline", str(tmp_path / "base.txt"), "--names", rpos, base,
                "--ref", str(tmp_path / "ref.txt"), "--metrics", "bleu,chrf++", "--paired-bs-n", "200",
                "--json", str(out_dir / reproduce.COMPARISON)])
    rows = json.load(open(out_dir / reproduce.COMPARISON))["rows"]
    expected = {(r["system"], r["metric"]): r for r in rows}
    capsys.readouterr()
    ours = reproduce.main(["--table", "gpa-6", "--systems", "0,9", "--scale", "paper", "--render-only",
                           "--out", "rel_out"])
    printed = capsys.readouterr().out
    assert set(ours) == {base, rpos}
    b, r = expected[(base, "BLEU")], expected[(rpos, "BLEU")]
    assert r["vs"] == base and r["p_bootstrap"] is not None and b["ci95"] is not None
    assert f"| {base} (baseline) | {b['score']:.2f} ± {b['ci95']:.2f} |" in printed
    assert f"| {rpos} | {r['score']:.2f} ± {r['ci95']:.2f} (p={r['p_bootstrap']:.3f}) |" in printed
    assert "paired bootstrap against Transformer gating off" in printed
    # without the grid's comparison: each system's own scores, intervals and no p-values
    os.remove(out_dir / reproduce.COMPARISON)
    score.main([str(tmp_path / "rpos.txt"), "--names", "rposnet_gating_on", "--ref", str(tmp_path / "ref.txt"),
                "--metrics", "bleu", "--paired-bs-n", "200", "--json", str(out_dir / "scores.rposnet_gating_on.json")])
    capsys.readouterr()
    reproduce.main(["--table", "gpa-6", "--systems", "0,9", "--scale", "paper", "--render-only", "--out", "rel_out"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {rpos} |"))
    assert " ± " in row and "p=" not in row and "(baseline)" not in row


def test_time_left_is_not_shown_before_it_means_something():
    """No estimate while the rate is measured over less than a tenth of the updates (the first logged updates
    come right after the start-up: one update and a few seconds would predict minutes per update); then the
    start-up plus the measured rate (+60% for evaluation); then the finished systems' mean time."""
    assert reproduce.time_left(40.0, 39.0, 1.0, 0.02, [], 3) is None
    assert reproduce.time_left(40.0, 30.0, 0.0, 0.0, [], 0) is None
    per_system = 30.0 + 10.0 / 0.5 * 1.6
    assert reproduce.time_left(40.0, 30.0, 10.0, 0.5, [], 1) == pytest.approx(per_system - 40.0 + per_system)
    assert reproduce.time_left(50.0, 1.0, 1.0, 0.01, [100.0, 200.0], 2) == pytest.approx(150.0 - 50.0 + 300.0)


@pytest.mark.skipif(not os.path.isfile(os.path.join(MULTI30K, "train.de.gz")), reason="Multi30k not found (set POSMIX_MULTI30K)")
def test_plan_summarises_the_grid(tmp_path, monkeypatch, capsys):
    """--plan from another directory: one summary of what differs, the compute at the stated throughput, the
    grid's disk, the paper's parameter count beside ours, and that the test lengths came from stand-in data;
    nothing written, neither in the caller's directory nor in the checkout."""
    before = _checkout_entries()
    monkeypatch.chdir(tmp_path)
    env_raw = os.path.join(str(tmp_path), "no-such-raw")
    monkeypatch.setenv("RAW", env_raw)
    monkeypatch.setenv("PLAN_TEST_DATA", MULTI30K)  # the stand-in test set, named (no default)
    plans = reproduce.main(["--table", "gpa-6", "--systems", "0,9", "--scale", "paper", "--plan", "--out", "rel_out",
                            "--throughput", "50000"])
    summary = plans[-1]
    assert "## Grid summary: gpa-6, 2 systems" in summary
    header = next(line for line in summary.splitlines() if line.startswith("| system |"))
    assert header.split(" | ")[1:4] == ["ARCH", "TRAIN_FLAGS", "VARIANT"]
    row = next(line for line in summary.splitlines() if line.startswith("| Transformer gating off |"))
    assert "posmix_transformer_wmt_en_de" in row and "| 66.5 M |" in row and re.search(r"\| 6\d\.\d M \|", row)
    assert "| rPosNet gating on | rposnet_wmt_en_de |" in summary and "| 63.9 M |" in summary
    # GPA Base: its updates x its tokens per update (MAX_TOKENS x GPUs x update frequency), twice, at 50,000 tokens/s
    from posmix_fairseq.harness.recipes.settings import resolve
    tokens = resolve("wmt14_en_de", {"PAPER": "gpa", "SIZE": "base"}).effective_tokens()
    m = re.search(r"([\d,]+) updates in all \(2 systems x ([\d,]+) updates\)", summary)
    per = int(m.group(2).replace(",", ""))
    assert int(m.group(1).replace(",", "")) == 2 * per
    hours = float(re.search(r"about ([\d,.]+) GPU-hours at 50,000 tokens", summary).group(1).replace(",", ""))
    assert hours == pytest.approx(2 * per * tokens / 50000 / 3600, rel=0.02)
    disk = re.search(r"Disk: about ([\d.]+) GB", summary)
    kept = [float(x) for x in re.findall(r"\| ([\d.]+) GB \|", summary)]
    assert len(kept) == 2 and float(disk.group(1)) == pytest.approx(sum(kept), abs=0.11)
    assert "checked on stand-in data" in summary and "for 2 of 2 systems" in summary
    assert not os.listdir(tmp_path) and _checkout_entries() == before


def test_the_tiny_scale_needs_the_data_named(tmp_path, monkeypatch, capsys):
    """No default corpus: --data-dir missing at the tiny scale is a usage error naming the option and what it
    holds (exit status 2), before anything is written; the paper scale needs none."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--table", "gpa-6"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--data-dir DIR is required at the tiny scale" in err and "{train,valid,test}.{en,de}[.gz]" in err
    assert not os.listdir(tmp_path)
    cmds = reproduce.main(["--table", "gpa-6", "--scale", "paper"])
    assert all("RAW" not in c["env"] for c in cmds)
    assert cmds[0]["env"]["OUT"] == os.path.join(str(tmp_path), "runs", "reproduce", "gpa-6")  # the caller's directory


@pytest.mark.parametrize("old,new", [("ape-1", "pea-1"), ("ape-4", "pea-4"), ("rpe", "recpe"), ("rpe-big", "recpe-big"),
                                     ("rpe-ablation", "recpe-ablation")])
def test_earlier_table_names_still_work_and_show_the_new_one(old, new, tmp_path, capsys):
    """PEA's and RecPE's tables were named ape-N and rpe*: those names run the same table and say its name."""
    assert old not in TABLES and new in TABLES
    cmds = reproduce.main(["--table", old, "--scale", "paper", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert f"posmix-reproduce: --table {old} is now named {new}" in captured.err
    assert [c["env"]["OUT"] for c in cmds] == [os.path.join(str(tmp_path), new)] * len(TABLES[new].systems)
    assert all(c["env"]["PAPER"] in ("pea", "recpe") for c in cmds)
