"""Every entry point a user runs goes through the project's error handler (``posmix_fairseq.harness.command.run``):
generic bad inputs end in a non-zero exit status and a message naming the input, never in a traceback.

The entry points are read, not listed: setup.py's console scripts, and the scripts under ``scripts/`` with a
``__main__`` block (``scripts/gpu/wheelset.py`` is left out: it runs on the GPU host before the plugin is
installed, with the standard library only, and ``scripts/gpu/install.sh`` reports its failures). Each runs in this
process as a user runs it (the installed wrapper's ``sys.exit(entry())``; ``python scripts/X.py`` through runpy),
so a command that escapes the handler raises here and fails the test.

The cases are taken from each command's own parser (and its subcommands'), as the option sweep takes its cases
from the registry: an option or argument whose metavar names a path (``FILE``, ``DIR``, ``JSON``, ``CSV``,
``GEN_OUT``, ``IN.pt``, ``OUT.pt``, ``SOURCE``, ``LABEL=PATH``, ...) takes a file. An input file gets a missing
path, an empty file, a directory, bytes that are not UTF-8, and (a checkpoint or JSON, by its metavar or help) a
truncated one; an input directory gets a missing path and a file; an output file gets a directory and an output
directory a file. The other required arguments take valid values (their first choice, the low end of their
range, a good input where one is known, else the same bad path); a command whose file options need other inputs
to be read at all declares its smallest invocation, ``EXAMPLE_ARGUMENTS`` in its module. Every ``--device`` option
is given ``cuda`` on a host without CUDA (``torch.cuda.is_available`` patched to say so). A new command, option
or subcommand is covered without an edit here; a path-like option without a path metavar fails
``test_path_options_declare_a_path_metavar``.
"""
import argparse
import ast
import glob
import importlib
import io
import itertools
import os
import re
import runpy
import shutil
import sys
import types

import pytest

from posmix_fairseq.harness import command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- the entry points --------------------------------------------------------------------------------


