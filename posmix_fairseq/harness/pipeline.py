"""The one pipeline driver: preprocess -> train -> freeze -> generate -> score.

Each stage is a function that takes explicit paths and runs the real command a user runs
(``fairseq-preprocess``, ``fairseq-train``, ``posmix-freeze``, ``fairseq-generate``,
``posmix-score``) as ``python -m MODULE`` in a child process with this checkout's package on the path. ``*_command`` builds a stage's command line (the recipes'
``PLAN=1`` prints them); the stage function runs it. A failing command raises :class:`StepFailed` with
its exit status and the tail of its log. Relative paths are the caller's: every path given to a stage
is made absolute against the current directory before a command sees it.

Who calls it: the recipes' stages (``harness/recipes/stages.py``), ``posmix-reproduce``, the main job
(``scripts/run_pipeline.py``), the GPU benchmark's training and quality sections (with their own
launcher, ``launcher=``) and the tests' end-to-end helpers (in this process, ``in_process=True``).
"""
import os
import runpy
import subprocess
import sys
from typing import Callable, Iterable, List, Optional, Sequence

from .command import write_atomic

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER_DIR = os.path.join(PACKAGE_ROOT, "posmix_fairseq")

#: posmix-freeze's exit status for a model with no position-only energy (nothing to freeze): neither a usage
#: error (2) nor a failure (1), so a driver can skip such a system and still stop on real errors
NOTHING_TO_FREEZE = 3


class StepFailed(SystemExit):
    """A stage's command exited non-zero: ``code`` is its exit status, the message its log's tail."""

    def __init__(self, returncode: int, message: str):
        super().__init__(message)
        self.returncode = returncode


def module_command(module: str, *args) -> List[str]:
    return [sys.executable, "-m", module, *[str(a) for a in args]]


def environment(extra: Optional[dict] = None) -> dict:
    """The child's environment: this checkout first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **(extra or {}))


def _abs(path) -> str:
    return os.path.abspath(str(path))


def _tail(path: Optional[str], text: str = "") -> str:
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    return text[-3000:]


def run(cmd: Sequence[str], log: Optional[str] = None, stdout: Optional[str] = None,
        on_line: Optional[Callable[[str], None]] = None, env: Optional[dict] = None,
        in_process: bool = False) -> str:
    """Runs one command. ``stdout``: the command's standard output goes to that file (fairseq-generate's
    output), its standard error to ``log`` or the caller's. Otherwise both go to ``log`` (and to
    ``on_line``, line by line) and are returned. ``in_process``: a ``python -m fairseq_cli.X`` command runs
    in this process (the tests' fast path; same arguments, same code)."""
    cmd = [str(c) for c in cmd]
    if in_process:
        return _run_in_process(cmd)
    full_env = environment(env)
    log, stdout = (_abs(p) if p else None for p in (log, stdout))
    for path in (log, stdout):
        if path:
            os.makedirs(os.path.dirname(path), exist_ok=True)
    if stdout:
        def write(out):  # into a temporary file renamed over ``stdout`` once the command succeeded
            with open(log or os.devnull, "w", encoding="utf-8") as err:
                proc = subprocess.run(cmd, stdout=out, stderr=err if log else None, env=full_env)
            if proc.returncode != 0:
                raise StepFailed(proc.returncode, f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                                 + (f"--- {log} ---\n{_tail(log)}" if log else ""))

        write_atomic(stdout, write)
        return ""
    lines: List[str] = []
    sink = open(log, "w", encoding="utf-8") if log else None
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env, text=True)
        for line in proc.stdout:
            lines.append(line)
            if sink:
                sink.write(line)
                sink.flush()
            if on_line:
                on_line(line)
        rc = proc.wait()
    finally:
        if sink:
            sink.close()
    output = "".join(lines)
    if rc != 0:
        raise StepFailed(rc, f"command failed ({rc}): {' '.join(cmd)}\n"
                         + (f"--- {log} ---\n" if log else "") + _tail(None, output))
    return output


def _run_in_process(cmd: List[str]) -> str:
    if cmd[:2] != [sys.executable, "-m"]:
        raise ValueError(f"in_process runs 'python -m MODULE' commands only, not {cmd[0]}")
    module, argv = cmd[2], cmd[3:]
    saved = sys.argv
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise StepFailed(e.code if isinstance(e.code, int) else 1, f"command failed: {' '.join(cmd)}: {e.code}")
    finally:
        sys.argv = saved
    return ""


# ---- the stages -----------------------------------------------------------------------------------

