"""posmix-bench-train-step: what it reports (repetitions, tokens/s, ratios, --sizes, --profile) and what it refuses."""
import re

import pytest

from posmix_fairseq.harness.benchmarks import train_step

TINY = ["--threads", "1", "--steps", "1", "--warmup", "0", "--batch", "2", "--src-len", "5", "--tgt-len", "4",
        "--vocab", "20", "--model-args", "--encoder-layers 1 --decoder-layers 1"]


def rows(text):
    return [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def test_each_size_reports_the_median_and_range_of_its_repetitions(capsys):
    archs = "posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en+--encoder-self-gating off"
    assert train_step.main([*TINY, "--sizes", "d64,small", "--reps", "3", "--archs", archs]) is None
    out = capsys.readouterr().out
    assert re.search(r"^d64: batch 2 x src 5 x tgt 4, vocab 20, .* 3 repetitions of 0 \+ 1 steps$", out, re.M)
    assert re.search(r"^small: batch 2 x src 5 x tgt 4, vocab 20, ", out, re.M)
    table = rows(out)
    assert [r[0].strip("| ") for r in table] == ["arch", *archs.split(","), "arch", *archs.split(",")]
    figure = r"[\d,.]+ \([\d,.]+-[\d,.]+\)"  # median (lowest-highest)
    for row in table:
        if row[0] != "| arch":
            assert all(re.fullmatch(figure, cell.strip(" |")) for cell in row[2:]), row
    assert table[1][4].strip(" |") == "1.000 (1.000-1.000)"  # the first arch is the reference
    # the d64 models are posmix-claims' size: D = 64 (the tiny flags set only the depth)
    assert int(table[1][1].replace(",", "")) < int(table[4][1].replace(",", ""))


def test_profile_lists_ops_per_phase_and_the_products_multiply_adds(capsys):
    train_step.main([*TINY, "--sizes", "d64", "--profile", "--profile-rows", "2",
                     "--archs", "posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en"])
    out = capsys.readouterr().out
    assert re.search(r"^\| rposnet_iwslt_de_en \| [\d.]+ G \| [\d.]+ \|$", out, re.M)
    for phase in ("forward", "backward", "optimizer"):
        assert len(re.findall(rf"^\| {phase} \([\d.]+ ms\) \|", out, re.M)) == 2
        # the summary by kind of work: its cells add up to the row's total
        row = re.search(rf"^\| rposnet_iwslt_de_en \| {phase} \| (.*) \|$", out, re.M).group(1).split(" | ")
        assert len(row) == len(train_step.KINDS) + 2
        assert abs(sum(map(float, row[:-1])) - float(row[-1])) < 0.1 * len(row)


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "base"], r"--sizes: 'base' is not a size; valid: small, d64"),
    (["--archs", "rposnet_iwslt_de_en,rposnet_iwslt_de_en"], r"--archs: 'rposnet_iwslt_de_en' is listed twice"),
])
def test_bad_sizes_and_archs_are_usage_errors(argv, message, capsys):
    from posmix_fairseq.harness.command import run
    assert run(train_step.main, "posmix-bench-train-step", [*TINY, *argv]) == 2
    assert re.search(message, capsys.readouterr().err)