def console_scripts():
    """{command: "module:function"} from setup.py's entry_points."""
    tree = ast.parse(open(os.path.join(REPO, "setup.py"), encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            entries = ast.literal_eval(node.value)["console_scripts"]
            return dict(tuple(part.strip() for part in e.split("=")) for e in entries)
    raise AssertionError("setup.py declares no entry_points")


def main_block(tree):
    """The ``if __name__ == "__main__":`` block of a module's AST, or None."""
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and getattr(node.test.left, "id", None) == "__name__"):
            return node
    return None


def user_scripts():
    """{"scripts/NAME.py": path} of the scripts a user runs."""
    found = {}
    for path in sorted(glob.glob(os.path.join(REPO, "scripts", "*.py"))):
        if main_block(ast.parse(open(path, encoding="utf-8").read())) is not None:
            found[os.path.relpath(path, REPO)] = path
    return found


CONSOLE = console_scripts()
SCRIPTS = user_scripts()
ENTRY_POINTS = sorted(CONSOLE) + sorted(SCRIPTS)


MODULES = {}


def command_module(name):
    """The module of a console script, or the globals of a script (run under another name than __main__)."""
    if name not in MODULES:
        MODULES[name] = (importlib.import_module(CONSOLE[name].split(":")[0]) if name in CONSOLE else
                         types.SimpleNamespace(**runpy.run_path(SCRIPTS[name], run_name="entry_point_test")))
    return MODULES[name]


def invoke(name, args, monkeypatch, capsys):
    """(exit status, stdout, stderr) of entry point ``name`` run with ``args`` as a user runs it."""
    monkeypatch.setattr(sys, "argv", [name, *args])
    try:
        if name in CONSOLE:
            module, function = CONSOLE[name].split(":")
            status = getattr(importlib.import_module(module), function)()
        else:
            runpy.run_path(SCRIPTS[name], run_name="__main__")
            status = 0
    except SystemExit as e:  # what the wrapper's sys.exit does with it: a text is printed, status 1
        status = e.code if isinstance(e.code, int) or e.code is None else 1
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return status or 0, out, err


def parsers_of(name, monkeypatch, capsys):
    """[(argv prefix, parser)]: the entry point's command parser and each subcommand's, from its ``--help`` run."""
    from test_commands import parsers_built

    original = command.CommandParser.parse_known_args
    built = parsers_built(monkeypatch)
    status, out, err = invoke(name, ["--help"], monkeypatch, capsys)
    monkeypatch.setattr(command.CommandParser, "parse_known_args", original)
    assert status == 0 and built, (f"{name}: --help did not parse with a parser of posmix_fairseq.harness.command "
                                   f"(build_parser): {err[-500:]}")
    found, queue = [], [((), built[0])]
    while queue:
        prefix, parser = queue.pop(0)
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subcommands:
            found.append((prefix, parser))
        for action in subcommands:
            queue += [((*prefix, sub), p) for sub, p in action.choices.items()]
    return found


# ---- what an argument takes ----------------------------------------------------------------------------

PATH_METAVARS = {"FILE", "DIR", "JSON", "CSV", "GEN_OUT", "IN.pt", "OUT.pt", "SOURCE", "OUTDIR"}
DIR_METAVARS = {"DIR", "OUTDIR"}
#: metavars of a labelled path: how a value is written with the path in it
LABELLED = {"LABEL=PATH": "a={}", "TITLE=PATH": "a={}", "SYSTEM:LAYERS=PATH": "a:1={}", "D_P=PATH": "64={}"}
#: a destination that names a path: its argument must show it with a path metavar
PATH_LIKE_DEST = re.compile(r"(^|_)(path|paths|file|files|dir|json|csv|markdown|data|out|output|input|inputs|"
                            r"checkpoint|merge|work)$")


def metavar_of(action):
    metavar = action.metavar
    return metavar[0] if isinstance(metavar, tuple) else metavar


def takes_path(action) -> bool:
    metavar = metavar_of(action)
    return isinstance(metavar, str) and (metavar in PATH_METAVARS or "PATH" in metavar)


#: destinations of outputs whose help need not say so
OUTPUT_DESTS = {"out", "output", "outdir", "out_dir", "scores_out", "markdown", "page", "work"}


def is_output(action) -> bool:
    return metavar_of(action) in ("OUT.pt", "OUTDIR") or action.dest in OUTPUT_DESTS or bool(
        re.search(r"\b(write|written|writes|created)\b", action.help or "", re.I))


def is_dir(action) -> bool:
    return metavar_of(action) in DIR_METAVARS


def content_kinds(action):
    """What an input file holds, as its metavar and help say: checkpoint, json (or both for SOURCE)."""
    text = f"{metavar_of(action)} {action.help or ''}".lower()
    return {kind for kind, words in (("checkpoint", ("checkpoint", "in.pt", ".pt")), ("json", ("json",)))
            if any(w in text for w in words)}


def bad_kinds(action):
    if is_output(action):
        return ["file_for_dir"] if is_dir(action) else ["directory"]
    if is_dir(action):
        return ["missing", "file_for_dir"]
    kinds = ["missing", "empty", "directory", "not_utf8"]
    return kinds + [f"truncated_{kind}" for kind in sorted(content_kinds(action))]


def make_bad(tmp_path, kind, suffix=""):
    path = tmp_path / f"bad_{kind}{suffix}"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind in ("directory",):
        path.mkdir()
    elif kind == "file_for_dir":
        path.write_text("a file, not a directory\n")
    elif kind == "not_utf8":
        path.write_bytes(b"H-0\t-1\tok\nH-1\t-1\tcaf\xe9 au lait\n")
    elif kind == "truncated_json":
        path.write_text('{"rows": [{"metric": "BLEU", "score": 1')
    elif kind == "truncated_checkpoint":
        import torch

        buffer = io.BytesIO()
        torch.save({"model": {"w": torch.zeros(64, 64)}, "cfg": {"model": None}}, buffer)
        path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    return str(path)


@pytest.fixture
def goods(tmp_path):
    """Good inputs by metavar (a fairseq-generate output, text, a data directory) and fresh outputs."""
    gen = tmp_path / "gen.txt"
    gen.write_text("".join(f"S-{i}\tsource {i}\nT-{i}\tref {i} x\nH-{i}\t-0.5\tref {i} x\n" for i in range(4)))
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(f"ref {i} x\n" for i in range(4)))
    data = tmp_path / "data-bin"  # what fairseq-preprocess leaves: the dictionaries, a split's (empty) files
    data.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt"):
        (data / name).write_text("a 1\n")
    for name in ("test.src-tgt.src.idx", "test.src-tgt.src.bin", "test.src-tgt.tgt.idx", "test.src-tgt.tgt.bin"):
        (data / name).write_bytes(b"")
    (tmp_path / "outputs").mkdir()
    return {"GEN_OUT": str(gen), "FILE": str(ref), "DIR": str(data), "OUT": str(tmp_path / "outputs")}


