"""Checkpoint files: nothing lost (no command overwrites its own input, writes are atomic), nothing run
from a file (weights-only loading, crafted pickles refused), nothing silently wrong (damaged weights and
averages of different models refused)."""
import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

from helpers import binarized_toy_corpus, run_train
from posmix_fairseq.harness import checkpoint_files
from posmix_fairseq.harness.checkpoint_files import CheckpointFileError, save_atomic, write_text_atomic
from posmix_fairseq.harness.freeze import freeze_checkpoint
from posmix_fairseq.harness.freeze import main as freeze_main
from posmix_fairseq.harness.evaluation import average

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny rPosNet (cross-attention too: gamma is stored) with interval checkpoints every 2 updates."""
    root = tmp_path_factory.mktemp("checkpoint_files")
    data = binarized_toy_corpus(root, sizes={"train": 200, "valid": 10, "test": 12})
    run_train(data, str(root / "ckpt"), ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet",
                                         "--save-interval-updates", "2", "--keep-interval-updates", "-1"], updates=6)
    return data, str(root / "ckpt")


def copies(trained, tmp_path, *names):
    """Copies of the trained run's checkpoints (the tests damage and overwrite them)."""
    _, ckpt_dir = trained
    out = []
    for source, name in zip(average.list_checkpoints(ckpt_dir) + [os.path.join(ckpt_dir, "checkpoint_last.pt")],
                            names):
        shutil.copy(os.path.join(ckpt_dir, source), tmp_path / name)
        out.append(str(tmp_path / name))
    return out