def preprocess_command(src: str, tgt: str, destdir, trainpref=None, validpref=None, testpref=None,
                       joined: bool = True, srcdict=None, tgtdict=None, workers: int = 1,
                       launcher: Optional[List[str]] = None) -> List[str]:
    """fairseq-preprocess: raw (tokenised) text prefixes -> binarized data in ``destdir``."""
    cmd = (launcher or module_command("fairseq_cli.preprocess")) + ["--source-lang", src, "--target-lang", tgt]
    for flag, prefix in (("--trainpref", trainpref), ("--validpref", validpref), ("--testpref", testpref)):
        if prefix:
            cmd += [flag, _abs(prefix)]
    cmd += ["--destdir", _abs(destdir), "--workers", str(workers)]
    if srcdict:
        cmd += ["--srcdict", _abs(srcdict)]
    if tgtdict:
        cmd += ["--tgtdict", _abs(tgtdict)]
    if joined and not (srcdict or tgtdict):
        cmd.append("--joined-dictionary")
    return cmd


def train_command(data, save_dir, flags: Iterable[str], launcher: Optional[List[str]] = None) -> List[str]:
    """fairseq-train with this plugin (``--user-dir``) on ``data``, checkpoints in ``save_dir`` (None: flags
    decide, e.g. ``--no-save``)."""
    cmd = (launcher or module_command("fairseq_cli.train")) + [_abs(data), "--user-dir", USER_DIR]
    if save_dir is not None:
        cmd += ["--save-dir", _abs(save_dir)]
    return cmd + [str(f) for f in flags]


def freeze_command(checkpoint, output, flags: Iterable[str] = ()) -> List[str]:
    """posmix-freeze: a trained aPosNet/rPosNet checkpoint -> its search-time model (GPA Sections 4.1-4.2)."""
    return module_command("posmix_fairseq.harness.freeze", _abs(checkpoint), _abs(output), *flags)


def generate_command(data, checkpoint, flags: Iterable[str] = (), gen_subset: str = "test",
                     launcher: Optional[List[str]] = None) -> List[str]:
    """fairseq-generate with this plugin. Everything not in ``flags`` keeps fairseq-generate's defaults
    (beam 5, max-len-a 0, max-len-b 200), except ``--required-batch-size-multiple 1``: with the default
    of 8, fairseq 0.12.3 silently skips sentences (fairseq issue #5351)."""
    return (launcher or module_command("fairseq_cli.generate")) + [
        _abs(data), "--user-dir", USER_DIR, "--path", _abs(checkpoint), "--gen-subset", gen_subset,
        "--required-batch-size-multiple", "1", *[str(f) for f in flags]]


def score_command(gen_outputs: Sequence, names: Sequence[str], ref, baseline=None, baseline_name: str = "",
                  flags: Iterable[str] = ()) -> List[str]:
    """posmix-score: the systems' fairseq-generate outputs against the raw references; with ``baseline``, every
    other system gets paired significance against it (and each its 95% interval)."""
    cmd = module_command("posmix_fairseq.harness.evaluation.score", *[_abs(g) for g in gen_outputs])
    if baseline:
        cmd += ["--baseline", _abs(baseline)]
    cmd += ["--names", *names, *([baseline_name] if baseline else []), "--ref", _abs(ref)]
    return cmd + [str(f) for f in flags]


def preprocess(src, tgt, destdir, trainpref=None, validpref=None, testpref=None, joined=True, srcdict=None,
               tgtdict=None, workers=1, log=None, in_process=False) -> str:
    run(preprocess_command(src, tgt, destdir, trainpref, validpref, testpref, joined, srcdict, tgtdict, workers),
        log=log, in_process=in_process)
    return _abs(destdir)


def train(data, save_dir, flags, log=None, on_line=None, in_process=False, env=None) -> str:
    return run(train_command(data, save_dir, flags), log=log, on_line=on_line, in_process=in_process, env=env)


def freeze(checkpoint, output, log=None, flags=()) -> bool:
    """posmix-freeze; False when the model has no position-only energy (nothing to freeze)."""
    try:
        run(freeze_command(checkpoint, output, flags), log=log)
    except StepFailed as e:
        if e.returncode == NOTHING_TO_FREEZE:
            return False
        raise
    return True


def generate(data, checkpoint, output, flags=(), gen_subset="test", log=None) -> str:
    """fairseq-generate's output in ``output``; returns that path."""
    run(generate_command(data, checkpoint, flags, gen_subset), stdout=output, log=log)
    return _abs(output)


def score(gen_outputs, names, ref, baseline=None, baseline_name="", flags=(), log=None) -> str:
    """posmix-score; returns its printed table."""
    return run(score_command(gen_outputs, names, ref, baseline, baseline_name, flags), log=log)


def hypotheses(generate_out) -> dict:
    """id -> the H line's hypothesis as fairseq-generate printed it (subword tokens)."""
    hyps = {}
    with open(generate_out, encoding="utf-8") as f:
        for line in f:
            if line.startswith("H-"):
                idx, _, text = line.rstrip("\n").split("\t", 2)
                hyps[int(idx[2:])] = text
    return hyps