OUTPUT_NUMBERS = itertools.count()


def value_for(action, bad, goods):
    """A valid value for an argument the case does not test."""
    if takes_path(action):
        if is_output(action):
            path = os.path.join(goods["OUT"], f"out{next(OUTPUT_NUMBERS)}" + ("" if is_dir(action) else ".out"))
        elif is_dir(action):
            path = goods["DIR"]
        elif metavar_of(action) == "GEN_OUT":  # a copy each time: two systems are two files
            path = f"{goods['GEN_OUT']}.{next(OUTPUT_NUMBERS)}.txt"
            shutil.copy(goods["GEN_OUT"], path)
        elif metavar_of(action) in ("FILE", "CSV") and not content_kinds(action):
            path = goods["FILE"]
        else:  # a checkpoint or JSON: no good one at hand, the bad path again (a check naming it is right too)
            path = bad
        return LABELLED.get(metavar_of(action), "{}").format(path)
    if action.choices:
        return str(next(iter(action.choices)))
    if isinstance(action.type, command.Number):
        return str(action.type.low if action.type.low is not None and not action.type.low_open else 1)
    if isinstance(action.type, command.NumberList):
        return "1"
    return "x"


def arguments(parser, tested, bad, goods, example=()):
    """argv for ``parser`` with ``bad`` in argument ``tested`` and valid values for what else it requires."""
    given = {a for a in parser._actions if a.option_strings and set(a.option_strings) & set(example)}
    optional, positional = list(example), []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)) or action in given:
            continue
        if action is tested:
            value = LABELLED.get(metavar_of(action), "{}").format(bad)
        elif (action.required if action.option_strings else action.nargs not in ("?", "*")):
            value = value_for(action, bad, goods)
        else:
            continue
        if action.option_strings:
            optional += [action.option_strings[0], value]
        else:
            positional.append(value)
    for group in parser._mutually_exclusive_groups:
        members = group._group_actions
        if group.required and tested not in members and not set(members) & given:
            optional += [members[0].option_strings[0], value_for(members[0], bad, goods)]
    if parser.get_default("_languages_required"):
        optional += ["-s", "de", "-t", "en"]
    return positional + optional


def example_of(name, prefix, option):
    """The command's own smallest invocation for ``option`` (``EXAMPLE_ARGUMENTS``), placeholders filled later."""
    examples = getattr(command_module(name), "EXAMPLE_ARGUMENTS", None) or {}
    return examples.get(" ".join((*prefix, option)), examples.get(" ".join(prefix) or None, ()))


def fill(example, goods):
    return [goods[a[1:-1]] if a.startswith("{") and a.endswith("}") and a[1:-1] in goods else a for a in example]