class Payload:
    """A pickle that runs code when unpickled: it creates the directory ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def read_own(path):
    """One of this test's own checkpoints, read weights-only with fairseq's Namespace allowed."""
    with torch.serialization.safe_globals([argparse.Namespace]):
        return torch.load(path, weights_only=True)


def crafted_checkpoint(path, marker, template=None):
    """A fairseq-looking checkpoint (the template's content, if given) whose extra_state runs code."""
    state = read_own(template) if template else {"model": {}}
    state["extra_state"] = {"val_loss": 0.0, "payload": Payload(str(marker))}
    torch.save(state, path)
    return str(path)


# ---- nothing lost --------------------------------------------------------------------------------------

def test_average_refuses_an_output_that_is_one_of_its_inputs(trained, tmp_path):
    a, b = copies(trained, tmp_path, "a.pt", "b.pt")
    kept = tmp_path / "b.copy"
    shutil.copy(b, kept)
    os.symlink(b, tmp_path / "link.pt")
    for output in (b, str(tmp_path / "link.pt")):
        with pytest.raises(SystemExit) as e:
            average.main(["--inputs", a, b, "--output", output])
        assert "is also an input" in str(e.value.code) and "--output" in str(e.value.code)
        assert filecmp.cmp(b, kept, shallow=False)
    assert os.path.islink(tmp_path / "link.pt")


def test_freeze_refuses_an_output_that_is_its_input(trained, tmp_path):
    data, _ = trained
    (src,) = copies(trained, tmp_path, "in.pt")
    kept = tmp_path / "in.copy"
    shutil.copy(src, kept)
    os.symlink(src, tmp_path / "link.pt")
    for output in (src, str(tmp_path / "link.pt")):
        with pytest.raises(CheckpointFileError, match="OUT.pt .* is also an input"):
            freeze_checkpoint(src, output, data=data)
        with pytest.raises(SystemExit) as e:
            freeze_main([src, output, "--data", data])
        assert e.value.code == 1
        assert filecmp.cmp(src, kept, shallow=False)


def test_a_directory_as_output_is_refused(tmp_path):
    with pytest.raises(CheckpointFileError, match="is a directory; give a file name"):
        save_atomic({"x": 1}, str(tmp_path))


def interrupt_torch_save(monkeypatch):
    """torch.save that writes half of what it would, then fails (a crash or a full disk mid-write)."""
    real_save = torch.save

    def half_then_fail(obj, f, *args, **kwargs):
        import io
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as out:
                out.write(data[:len(data) // 2])
        else:
            f.write(data[:len(data) // 2])
            f.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_fail)


def test_a_failed_write_of_average_and_freeze_keeps_the_old_output(trained, tmp_path, monkeypatch):
    data, _ = trained
    a, b, old = copies(trained, tmp_path, "a.pt", "b.pt", "old.pt")
    kept = tmp_path / "old.copy"
    shutil.copy(old, kept)
    interrupt_torch_save(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        average.main(["--inputs", a, b, "--output", old])
    assert filecmp.cmp(old, kept, shallow=False)
    with pytest.raises(OSError, match="No space left"):
        freeze_checkpoint(a, old, data=data)
    assert filecmp.cmp(old, kept, shallow=False)
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "b.pt", "old.copy", "old.pt"]  # no temporary file left


KILLED_WRITER = """
import os, signal, sys
from posmix_fairseq.harness.checkpoint_files import write_atomic

def writer(f):
    f.write(b"partial" * 100000)
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # killed half-way through the write

write_atomic(sys.argv[1], writer)
"""


def test_a_write_killed_half_way_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "model.pt"
    torch.save({"model": {"w": torch.arange(10.0)}}, target)
    before = target.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], capture_output=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == -9, proc.stderr.decode()
    assert target.read_bytes() == before
    assert torch.equal(checkpoint_files.load(str(target))["model"]["w"], torch.arange(10.0))


def test_write_text_atomic_replaces_through_a_link_and_keeps_the_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    os.symlink(real, tmp_path / "link.json")
    write_text_atomic(str(tmp_path / "link.json"), "new")
    assert os.path.islink(tmp_path / "link.json") and real.read_text() == "new"
    with pytest.raises(CheckpointFileError, match="is also an input"):
        write_text_atomic(str(tmp_path / "link.json"), "x", inputs=[str(real)])
    assert real.read_text() == "new"


# ---- nothing run from a file ---------------------------------------------------------------------------

def test_importing_the_plugin_leaves_torch_load_weights_only(trained, tmp_path):
    """A fresh process without TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: after ``import posmix_fairseq`` a crafted
    pickle is refused by any torch.load, and fairseq's own loader reads a fairseq-train checkpoint."""
    evil = crafted_checkpoint(tmp_path / "evil.pt", tmp_path / "ran")
    child = (
        "import os, sys, torch, posmix_fairseq\n"
        "from fairseq import checkpoint_utils\n"
        "assert 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD' not in os.environ\n"
        "state = checkpoint_utils.load_checkpoint_to_cpu(sys.argv[2])\n"
        "assert state['cfg']['model'].arch == 'rposnet_iwslt_de_en'\n"
        "torch.load(sys.argv[1])\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["PYTHONPATH"] = REPO
    proc = subprocess.run([sys.executable, "-c", child, evil, os.path.join(trained[1], "checkpoint_last.pt")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode != 0 and "Weights only load failed" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "ran").exists()


def test_average_refuses_a_planted_checkpoint_it_would_not_average(trained, tmp_path):
    """--best-and-next reads every candidate's validation loss: a crafted one is refused, never run."""
    _, ckpt_dir = trained
    run = tmp_path / "run"
    run.mkdir()
    for path in average.list_checkpoints(ckpt_dir)[:2]:
        shutil.copy(path, run / os.path.basename(path))
    crafted_checkpoint(run / "checkpoint_9_99.pt", tmp_path / "ran", template=average.list_checkpoints(ckpt_dir)[0])
    with pytest.raises(SystemExit) as e:
        average.main(["--dir", str(run), "--best-and-next", "2", "--output", str(tmp_path / "avg.pt")])
    message = str(e.value.code)
    assert "checkpoint_9_99.pt: refused to load" in message and "posix.mkdir" in message, message
    assert not (tmp_path / "ran").exists() and not (tmp_path / "avg.pt").exists()


def test_freeze_refuses_a_crafted_checkpoint(trained, tmp_path):
    data, ckpt_dir = trained
    evil = crafted_checkpoint(tmp_path / "evil.pt", tmp_path / "ran",
                              template=os.path.join(ckpt_dir, "checkpoint_last.pt"))
    with pytest.raises(SystemExit) as e:
        freeze_main([evil, str(tmp_path / "out.pt"), "--data", data])
    assert e.value.code == 1
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out.pt").exists()


# ---- nothing silently wrong ----------------------------------------------------------------------------

def flip_bytes(path):
    """Overwrites the two high bytes of the first float32 of every tensor's data in the (uncompressed) zip:
    what a damaged copy looks like; those values read as about 7.7e3."""
    with zipfile.ZipFile(path) as z:
        entries = [(i.filename, i.header_offset, i.file_size) for i in z.infolist() if "/data/" in i.filename]
    with open(path, "r+b") as f:
        for name, header, size in entries:
            if size < 4:
                continue
            f.seek(header + 26)
            name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
            f.seek(header + 30 + name_len + extra_len + 2)
            f.write(bytes([0xF1, 0x45]))  # 0x45F1xxxx = 7.7e3 as float32


def test_freeze_refuses_a_checkpoint_with_damaged_tensor_data(trained, tmp_path):
    data, _ = trained
    (src,) = copies(trained, tmp_path, "damaged.pt")
    flip_bytes(src)
    with pytest.raises(CheckpointFileError, match=r"damaged.pt \(trained weights\): .* magnitude 77\d\d, above 1000"):
        freeze_checkpoint(src, str(tmp_path / "out.pt"), data=data)
    assert not (tmp_path / "out.pt").exists()


def test_non_finite_weights_are_named(tmp_path):
    with pytest.raises(CheckpointFileError, match=r"x.pt: decoder.w has 1 NaN/inf"):
        checkpoint_files.check_tensors({"encoder.w": torch.ones(3), "decoder.w": torch.tensor([1.0, float("inf")])},
                                       "x.pt")
    checkpoint_files.check_tensors({"w": torch.full((2,), 999.0), "steps": torch.tensor([10 ** 9])}, "x.pt")


def test_average_refuses_checkpoints_with_different_model_options(trained, tmp_path):
    a, b = copies(trained, tmp_path, "a.pt", "b.pt")
    state = read_own(b)
    assert isinstance(state["cfg"]["model"], argparse.Namespace) and state["cfg"]["model"].length_ratio != 2.0
    state["cfg"]["model"].length_ratio = 2.0
    torch.save(state, b)
    with pytest.raises(SystemExit) as e:
        average.main(["--inputs", a, b, "--output", str(tmp_path / "avg.pt")])
    assert "b.pt: its model option --length-ratio is 2.0" in str(e.value.code)
    assert not (tmp_path / "avg.pt").exists()
    state["cfg"]["model"].length_ratio = read_own(a)["cfg"]["model"].length_ratio
    state["cfg"]["model"].max_update = 99  # a training option, not the model's: averaging is fine
    torch.save(state, b)
    average.main(["--inputs", a, b, "--output", str(tmp_path / "avg.pt")])
    assert set(checkpoint_files.load(str(tmp_path / "avg.pt"))["model"]) == set(state["model"])


def test_posmix_average_in_a_fresh_process_compares_only_model_options(trained, tmp_path):
    """The installed command imports the package before fairseq: the posmix archs must still be registered
    to tell model options from training ones (a different --max-update does not block an average)."""
    a, b = copies(trained, tmp_path, "a.pt", "b.pt")
    state = read_own(b)
    state["cfg"]["model"].max_update = 99
    torch.save(state, b)
    entry = "import sys; from posmix_fairseq.harness.evaluation.average import cli; sys.exit(cli())"
    done = subprocess.run([sys.executable, "-c", entry, "--inputs", a, b, "--output", str(tmp_path / "avg.pt")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "avg.pt").exists()


def mean_of(paths):
    states = [read_own(p)["model"] for p in paths]
    return {k: sum(s[k].double() for s in states) / len(states) for k in states[0] if states[0][k].is_floating_point()}


def test_average_takes_fairseqs_flags_with_fairseqs_selection(trained, tmp_path, capsys):
    """fairseq's scripts/average_checkpoints.py: --inputs DIR --num-update-checkpoints N averages the N
    checkpoint_<epoch>_<updates>.pt with the highest update numbers (numerically: 12 > 10 > 8, though
    "checkpoint_1_8.pt" sorts last as text), --checkpoint-upper-bound M keeps those with at most M updates;
    --num-epoch-checkpoints reads checkpoint<epoch>.pt; names that only resemble them do not count."""
    _, ckpt_dir = trained
    # three states of one run, oldest first: updates 2, the end of epoch 1, 6
    sources = [os.path.join(ckpt_dir, n) for n in ("checkpoint_1_2.pt", "checkpoint1.pt", "checkpoint_2_6.pt")]
    run = tmp_path / "run"
    run.mkdir()
    for source, name in zip(sources, ["checkpoint_1_8.pt", "checkpoint_1_10.pt", "checkpoint_2_12.pt"]):
        shutil.copy(source, run / name)
    for source, name in zip(sources, ["checkpoint2.pt", "checkpoint10.pt", "checkpoint9.pt"]):
        shutil.copy(source, run / name)
    shutil.copy(sources[0], run / "checkpoint_best.pt")
    shutil.copy(sources[0], run / "checkpoint_3_99.pt.tmp")
    out = tmp_path / "avg.pt"

    chosen = average.main(["--inputs", str(run), "--num-update-checkpoints", "2", "--output", str(out)])
    assert [os.path.basename(c) for c in chosen] == ["checkpoint_1_10.pt", "checkpoint_2_12.pt"]
    avg = read_own(out)
    for k, v in mean_of([sources[1], sources[2]]).items():
        torch.testing.assert_close(avg["model"][k].double(), v, rtol=1e-6, atol=1e-7)
    assert avg["extra_state"] == read_own(sources[2])["extra_state"]  # the newest's, as fairseq's

    chosen = average.main(["--inputs", str(run), "--num-update-checkpoints", "2", "--checkpoint-upper-bound", "10",
                           "--output", str(out)])
    assert [os.path.basename(c) for c in chosen] == ["checkpoint_1_8.pt", "checkpoint_1_10.pt"]
    chosen = average.main(["--inputs", str(run), "--num-epoch-checkpoints", "2", "--output", str(out)])
    assert [os.path.basename(c) for c in chosen] == ["checkpoint9.pt", "checkpoint10.pt"]
    chosen = average.main(["--inputs", str(run), "--num-epoch-checkpoints", "2", "--checkpoint-upper-bound", "9",
                           "--output", str(out)])
    assert [os.path.basename(c) for c in chosen] == ["checkpoint2.pt", "checkpoint9.pt"]
    with pytest.raises(average.CommandError, match=r"2 checkpoint_<epoch>_<updates>\.pt files with at most 10 updates, "
                                                   r"but --num-update-checkpoints asks for 3"):
        average.main(["--inputs", str(run), "--num-update-checkpoints", "3", "--checkpoint-upper-bound", "10",
                      "--output", str(out)])


@pytest.mark.parametrize("args,message", [
    (["--inputs", "D", "--num-update-checkpoints", "0"], "argument --num-update-checkpoints: 0 is out of range"),
    (["--inputs", "D", "--num-epoch-checkpoints", "-2"], "argument --num-epoch-checkpoints: -2 is out of range"),
    (["--inputs", "D", "--num-update-checkpoints", "2", "--num-epoch-checkpoints", "2"], "not allowed with argument"),
    (["--inputs", "D", "--checkpoint-upper-bound", "5"], "--checkpoint-upper-bound needs --num-epoch-checkpoints"),
    (["--inputs", "D", "E", "--num-update-checkpoints", "2"], "select from one directory; --inputs gives 2 paths"),
    (["--dir", "D", "--num-update-checkpoints", "2"], "not allowed with argument|select from --inputs DIR"),
    (["--dir", "D", "--last", "0"], "argument --last: 0 is out of range"),
])
def test_average_usage_errors_exit_2_naming_the_option(args, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "D").mkdir()
    args = [str(tmp_path / a) if a in ("D", "E") else a for a in args] + ["--output", str(tmp_path / "avg.pt")]
    monkeypatch.setattr(sys, "argv", ["posmix-average", *args])
    try:
        status = average.cli()
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert re.search(message, err), err
