"""Numbers that would train or decode silently wrong are errors naming the option: a non-finite or
absurd gamma (GPA Section 4.2's floor(gamma n)), and a search-time model (frozen energy tables, GPA
Sections 4.1-4.2) trained from scratch."""
import pytest
import torch

from helpers import binarized_toy_corpus, build_model, random_batch, run_train
from posmix_fairseq.binarized_data import check_length_ratio


@pytest.mark.parametrize("gamma", ["inf", "1e300", "nan", "-1", "0", "1e-9"])
def test_absurd_length_ratio_is_an_error(gamma):
    with pytest.raises(ValueError, match=r"--length-ratio .*: gamma .* must be a finite number from 0.01 to 100"):
        build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet", "--length-ratio", gamma])


def test_a_sensible_length_ratio_builds():
    model, _ = build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet",
                            "--length-ratio", "0.7"])
    assert check_length_ratio(0.01) == 0.01 and check_length_ratio("100") == 100.0


def test_a_gamma_computed_from_absurd_data_is_an_error(tmp_path):
    """Targets of one token per sentence against sources of 300: the data's own ratio (300) is out of range."""
    from helpers import binarize

    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        (raw / f"{split}.src").write_text("".join(" ".join(["a"] * 300) + "\n" for _ in range(3)))
        (raw / f"{split}.tgt").write_text("b\nb\nb\n")
    binarize(str(raw), str(tmp_path / "bin"))
    from posmix_fairseq.binarized_data import training_length_ratio

    with pytest.raises(ValueError, match=r"length ratio of the binarized 'train' data .*pass --length-ratio"):
        training_length_ratio(str(tmp_path / "bin"), "src", "tgt")


FROZEN = ["--arch", "rposnet_iwslt_de_en", "--encoder-frozen-energy-positions", "48",
          "--decoder-frozen-energy-positions", "48"]


def test_a_search_time_model_refuses_training_and_decodes():
    model, d = build_model(FROZEN)
    src, lengths = random_batch(d, [7, 5])
    prev = src  # one dictionary: the sources serve as previous output tokens
    model.eval()
    with torch.no_grad():
        model(src, lengths, prev)  # decoding (after posmix-freeze filled the tables) is what it is for
    model.train()
    with pytest.raises(ValueError, match=r"--encoder-frozen-energy-positions 48: a search-time model .* decoding "
                                         r"only.* Train without .*posmix-freeze"):
        model(src, lengths, prev)


def test_fairseq_train_of_a_search_time_model_from_scratch_fails(tmp_path):
    data = binarized_toy_corpus(tmp_path, sizes={"train": 200, "valid": 10, "test": 12})
    with pytest.raises(ValueError, match=r"a search-time model .* is for decoding only"):
        run_train(data, str(tmp_path / "ckpt"), FROZEN, updates=1)


# ---- every numeric option of every command: its range is checked while the options are parsed ----------

def command_parsers():
    """[(command, subcommand prefix, parser)] of every console script in setup.py (each parser as --help
    builds it), subcommands included."""
    import argparse
    import sys

    from posmix_fairseq.harness import command
    from test_commands import SCRIPTS, entry

    built = []
    original = command.CommandParser.parse_known_args

    def record(self, args=None, namespace=None):
        built.append(self)
        raise SystemExit(0)

    out = []
    command.CommandParser.parse_known_args = record
    argv = sys.argv
    try:
        for name in sorted(SCRIPTS):
            built.clear()
            sys.argv = [name, "--help"]
            try:
                entry(name)()
            except SystemExit:
                pass
            assert built, f"{name} builds no command parser"
            stack = [((), built[0])]
            while stack:
                prefix, parser = stack.pop()
                out.append((name, prefix, parser))
                for action in parser._actions:
                    if isinstance(action, argparse._SubParsersAction):
                        stack += [(prefix + (sub,), p) for sub, p in action.choices.items()]
    finally:
        command.CommandParser.parse_known_args = original
        sys.argv = argv
    return out


def numeric_options():
    from posmix_fairseq.harness.command import ChoiceList, Number, NumberList

    cases = []
    for name, prefix, parser in command_parsers():
        for action in parser._actions:
            if isinstance(action.type, (Number, NumberList, ChoiceList)):
                flag = max(action.option_strings, key=len) if action.option_strings else None
                for bad in action.type.out_of_range():
                    cases.append((name, prefix, flag, bad))
    return cases


PARSERS = command_parsers()
NUMERIC = numeric_options()


def test_every_numeric_option_of_every_command_declares_its_range():
    """No option is read as a plain int or float (which takes 0, -5, nan or inf without a word), and no option
    with a numeric default goes without a range."""
    unchecked = []
    for name, prefix, parser in PARSERS:
        for action in parser._actions:
            where = " ".join((name,) + prefix + ("/".join(action.option_strings) or action.dest,))
            if action.type in (int, float):
                unchecked.append(where)
            elif action.type is None and action.nargs != 0 and isinstance(action.default, (int, float)) \
                    and not isinstance(action.default, bool):
                unchecked.append(where)
    assert unchecked == []
    assert len({(n, p, f) for n, p, f, _ in NUMERIC}) >= 80  # the sweep found the commands' numeric options


@pytest.mark.parametrize("name,prefix,flag,bad", NUMERIC, ids=[f"{n}{' ' + ' '.join(p) if p else ''} {f}={b}"
                                                               for n, p, f, b in NUMERIC])
def test_a_numeric_option_out_of_range_is_a_usage_error_naming_it(name, prefix, flag, bad, monkeypatch, capsys):
    """Zero, a negative, NaN, text or an inverted list for each numeric option: exit status 2 and argparse's
    one line naming the option, before anything is read or run."""
    import sys

    from test_commands import entry

    monkeypatch.setattr(sys, "argv", [name, *prefix, f"{flag}={bad}"])
    try:
        status = entry(name)()
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2, (name, flag, bad, err)
    assert f"argument {flag}" in err or f"/{flag}:" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("item", ["sublayer.dims=[0]", "train.updates=-1", "quality.hours=NaN", "quality.hours=Infinity",
                                  "decode.beams=[]", "sublayer.k=2.5", "train.tiny=1", "train.nope=3", "kernels.x=1",
                                  "quality.max_train=-1"])
def test_gpu_bench_set_values_out_of_range_are_usage_errors(item, capsys):
    """posmix-bench-gpu --set SECTION.KEY=JSON: a value of another kind than the setting's, or out of its range
    (numbers finite and > 0, or >= 0 where 0 means none or all), or an unknown setting: exit status 2 naming it."""
    from posmix_fairseq.harness.benchmarks import gpu
    from posmix_fairseq.harness.command import run

    status = run(gpu.main, "posmix-bench-gpu", ["--dry-run-cpu", "--set", item])  # refused before any section runs
    err = capsys.readouterr().err
    assert status == 2 and f"--set {item!r}" in err, (status, err)
