"""Every console script behaves as one family of commands (posmix_fairseq.harness.command): plain-text
--help in which every option says what it does, --version, exit statuses 0 / 1 / 2. The entry points are read
from setup.py and run in this process with sys.argv set, as the installed wrapper runs them
(``sys.exit(entry())``). Bad files, for every file argument of every command: tests/test_entry_points.py."""
import ast
import importlib
import os
import subprocess
import sys

import pytest

from posmix_fairseq import __version__
from posmix_fairseq.harness import command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def console_scripts():
    """{command: (module, function)} from setup.py's entry_points."""
    tree = ast.parse(open(os.path.join(REPO, "setup.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            entries = ast.literal_eval(node.value)["console_scripts"]
            return {name.strip(): tuple(target.strip().split(":")) for name, target in
                    (e.split("=") for e in entries)}
    raise AssertionError("setup.py declares no entry_points")


SCRIPTS = console_scripts()


def entry(name):
    module, function = SCRIPTS[name]
    return getattr(importlib.import_module(module), function)


def run_entry(name, args, monkeypatch, capsys):
    """(exit status, stdout, stderr) of the console script ``name`` with ``args``, in this process."""
    monkeypatch.setattr(sys, "argv", [name, *args])
    try:
        status = entry(name)()
    except SystemExit as e:  # what the installed wrapper's sys.exit would do with it
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def parsers_built(monkeypatch):
    """Records every command parser that parses arguments."""
    built = []
    original = command.CommandParser.parse_known_args

    def record(self, args=None, namespace=None):
        built.append(self)
        return original(self, args, namespace)

    monkeypatch.setattr(command.CommandParser, "parse_known_args", record)
    return built


def undocumented(parser, where=""):
    """Options and arguments of ``parser`` (and its subcommands) without help text."""
    missing = []
    for action in parser._actions:
        if action.help == "==SUPPRESS==" or action.dest == "help":
            continue
        name = "/".join(action.option_strings) or action.dest
        if not (action.help or "").strip():
            missing.append(f"{where}{name}")
        choices = getattr(action, "choices", None)
        for sub_name, sub in (choices.items() if isinstance(choices, dict) else ()):
            if hasattr(sub, "_actions"):
                missing += undocumented(sub, f"{where}{sub_name} ")
    return missing


def test_the_entry_points_are_the_twenty_commands():
    assert len(SCRIPTS) == 20 and all(name.startswith("posmix-") for name in SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_is_plain_text_with_every_option_explained_and_version(name, monkeypatch, capsys):
    built = parsers_built(monkeypatch)
    status, out, err = run_entry(name, ["--help"], monkeypatch, capsys)
    assert status == 0 and err == ""
    assert out.startswith(f"usage: {name}")
    for markup in ("``", ":class:", ":func:", "`_", "**"):
        assert markup not in out, f"{name} --help shows reST markup {markup!r}"
    assert built, f"{name} does not build its parser with posmix_fairseq.harness.command"
    assert undocumented(built[0]) == [], f"{name}: options without help"
    for flag in ("--version", "--quiet", "--debug"):
        assert flag in out
    status, out, err = run_entry(name, ["--version"], monkeypatch, capsys)
    assert status == 0 and out.strip() == f"{name} (posmix_fairseq {__version__})"


def test_help_states_each_default(monkeypatch, capsys):
    status, out, _ = run_entry("posmix-score", ["--help"], monkeypatch, capsys)
    flat = " ".join(out.split())
    assert status == 0
    assert "COMET/BLEURT sentences per batch (default: 16)" in flat
    assert "(default: 1000)" in flat and "(default: 10000)" in flat  # --paired-bs-n, --paired-ar-n


# ---- bad files ----------------------------------------------------------------------------------



def make_bad(tmp_path, kind):
    path = tmp_path / f"bad_{kind}.txt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "not_utf8":
        path.write_bytes(b"H-0\t-1\tok\nH-1\t-1\tcaf\xe9 au lait\n")
    return str(path)


@pytest.fixture
def good(tmp_path):
    """Well-formed inputs beside the bad one: a generate output, text, a data directory, a checkpoint-like file."""
    g = tmp_path / "gen.txt"
    g.write_text("".join(f"S-{i}\tsource {i}\nT-{i}\tref {i} x\nH-{i}\t-0.5\tref {i} x\n" for i in range(4)))
    (tmp_path / "ref.txt").write_text("".join(f"ref {i} x\n" for i in range(4)))
    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04 a zip archive as torch.save writes")
    (tmp_path / "out").mkdir()
    return {"GEN": str(g), "REF": str(tmp_path / "ref.txt"), "DATA": str(data), "CKPT": str(tmp_path / "model.pt"),
            "OUT": str(tmp_path / "out"), "OUTFILE": str(tmp_path / "out" / "x.pt")}


def test_debug_shows_the_traceback(tmp_path, monkeypatch, capsys):
    bad = make_bad(tmp_path, "not_utf8")
    status, _, err = run_entry("posmix-score", ["--hyp", bad, "--ref", bad], monkeypatch, capsys)
    assert status == 1 and "Traceback" not in err and "line 2 is not UTF-8" in err
    status, _, err = run_entry("posmix-score", ["--hyp", bad, "--ref", bad, "--debug"], monkeypatch, capsys)
    assert status == 1 and "Traceback (most recent call last)" in err and "line 2 is not UTF-8" in err
    monkeypatch.setattr(sys, "argv", ["posmix-freeze", bad, str(tmp_path / "out.pt"), "--debug"])
    with pytest.raises(command.CommandError, match="IN.pt .*not a PyTorch checkpoint"):
        entry("posmix-freeze")()  # an error no command code turned into a message: raised as it is


def test_a_reference_with_a_bad_byte_names_file_and_line(tmp_path, good, monkeypatch, capsys):
    ref = tmp_path / "ref.latin1"
    ref.write_bytes(b"ref 0 x\nref 1 x\nr\xe9f 2 x\nref 3 x\n")
    status, _, err = run_entry("posmix-score", [good["GEN"], "--ref", str(ref), "--metrics", "bleu"],
                               monkeypatch, capsys)
    assert status == 1
    assert f"--ref {ref}: line 3 is not UTF-8 (byte 0xe9)" in err


def test_a_generate_output_missing_one_reference_line_says_which(tmp_path, monkeypatch, capsys):
    gen = tmp_path / "gen.txt"
    gen.write_text("".join((f"T-{i}\tref {i}\n" if i != 17 else "") + f"H-{i}\t-0.5\tref {i}\n" for i in range(40)))
    status, _, err = run_entry("posmix-score", [str(gen), "--metrics", "bleu"], monkeypatch, capsys)
    assert status == 1
    assert f"{gen}: 1 of 40 sentences have no T- line (ids [17])" in err and "--ref FILE" in err


def test_usage_errors_exit_2_and_failures_exit_1(tmp_path, good, monkeypatch, capsys):
    status, _, err = run_entry("posmix-score", [good["GEN"], "--no-such-flag"], monkeypatch, capsys)
    assert status == 2 and "unrecognized arguments: --no-such-flag" in err
    status, _, err = run_entry("posmix-score", [good["GEN"], "--csv", "-", "--json", "-"], monkeypatch, capsys)
    assert status == 2 and "both ask for stdout" in err
    status, _, err = run_entry("posmix-freeze", [good["CKPT"], good["OUT"]], monkeypatch, capsys)
    assert status == 1 and f"OUT.pt {good['OUT']}: is a directory" in err


def test_the_entry_point_returns_the_exit_status_not_the_result(good, monkeypatch, capsys):
    """The installed wrapper calls sys.exit(entry()): a returned result object would print and exit 1."""
    status, out, err = run_entry("posmix-score", [good["GEN"], "--metrics", "bleu", "--paired-bs-n", "0"],
                                 monkeypatch, capsys)
    assert status == 0 and out.startswith("| system | BLEU |") and err == ""
    # stdout for the JSON asked for, no table mixed in
    status, out, _ = run_entry("posmix-score", [good["GEN"], "--metrics", "bleu", "--json", "-"], monkeypatch, capsys)
    import json

    assert status == 0 and json.loads(out)["rows"][0]["metric"] == "BLEU"


def test_bench_gpu_returns_its_exit_status_not_its_results(tmp_path, monkeypatch, capsys):
    """posmix-bench-gpu's main returns the results dict; the console wrapper would print it and exit 1."""
    results = tmp_path / "r.json"
    results.write_text('{"meta": {"name": "cpu", "torch": "2", "triton": "3", "cuda": null, "mode": "dry", '
                       '"python": "3.11", "date": "today"}, "sections": {}}')
    status, _, err = run_entry("posmix-bench-gpu", ["--merge", str(results), "--json", str(tmp_path / "m.json")],
                               monkeypatch, capsys)
    assert status == 0 and err == ""


def test_sacrebleu_precomputing_lines_are_not_printed(good, tmp_path, monkeypatch, capsys, caplog):
    """With the root logger at INFO (fairseq or COMET configure it so), sacreBLEU logs "Pre-computing ...
    statistics" once per significance test: two lines for one fact the user cannot act on."""
    import logging

    base = tmp_path / "base.txt"
    base.write_text(open(good["GEN"]).read().replace("\tref 2 x\n", "\tother words\n", 1))
    caplog.set_level(logging.INFO)
    status, _, err = run_entry("posmix-score", [good["GEN"], "--baseline", str(base), "--metrics", "bleu",
                                                "--paired-bs-n", "20", "--paired-ar-n", "20"], monkeypatch, capsys)
    assert status == 0, err
    assert not [r for r in caplog.records if "Pre-computing" in r.getMessage()]


def test_stdin_is_dash(good, tmp_path):
    code = ("import sys; from posmix_fairseq.harness.evaluation.score import cli; "
            "sys.argv = ['posmix-score', '--hyp', '-', '--ref', sys.argv[1], '--metrics', 'chrf', '--paired-bs-n', '0',"
            " '--paired-ar-n', '0']; sys.exit(cli())")
    r = subprocess.run([sys.executable, "-c", code, good["REF"]], input=open(good["REF"]).read(), text=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "100.00" in r.stdout


def test_scoring_text_and_help_import_neither_torch_nor_fairseq(good):
    """posmix-score on text files (and any --help of it) needs no model: importing torch and fairseq
    (and registering every mixer) would cost seconds of start-up."""
    code = ("import sys\n"
            "from posmix_fairseq.harness.evaluation import score\n"
            "try:\n    score.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "score.main([sys.argv[1], '--metrics', 'bleu,chrf,ter', '--paired-bs-n', '10', '--paired-ar-n', '10'])\n"
            "print('HEAVY', sorted(m for m in ('torch', 'fairseq', 'posmix_fairseq.mixers') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code, good["GEN"]], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout


def test_the_plugin_registers_under_user_dir_after_a_light_import():
    """Imported first without fairseq, the package registers nothing; fairseq's --user-dir then finds it
    already imported and does not import it again, so the commands that load models call register()."""
    code = ("import sys, posmix_fairseq\n"
            "assert 'fairseq' not in sys.modules\n"
            "from fairseq.models import ARCH_MODEL_REGISTRY\n"
            "before = 'rposnet_iwslt_de_en' in ARCH_MODEL_REGISTRY\n"
            "posmix_fairseq.register()\n"
            "print('REGISTERED', before, 'rposnet_iwslt_de_en' in ARCH_MODEL_REGISTRY)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "REGISTERED False True" in r.stdout


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from helpers import binarized_toy_corpus, run_train

    root = tmp_path_factory.mktemp("tiny_checkpoint")
    data = binarized_toy_corpus(root, {"train": 120, "valid": 8, "test": 30})
    run_train(data, str(root / "ckpt"), ["--arch", "rposnet_iwslt_de_en"], updates=1)
    return data, str(root / "ckpt" / "checkpoint_last.pt")


def test_heatmaps_outside_the_analysed_sentences_are_refused_before_the_analysis(tiny_checkpoint, tmp_path,
                                                                                  monkeypatch, capsys):
    """fairseq batches by length: with --max-sentences the analysed ids are not the first N ids. The
    check runs before any batch, and the model-loading log shows no Hydra or pin_memory notices."""
    from posmix_fairseq.harness import fairseq_loading
    from posmix_fairseq.harness.evaluation import attention

    data, ckpt = tiny_checkpoint
    task_ids = {}

    def analysed_then_stop(task, subset, stop_after, max_tokens=4000):
        ids = fairseq_loading.first_sentences(task, subset, stop_after, max_tokens=64)  # a few sentences a batch
        task_ids["ids"] = ids
        return ids

    monkeypatch.setattr(attention, "first_sentences", analysed_then_stop)
    monkeypatch.setattr(attention, "batches", lambda *a, **k: pytest.fail("the analysis ran before the check"))
    status, _, err = run_entry("posmix-attention", [data, "--path", ckpt, "--out", str(tmp_path / "att"),
                                                    "--max-sentences", "2", "--heatmaps", "0,1,2"], monkeypatch, capsys)
    absent = sorted({0, 1, 2} - set(task_ids["ids"]))
    assert status == 1 and absent
    assert f"sentence ids {absent} are not among the {len(task_ids['ids'])} sentences analysed with --max-sentences 2" in err
    status, _, err = run_entry("posmix-attention", [data, "--path", ckpt, "--out", str(tmp_path / "att"),
                                                    "--heatmaps", "30"], monkeypatch, capsys)
    assert status == 1 and "sentence ids [30] are not in the 'test' split (ids 0-29)" in err
    for noise in ("version_base", "hydra.experimental", "DEBUG:", "pin_memory", "INFO:fairseq"):
        assert noise not in err


def test_a_model_loading_command_prints_no_library_notices(tiny_checkpoint, tmp_path):
    """Loading a model through fairseq prints Hydra's deprecation notices and DEBUG lines, fairseq's INFO
    lines and torch's pin_memory notice: none of them is something the user can act on."""
    data, ckpt = tiny_checkpoint
    code = ("import sys; from posmix_fairseq.harness.evaluation.attention import cli; "
            "sys.argv[0] = 'posmix-attention'; sys.exit(cli())")
    r = subprocess.run([sys.executable, "-c", code, data, "--path", ckpt, "--out", str(tmp_path / "att")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "| encoder_self | 1 | 1 |" in r.stdout
    for noise in ("hydra", "version_base", "ConfigStore", "DEBUG:", "INFO:", "pin_memory"):
        assert noise not in r.stderr, r.stderr


def test_the_decode_line_of_posmix_freeze_is_shell_quoted(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    """The printed fairseq-generate line is meant to be pasted into a shell: a file name holding $(...)
    must come out quoted, or pasting it would run the command inside."""
    import shlex

    _, ckpt = tiny_checkpoint
    frozen = str(tmp_path / "$(touch pwned) search.pt")
    status, out, err = run_entry("posmix-freeze", [ckpt, frozen], monkeypatch, capsys)
    assert status == 0, err
    line = out.strip().splitlines()[-1]
    assert line.endswith(f"--path {shlex.quote(frozen)}") and shlex.split(line)[-1] == frozen


# ---- one meaning per flag ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_src_and_tgt_name_files_and_languages_are_source_and_target_lang(name, monkeypatch, capsys):
    """--src/--tgt are files (sacreBLEU's and COMET's meaning) or a deprecated spelling of
    -s/--source-lang / -t/--target-lang; -s and -t are always fairseq's language options."""
    built = parsers_built(monkeypatch)
    run_entry(name, ["--help"], monkeypatch, capsys)
    parsers = list(built[:1])
    for parser in parsers:
        for action in parser._actions:
            choices = getattr(action, "choices", None)
            parsers += [p for p in (choices.values() if isinstance(choices, dict) else ()) if hasattr(p, "_actions")]
            flags = set(action.option_strings)
            if flags & {"--src", "--tgt"}:
                assert action.metavar == "FILE" or isinstance(action, command.DeprecatedSpelling), (name, flags)
            if flags & {"-s", "-t"}:
                assert flags & {"--source-lang", "--target-lang"} and action.metavar == "LANG", (name, flags)


def test_an_old_language_spelling_still_works_with_a_notice(monkeypatch, capsys):
    from posmix_fairseq.harness.evaluation import reproduce

    parsed = {}
    monkeypatch.setattr(reproduce, "table_listing", lambda tables: parsed.setdefault("listed", True) and "")
    real = command.CommandParser.parse_known_args

    def keep(self, args=None, namespace=None):
        ns, rest = real(self, args, namespace)
        parsed["ns"] = ns
        return ns, rest

    monkeypatch.setattr(command.CommandParser, "parse_known_args", keep)
    status, _, err = run_entry("posmix-reproduce", ["--src", "fr", "-t", "en", "--list"], monkeypatch, capsys)
    assert status == 0 and (parsed["ns"].src, parsed["ns"].tgt) == ("fr", "en")
    assert "posmix-reproduce: --src is deprecated here; use -s/--source-lang" in err
