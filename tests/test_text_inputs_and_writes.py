"""Text inputs are read once, one way (``command.read_text``): a byte-order mark and CRLF line ends score exactly as
the clean file does. Files the commands write over are written atomically (``command.write_atomic``): a scan of
the harness and the scripts finds no other way of writing one."""
import ast
import io
import json
import os
import runpy
import sys

import pytest

from posmix_fairseq.harness import command
from posmix_fairseq.harness.evaluation import score
from posmix_fairseq.harness.recipes import download

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REFS = ["the small cat sat on the red mat .", "a man walks his dog in the old park .",
        "two children play football near the river .", "she reads a long book about the sea ."]
HYPS = ["the cat sat on the red mat .", "a man walks a dog in the park .",
        "two kids play football by the river .", "she reads a book about the sea ."]


def scores(tmp_path, name, ref_bytes, hyp_bytes):
    """{metric: score} of posmix-score on a hypothesis and a reference file with these bytes."""
    ref, hyp, out = tmp_path / f"{name}.ref", tmp_path / f"{name}.hyp", tmp_path / f"{name}.json"
    ref.write_bytes(ref_bytes)
    hyp.write_bytes(hyp_bytes)
    score.main(["--hyp", str(hyp), "--ref", str(ref), "--metrics", "bleu,chrf,ter", "--json", str(out)])
    return {row["metric"]: row["score"] for row in json.loads(out.read_text())["rows"]}


def encoded(lines, bom=False, eol="\n"):
    return (b"\xef\xbb\xbf" if bom else b"") + "".join(line + eol for line in lines).encode("utf-8")


def test_a_byte_order_mark_and_crlf_score_as_the_clean_file(tmp_path):
    clean = scores(tmp_path, "clean", encoded(REFS), encoded(HYPS))
    assert 20 < clean["BLEU"] < 100 and set(clean) == {"BLEU", "chrF2", "TER"}
    for bom, eol in ((True, "\n"), (False, "\r\n"), (True, "\r\n")):
        name = f"bom{bom}_eol{len(eol)}"
        assert scores(tmp_path, name, encoded(REFS, bom, eol), encoded(HYPS)) == clean, f"{name}: the references"
        assert scores(tmp_path, name + "h", encoded(REFS), encoded(HYPS, bom, eol)) == clean, f"{name}: the hypotheses"


def test_the_one_reader_strips_a_bom_and_refuses_bad_bytes_with_the_line(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    assert command.read_text_lines(str(path)) == ["one", "two"]
    path.write_bytes(b"one\ntwo\nthr\xe9e\n")
    with pytest.raises(command.CommandError, match=r"line 3 is not UTF-8 \(byte 0xe9\)"):
        command.read_text(str(path))
    # the download stage reads streams of its own (lines end at LF only), with the same BOM rule
    assert download.read_lines(io.BytesIO(b"\xef\xbb\xbfone\r\ntwo\n"), "x") == ["one", "two"]


def test_write_atomic_leaves_the_old_file_whole_and_keeps_permissions(tmp_path):
    path = tmp_path / "table.md"
    path.write_text("old\n")
    os.chmod(path, 0o640)

    def fails(f):
        f.write(b"half a new ")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        command.write_atomic(str(path), fails)
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["table.md"]
    command.replace_file(str(path), "new\n")
    assert path.read_text() == "new\n" and (os.stat(path).st_mode & 0o777) == 0o640
    fresh = tmp_path / "fresh.txt"
    command.replace_file(str(fresh), b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert (os.stat(fresh).st_mode & 0o777) == 0o666 & ~umask  # as open() makes it, not mkstemp's 0600


#: the places that open a file to write it in pieces: logs streamed while a child process runs (what was written
#: before a crash is what the user needs to read), never a result
STREAMED_LOGS = {"posmix_fairseq/harness/pipeline.py": 2, "posmix_fairseq/harness/evaluation/reproduce.py": 1}


def writes_in_place(path):
    """Calls in ``path`` that write a file in place: open(..., "w"/"a"/"x"), Path.write_text/write_bytes, and
    torch.save / np.save to a path rather than to a file object."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        owner = getattr(node.func.value, "id", None) if isinstance(node.func, ast.Attribute) else None
        if name == "open" and owner != "os":  # open, gzip.open, Path.open, ... (os.open is a descriptor)
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax"):
                found.append(node.lineno)
        elif name in ("write_text", "write_bytes"):
            found.append(node.lineno)
        elif name == "save" and owner in ("torch", "np", "numpy") and len(node.args) > 1 \
                and not isinstance(node.args[1], ast.Name):
            found.append(node.lineno)
    return found


def test_every_file_written_over_is_written_atomically():
    """The harness (but posmix-claims' folder, whose result files are its own) and the scripts write results,
    tables, pages, data and checkpoints through command.write_atomic."""
    roots = [os.path.join(REPO, "posmix_fairseq", "harness"), os.path.join(REPO, "scripts")]
    offenders = []
    for root in roots:
        for folder, _, files in os.walk(root):
            if os.path.join("evaluation", "claims") in folder or os.path.join("scripts", "gpu") in folder:
                continue
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    relative = os.path.relpath(path, REPO)
                    lines = writes_in_place(path)
                    if len(lines) > STREAMED_LOGS.get(relative, 0):
                        offenders.append(f"{relative}: lines {lines}")
    assert not offenders, "write these through command.write_atomic / replace_file:\n" + "\n".join(offenders)


def test_the_main_job_refuses_a_data_dir_without_its_splits_in_one_line(tmp_path, monkeypatch, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.en").write_text("a\n")
    (raw / "train.de").write_text("b\n")
    monkeypatch.setattr(sys, "argv", ["run_pipeline.py", "--data-dir", str(raw), "-s", "en", "-t", "de",
                                      "--out", str(tmp_path / "job")])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(os.path.join(REPO, "scripts", "run_pipeline.py"), run_name="__main__")
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" not in err
    assert err.startswith(f"run_pipeline.py: --data-dir {raw}: no valid/val/dev file for language 'en'")
    assert not (tmp_path / "job").exists()  # refused before any work
