"""Recipes run in the environment the user has activated, and a GPU-scale recipe never trains on the CPU
without being asked: examples/common/stages.sh runs the `python` on PATH (or $PYTHON) and stops, naming
what is missing, when torch or fairseq does not import there; the stages stop a small/base/big recipe on
a host where torch sees no GPU unless DEVICE_FLAGS=--cpu."""
import os
import stat
import subprocess
import sys

import pytest

from posmix_fairseq.harness.recipes import stages as stages_module
from posmix_fairseq.harness.recipes.settings import RecipeError, resolve
from posmix_fairseq.harness.recipes.stages import Runner, Stages, check_device, run_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_SH = os.path.join(ROOT, "examples", "wmt14_en_de", "run.sh")


def fake_python(folder, body: str) -> str:
    """An executable named ``python`` in ``folder`` running ``body`` (bash) before anything else."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "python")
    with open(path, "w") as f:
        f.write(f"#!/usr/bin/env bash\n{body}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def run_sh(env, cwd):
    env = {k: v for k, v in env.items() if k != "PY" and not (k == "PYTHON" and not v)}  # PYTHON="": unset
    return subprocess.run(["bash", RUN_SH], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_recipe_runs_the_python_on_path_not_a_checkout_venv(tmp_path):
    """`python` on PATH is what runs the stages: here a stand-in that records its arguments, passing the
    environment check to the real interpreter (torch and fairseq import there)."""
    bin_dir = tmp_path / "bin"
    log = tmp_path / "calls.txt"
    fake_python(str(bin_dir), f'echo "$*" >> {log}\n'
                              'if [ "$2" = posmix_fairseq.harness.recipes.stages ]; then echo "stages ran"; exit 0; fi\n'
                              f'exec {sys.executable} "$@"')
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PLAN="1", PYTHON="")
    proc = run_sh(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stages ran"
    calls = log.read_text().splitlines()
    assert calls[0].startswith("-m posmix_fairseq.harness.environment --require torch,fairseq")
    assert "sacremoses" in calls[0].split("--require ")[1].split()[0].split(",")  # the prepare stage's Moses step
    assert calls[-1] == "-m posmix_fairseq.harness.recipes.stages"


def test_python_without_fairseq_stops_the_recipe_naming_what_is_missing(tmp_path):
    """A `python` whose fairseq raises at import (as fairseq 0.12.2 does on Python 3.11): exit 2 with the
    environment check's report and what to do; the stages never start."""
    broken = tmp_path / "broken"
    (broken / "fairseq").mkdir(parents=True)
    (broken / "fairseq" / "__init__.py").write_text("raise ImportError('this fairseq does not import')\n")
    python = fake_python(str(tmp_path / "bin"),
                         'if [ "$2" = posmix_fairseq.harness.recipes.stages ]; then echo "stages ran"; exit 0; fi\n'
                         f'PYTHONPATH={broken}:$PYTHONPATH exec {sys.executable} "$@"')
    proc = run_sh(dict(os.environ, PYTHON=python, PLAN="1"), tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "stages ran" not in proc.stdout
    assert "BROKEN   fairseq" in proc.stderr and "this fairseq does not import" in proc.stderr
    assert f"recipe: {python} cannot run the recipes" in proc.stderr
    assert "PYTHON=/path/to/its/python" in proc.stderr


def test_a_python_that_does_not_exist_is_named(tmp_path):
    proc = run_sh(dict(os.environ, PYTHON=str(tmp_path / "nowhere" / "python3")), tmp_path)
    assert proc.returncode == 2
    assert f"recipe: PYTHON={tmp_path / 'nowhere' / 'python3'}: no such command" in proc.stderr


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(stages_module, "visible_gpus", lambda: 0)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(stages_module, "visible_gpus", lambda: 2)


def test_a_gpu_scale_recipe_stops_on_a_host_without_a_gpu(no_gpu, tmp_path):
    recipe = resolve("wmt14_en_de", {"SIZE": "base", "RAW": str(tmp_path / "raw"), "OUT": str(tmp_path / "out")})
    with pytest.raises(RecipeError) as e:
        run_recipe(recipe, plan=False)
    message = str(e.value)
    assert "SIZE=base (GPUS=2) is a GPU-scale recipe: its stage 'train' runs the model on GPUs" in message
    assert "torch.cuda.device_count() == 0" in message and "DEVICE_FLAGS=--cpu" in message
    assert 'the stages before it need no GPU: STAGES="download prepare preprocess"' in message
    assert not (tmp_path / "out").exists(), "stopped before any stage ran"


@pytest.mark.parametrize("env,stages", [
    ({"SIZE": "base", "DEVICE_FLAGS": "--cpu"}, ["train", "generate"]),   # the CPU asked for
    ({"SIZE": "tiny"}, ["train"]),                                        # a CPU size
    ({"SIZE": "mini"}, ["generate"]),
    ({"SIZE": "big"}, ["download", "prepare", "preprocess"]),             # no stage runs a model
])
def test_the_cpu_runs_when_asked_for_or_when_no_model_runs(no_gpu, env, stages):
    check_device(resolve("wmt14_en_de", env), stages)


def test_generation_alone_also_needs_the_gpu(no_gpu):
    with pytest.raises(RecipeError, match="its stage 'generate' runs the model on GPUs") as e:
        check_device(resolve("wmt19_de_en", {}), ["generate", "score"])
    assert "the stages before it" not in str(e.value)


def test_a_host_with_gpus_passes_and_counts_them(two_gpus, tmp_path):
    recipe = resolve("wmt14_en_de", {"SIZE": "base", "OUT": str(tmp_path)})
    check_device(recipe, ["train"])
    stages = Stages(recipe, Runner(plan=False))
    gpus, freq, _, _ = stages.schedule()
    assert (gpus, freq) == (2, 3)  # GPA Base: 27,000 tokens = 4,500 x 2 GPUs x 3


def test_the_cpu_asked_for_trains_as_one_process(no_gpu, tmp_path):
    recipe = resolve("wmt14_en_de", {"SIZE": "base", "OUT": str(tmp_path), "DEVICE_FLAGS": "--cpu"})
    gpus, freq, _, _ = Stages(recipe, Runner(plan=False)).schedule()
    assert (gpus, freq) == (1, 6)