# ---- the cases, generated ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_the_entry_point_runs_behind_the_error_handler(name):
    """A console script is made by command.console; a script's ``__main__`` block returns command.run's status."""
    if name in CONSOLE:
        module, function = CONSOLE[name].split(":")
        cli = getattr(importlib.import_module(module), function)
        assert cli.__qualname__ == f"{command.console.__name__}.<locals>.cli", \
            f"{name}: {CONSOLE[name]} is not made by posmix_fairseq.harness.command.console"
    else:
        block = main_block(ast.parse(open(SCRIPTS[name], encoding="utf-8").read()))
        calls = {n.func.id for n in ast.walk(block) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "run" in calls, f"{name}: its __main__ block does not call posmix_fairseq.harness.command.run"


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_path_options_declare_a_path_metavar(name, monkeypatch, capsys):
    """What the generated cases rely on: an argument whose name says it takes a path shows a path metavar."""
    for prefix, parser in parsers_of(name, monkeypatch, capsys):
        for action in parser._actions:
            if PATH_LIKE_DEST.search(action.dest) and action.nargs != 0 and not takes_path(action):
                where = f"{name} {' '.join(prefix)} {'/'.join(action.option_strings) or action.dest}"
                pytest.fail(f"{where}: give it a path metavar ({', '.join(sorted(PATH_METAVARS))} or LABEL=PATH)")


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_bad_files_are_named_without_traceback(name, tmp_path, goods, monkeypatch, capsys):
    """Every file argument of every parser of ``name``, with each bad kind: a non-zero exit status (1; 2 where a
    command reads a bad path as a usage error), a message ``prog: ...`` (``prog SUBCOMMAND: ...``) naming the bad
    path, no traceback."""
    failures, count = [], 0
    prog = name if name in CONSOLE else os.path.basename(name)
    for prefix, parser in parsers_of(name, monkeypatch, capsys):
        for action in parser._actions:
            if not takes_path(action):
                continue
            for kind in bad_kinds(action):
                case = f"{name} {' '.join(prefix)} {'/'.join(action.option_strings) or action.dest} ({kind})"
                option = (action.option_strings or [action.dest])[0]
                if (name, option, kind) in ACCEPTED or (name, option) in LEFT_OUT:
                    continue
                case_dir = tmp_path / f"case{count}"
                case_dir.mkdir()
                json_only = content_kinds(action) == {"json"}  # a command may tell JSON by its suffix
                bad = make_bad(case_dir, kind, ".json" if json_only else "")
                count += 1
                example = fill(example_of(name, prefix, action.option_strings[0] if action.option_strings
                                          else action.dest), goods)
                argv = [*prefix, *arguments(parser, action, bad, goods, example)]
                try:
                    status, out, err = invoke(name, argv, monkeypatch, capsys)
                except BaseException as e:  # noqa: B902  (escaped the handler)
                    failures.append(f"{case}: raised {type(e).__name__}: {e}")
                    continue
                if status == 0 or bad not in err or "Traceback" in err + out or not err.startswith((f"{prog}: ", f"{prog} {' '.join(prefix)}: ")):
                    failures.append(f"{case}: status {status}, argv {argv}, stderr {err[-400:]!r}")
    assert not failures, f"{len(failures)} of {count} cases:\n" + "\n".join(failures)


#: file options left out, each with why: (entry point, option)
LEFT_OUT = {
    # posmix-claims creates --out and --results (a study writes its folders; --render-only checks that --results
    # exists, in tests/test_claims.py) and writes --page: a missing or empty one is not a bad input
    ("posmix-claims", "--out"),
    ("posmix-claims", "--page"),
    ("posmix-claims", "--results"),
}

#: a bad kind an argument accepts by design: (entry point, option, kind)
ACCEPTED = {
    # an empty list of untranslated sentences is a valid --untranslated file (posmix-length-bins reads it too)
    ("posmix-score", "--untranslated", "empty"),
    ("posmix-length-bins", "--untranslated", "empty"),
}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_device_cuda_without_cuda_is_a_clear_error(name, tmp_path, goods, monkeypatch, capsys):
    """Every ``--device`` option, given cuda on a host without CUDA: exit status non-zero, the option or the
    device named, no traceback."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    checked = 0
    for prefix, parser in parsers_of(name, monkeypatch, capsys):
        device = next((a for a in parser._actions if "--device" in a.option_strings), None)
        if device is None:
            continue
        checked += 1
        bad = str(tmp_path / "missing-input")
        example = fill(example_of(name, prefix, "--device"), goods)
        argv = [*prefix, *arguments(parser, None, bad, goods, example), "--device", "cuda"]
        status, out, err = invoke(name, argv, monkeypatch, capsys)
        assert status != 0 and "Traceback" not in err + out, (name, prefix, status, err[-800:])
        assert "cuda" in err.lower() and ("--device" in err or "CUDA" in err), (name, prefix, err[-800:])
    if not checked:
        pytest.skip(f"{name} has no --device option")


def test_an_option_the_mode_does_not_use_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """posmix-reproduce --render-only trains nothing: a training option given with it is refused, not ignored."""
    from posmix_fairseq.harness.paper_tables import TABLES

    argv = ["--table", next(iter(TABLES)), "--render-only", "--out", str(tmp_path), "--data-dir", str(tmp_path),
            "--max-update", "5"]
    status, _, err = invoke("posmix-reproduce", argv, monkeypatch, capsys)
    assert status == 2 and "Traceback" not in err
    assert err.startswith("posmix-reproduce: --render-only prints the table from the scores in --out and trains "
                          "nothing: --data-dir, --max-update would be ignored; drop them")
