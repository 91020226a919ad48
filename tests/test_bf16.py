"""``--bf16`` without torch_xla (posmix_fairseq.fairseq_patches, fairseq_bf16): fairseq 0.12 turns ``--bf16`` into
``--tpu``, so ``fairseq-train --bf16`` dies asking torch_xla for a device, and ``fairseq-generate --bf16``
decodes in fp32. Here the real ``fairseq-train --cpu --bf16`` (the console entry point, in a child process:
``cli_main`` -> ``call_main`` -> ``Trainer``, the route a CUDA host takes) trains a tiny rPosNet in bf16,
``fairseq-generate --bf16`` decodes that checkpoint with every module's weights in bf16, the multi-GPU
route spawns with ``torch.multiprocessing`` (not torch_xla's ``xmp.spawn``), and where torch_xla is
installed (a fake module) or ``--tpu`` is given, fairseq's own behaviour is kept.

Fails without the correction: the training child exits with ``'NoneType' object has no attribute
'xla_device'``; the generation sees fp32 weights only; the multi-GPU route calls ``xmp.spawn``.
"""
import importlib.machinery
import math
import os
import re
import subprocess
import sys
import types

import pytest
import torch
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import posmix_fairseq
from helpers import TINY_SIZES, binarized_toy_corpus

ARCH = ["--arch", "rposnet_iwslt_de_en"]
TEST_SENTENCES = 10


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("bf16"), sizes={"train": 200, "valid": 20,
                                                                        "test": TEST_SENTENCES})


# fairseq_cli.train's console entry point, recording the dtypes of the weights every called module
# holds itself (fairseq saves checkpoints in fp32 whatever the training dtype: the live model is asked)
RECORDING_TRAIN = """
import torch
seen = set()
torch.nn.modules.module.register_module_forward_pre_hook(
    lambda module, inputs: seen.update(str(p.dtype) for p in module.parameters(recurse=False)))
from fairseq_cli.train import cli_main
cli_main()
print("trained weights:", sorted(seen))
"""


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    """fairseq-train --cpu --bf16 through fairseq_cli.train's console entry point, in a fresh process."""
    save_dir = str(tmp_path_factory.mktemp("bf16_checkpoints"))
    cmd = [sys.executable, "-c", RECORDING_TRAIN, data,
           "--user-dir", posmix_fairseq.USER_DIR, "--task", "translation", "--optimizer", "adam", "--lr", "0.001",
           "--max-tokens", "1500", "--max-update", "6", "--save-dir", save_dir, "--no-progress-bar",
           "--log-format", "simple", "--log-interval", "1", "--num-workers", "0", "--seed", "1", "--cpu",
           "--bf16", *ARCH, *TINY_SIZES]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return save_dir, done


def test_fairseq_train_bf16_without_torch_xla_trains_in_bfloat16(trained):
    save_dir, done = trained
    log = done.stdout + done.stderr
    assert "Traceback" not in log and "xla_device" not in log, log[-3000:]
    assert done.returncode == 0, log[-3000:]
    state = torch.load(os.path.join(save_dir, "checkpoint_last.pt"), map_location="cpu", weights_only=False)
    assert state["cfg"]["common"]["bf16"] and not state["cfg"]["common"]["tpu"]
    assert "trained weights: ['torch.bfloat16']" in done.stdout, done.stdout[-3000:]
    losses = [float(x) for x in re.findall(r"\| train(?:_inner)? \|.*? loss ([-\d.naif]+)", log)]
    assert losses and all(math.isfinite(x) for x in losses), losses
    assert state["optimizer_history"][-1]["num_updates"] == 6


def generate_recording_dtypes(data, checkpoint, capsys, *extra):
    """fairseq-generate in this process; returns (hypothesis lines, dtypes of the weights every called
    module holds itself)."""
    from fairseq_cli import generate
    parser = options.get_generation_parser()
    args = options.parse_args_and_arch(parser, [
        data, "--user-dir", posmix_fairseq.USER_DIR, "--path", checkpoint, "--beam", "2", "--max-len-a", "0",
        "--max-len-b", "12", "--max-tokens", "2000", "--gen-subset", "test", "--cpu", "--required-batch-size-multiple",
        "1", *extra])
    seen = set()

    def record(module, inputs):
        seen.update(p.dtype for p in module.parameters(recurse=False) if p.is_floating_point())

    handle = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        capsys.readouterr()
        generate.main(args)
    finally:
        handle.remove()
    hyps = [line for line in capsys.readouterr().out.splitlines() if line.startswith("H-")]
    return hyps, seen


def test_fairseq_generate_bf16_decodes_in_bfloat16(data, trained, capsys):
    save_dir, done = trained
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    checkpoint = os.path.join(save_dir, "checkpoint_last.pt")
    hyps, dtypes = generate_recording_dtypes(data, checkpoint, capsys, "--bf16")
    assert dtypes == {torch.bfloat16}, dtypes
    assert len(hyps) == TEST_SENTENCES
    assert all(math.isfinite(float(line.split("\t")[1])) for line in hyps), hyps
    # the control: without --bf16 the same checkpoint decodes in fp32 (the hook sees what is used)
    hyps32, dtypes32 = generate_recording_dtypes(data, checkpoint, capsys)
    assert dtypes32 == {torch.float32}, dtypes32
    assert len(hyps32) == TEST_SENTENCES


def training_args(data, *extra):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [data, "--user-dir", posmix_fairseq.USER_DIR, "--task", "translation",
                                                *ARCH, *TINY_SIZES, *extra])


def test_multi_gpu_bf16_spawns_torch_processes_not_xla(data, monkeypatch):
    """Two GPUs (simulated by the device count): call_main takes torch.multiprocessing.spawn with a
    config that says bf16 and not tpu; the children receive that config."""
    from fairseq.distributed import utils as distributed_utils
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    spawned = []
    monkeypatch.setattr(torch.multiprocessing, "spawn", lambda fn, args, nprocs, join: spawned.append((args, nprocs)))
    cfg = convert_namespace_to_omegaconf(training_args(data, "--bf16", "--distributed-world-size", "2"))
    distributed_utils.call_main(cfg, lambda cfg: None)
    assert len(spawned) == 1
    (_, child_cfg, _), nprocs = spawned[0]
    assert nprocs == 2
    assert child_cfg.distributed_training.distributed_init_method.startswith("tcp://localhost:")
    assert child_cfg.common.bf16 and not child_cfg.common.tpu and not child_cfg.distributed_training.tpu


def test_bf16_correction_only_without_torch_xla_and_without_tpu_flag(data, monkeypatch):
    assert training_args(data, "--bf16").tpu is False
    assert training_args(data, "--memory-efficient-bf16").tpu is False
    assert training_args(data, "--bf16", "--tpu").tpu is True  # asked for: fairseq's route
    fake = types.ModuleType("torch_xla")
    fake.__spec__ = importlib.machinery.ModuleSpec("torch_xla", None)
    monkeypatch.setitem(sys.modules, "torch_xla", fake)
    assert training_args(data, "--bf16").tpu is True  # a TPU host: fairseq's --bf16 => --tpu is kept
