"""The plugin under fairseq's own training machinery: data-parallel training over two processes,
resuming from ``checkpoint_last.pt``, activation checkpointing, and the contract of PyTorch's
DistributedDataParallel (every parameter gets a gradient, none is registered twice).

Everything goes through fairseq's CLI code path (``tests/fairseq_probe.py`` runs
``fairseq_cli.train`` exactly as the ``fairseq-train`` console script does and records each
update's loss and gradient norm at full precision, and the trained parameters of every rank) and
through arch names, so these tests do not depend on the plugin's internal classes.
"""
import os
import socket
import subprocess
import sys

import pytest
import torch

import posmix_fairseq
from conftest import ALL_CONFIGS, TINY, build_model, random_batch
from posmix_fairseq.harness.testing import distinct_configs
from fairseq_probe import train_and_record
from helpers import binarized_toy_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(posmix_fairseq.USER_DIR)

# rPosNet: its learned absolute table n~ is shared by all layers of a side; PosNet-Attn: its
# position kernels are shared by all self-attention layers of a side.
DISTRIBUTED_ARCHS = ["rposnet_iwslt_de_en", "posnet_attn_iwslt_de_en"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("machinery"), sizes={"train": 200, "valid": 20, "test": 10})


ADAM = ["--optimizer", "adam", "--lr", "0.002", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "3"]
# Adam divides by the root of the squared gradients: a parameter whose exact gradient is 0 (the
# key bias of softmax attention) moves by +-lr on rounding noise, which then depends on the
# summation order (thread count, all-reduce vs accumulation). Plain SGD keeps noise at noise size.
SGD = ["--optimizer", "sgd", "--lr", "0.3", "--momentum", "0.9", "--lr-scheduler", "fixed"]


def train_flags(data, save_dir, arch, updates, *extra, optimizer=ADAM):
    """Fixed batches of 8 sentences (--batch-size, no rounding to a multiple of 8), no validation,
    a log line per update."""
    return [data, "--user-dir", posmix_fairseq.USER_DIR, "--task", "translation", "--arch", arch, *TINY,
            *optimizer, "--batch-size", "8", "--required-batch-size-multiple", "1", "--max-update", str(updates),
            "--seed", "3", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "1", "--no-progress-bar", "--save-dir", save_dir, *extra]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_distributed(flags, out_dir, world_size=2):
    """``world_size`` fairseq-train processes on this machine (loopback only), one per rank.

    On CPU fairseq 0.12.3 cannot start the workers itself: it spawns one per CUDA device (none
    here), and its torchrun route sets ``device_id = rank % torch.cuda.device_count()``. So each
    rank is started explicitly (``--distributed-rank``, ``--distributed-no-spawn``) and meets the
    others at ``--distributed-init-method tcp://127.0.0.1:PORT`` over gloo. Gradients are
    all-reduced by fairseq's ``legacy_ddp``: its default ``pytorch_ddp`` passes
    ``device_ids=[device_id]`` to DistributedDataParallel, which PyTorch rejects for CPU modules.
    """
    init = f"tcp://127.0.0.1:{free_port()}"
    env = dict(os.environ, OMP_NUM_THREADS="1",  # 2 workers, 2 cores
               PYTHONPATH=os.pathsep.join([REPO, HERE, os.environ.get("PYTHONPATH", "")]))
    procs, records = [], []
    for rank in range(world_size):
        record = os.path.join(out_dir, f"rank{rank}.pt")
        cmd = [sys.executable, os.path.join(HERE, "fairseq_probe.py"), record, *flags,
               "--distributed-world-size", str(world_size), "--distributed-rank", str(rank),
               "--distributed-no-spawn", "--distributed-init-method", init, "--distributed-backend", "gloo",
               "--ddp-backend", "legacy_ddp"]
        log = open(os.path.join(out_dir, f"rank{rank}.log"), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        records.append(record)
    for proc, log in procs:
        try:
            proc.wait(timeout=300)
        finally:
            log.close()
    for rank, (proc, _) in enumerate(procs):
        if proc.returncode != 0:
            with open(os.path.join(out_dir, f"rank{rank}.log")) as f:
                pytest.fail(f"rank {rank} exited with {proc.returncode}:\n{f.read()[-4000:]}")
    return [torch.load(r, weights_only=False) for r in records]


def saved_params(save_dir, names):
    """The parameters named ``names`` in ``save_dir/checkpoint_last.pt`` (it also holds buffers)."""
    state = torch.load(os.path.join(save_dir, "checkpoint_last.pt"), map_location="cpu", weights_only=False)
    assert set(names) <= state["model"].keys()
    return {name: state["model"][name] for name in names}


def assert_same_params(a, b, atol, what, rtol=0.0):
    """Same names, and every tensor within ``atol + rtol * max|b|`` (rtol: relative to the
    tensor's largest entry, as fp32 sums of many terms are exact to that scale, not per entry)."""
    assert a.keys() == b.keys(), what
    for name in a:
        diff, scale = (a[name] - b[name]).abs().max().item(), b[name].abs().max().item()
        assert diff <= atol + rtol * scale, f"{what}: {name} differs by {diff:.3g} (largest entry {scale:.3g})"


@pytest.mark.parametrize("arch", DISTRIBUTED_ARCHS)
def test_two_processes_equal_one_process_with_update_freq_2(corpus, tmp_path, arch):
    """Two data-parallel workers vs one process accumulating two batches per update.

    Why both runs see the same sentences in every update: with fixed batches (``--batch-size 8
    --required-batch-size-multiple 1``) fairseq makes the same list of batches in both runs
    (same data, same ``--seed``), shuffles it with ``seed + epoch`` in every process, then gives
    worker r the batches r, r + W, r + 2W, ... (``ShardedIterator``). One process with
    ``--update-freq 2`` groups consecutive batches (2k, 2k + 1) into update k; with two workers,
    update k is rank 0's batch 2k and rank 1's batch 2k + 1. The gradient is the sum over both
    batches divided by their total sample size in both cases (fairseq undoes DDP's averaging),
    dropout is 0, and SGD with momentum sees the same gradient: same loss and gradient norm in
    every update and the same parameters at the end, up to fp32 summation order (the workers run
    one thread each, the reference two).

    Fails when (mutation tried) the all-reduce is skipped (LegacyDistributedDataParallel.
    all_reduce_grads made a no-op): the losses differ from update 2 on (tried with Adam and a
    warmup whose first update has learning rate 0: from update 3 on). It would also fail if the reference lost
    ``--update-freq 2`` (other sentences in every update).
    """
    updates = 4
    single_dir, dist_dir = str(tmp_path / "single"), str(tmp_path / "dist")
    os.makedirs(dist_dir)
    single = train_and_record(train_flags(corpus, single_dir, arch, updates, "--update-freq", "2", optimizer=SGD))
    ranks = run_distributed(train_flags(corpus, dist_dir, arch, updates, optimizer=SGD), dist_dir)

    assert [r["rank"] for r in ranks] == [0, 1]
    assert len(single["losses"]) == updates
    for r in ranks:
        assert r["losses"] == pytest.approx(single["losses"], rel=1e-5, abs=0)
        assert r["grad_norms"] == pytest.approx(single["grad_norms"], rel=1e-4, abs=0)
    # the all-reduced gradients keep the replicas identical, shared tables included
    for name, p in ranks[0]["params"].items():
        assert torch.equal(p, ranks[1]["params"][name]), f"ranks differ in {name}"
    assert_same_params(ranks[0]["params"], single["params"], 1e-5, "2 workers vs --update-freq 2")
    # what fairseq saved is what was trained
    assert_same_params(saved_params(dist_dir, ranks[0]["params"]), ranks[0]["params"], 0, "rank 0's checkpoint")
    assert_same_params(saved_params(single_dir, single["params"]), single["params"], 0, "the reference's checkpoint")


def test_resume_from_checkpoint_last_equals_straight_run(corpus, tmp_path):
    """3 updates, stop, resume from ``checkpoint_last.pt`` to 6 == 6 updates straight.

    The stop falls inside the first epoch, so the resumed run must restore the data iterator's
    position, Adam's moments and the inverse-sqrt schedule; dropout is on (0.1): fairseq seeds
    every update with ``seed + num_updates``, so the resumed updates draw the same masks.
    Fails when (mutation tried) the resumed run passes ``--reset-optimizer``: neither Adam's
    moments nor the update count come back, and it trains 6 updates instead of 3.
    """
    arch, half = "rposnet_iwslt_de_en", 3
    resumed_dir, straight_dir = str(tmp_path / "resumed"), str(tmp_path / "straight")
    dropout = ["--dropout", "0.1", "--attention-dropout", "0.1"]
    first = train_and_record(train_flags(corpus, resumed_dir, arch, half, *dropout))
    assert os.path.exists(os.path.join(resumed_dir, "checkpoint_last.pt"))
    second = train_and_record(train_flags(corpus, resumed_dir, arch, 2 * half, *dropout))
    straight = train_and_record(train_flags(corpus, straight_dir, arch, 2 * half, *dropout))

    assert len(first["losses"]) == half and len(second["losses"]) == half  # it resumed at update 3
    assert first["losses"] + second["losses"] == pytest.approx(straight["losses"], rel=1e-6, abs=0)
    assert first["grad_norms"] + second["grad_norms"] == pytest.approx(straight["grad_norms"], rel=1e-5, abs=0)
    assert_same_params(second["params"], straight["params"], 1e-6, "resumed vs straight")
    assert_same_params(saved_params(resumed_dir, straight["params"]), saved_params(straight_dir, straight["params"]),
                       1e-6, "checkpoint_last.pt")


def tiny_train_batch(d):
    """Left-padded sources (fairseq's default), right-padded previous output tokens."""
    src, src_lengths = random_batch(d, [7, 3, 6, 1], seed=11)
    prev, _ = random_batch(d, [5, 6, 2, 4], seed=12, left_pad=False)
    return src, src_lengths, prev


def loss_and_grads(model, src, src_lengths, prev, weights):
    model.zero_grad()
    logits, _ = model(src, src_lengths, prev)
    not_pad = prev.ne(model.decoder.dictionary.pad()).unsqueeze(-1)
    (logits * weights * not_pad).sum().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch", ["rposnet_iwslt_de_en", "lstmpe_iwslt_de_en", "rpehead_iwslt_de_en"])
def test_activation_checkpointing_gives_the_same_gradients(arch):
    """fairseq's ``--checkpoint-activations`` re-runs every layer's forward during backward; the
    re-run must see the positions of the forward it repeats (no state may survive between
    forward calls). rPosNet reads target positions in every decoder layer; LSTM-PE and RPEHead
    are position encodings that use the position context. Same seed, same batch, train mode,
    dropout 0: same outputs and gradients.

    Fails when: the flag is not applied (no layer wrapped by fairseq's checkpoint_wrapper), or
    the recompute sees other positions or padding than the forward (mutation tried: the decoder
    re-published the positions of the rows reversed after its forward: rPosNet's gradients
    differ by 0.74).
    """
    flags = ["--arch", arch]
    reference, d = build_model(flags, seed=5)
    checkpointed, _ = build_model(flags + ["--checkpoint-activations"], seed=5)
    assert any(hasattr(m, "precheckpoint_forward") for m in checkpointed.modules())  # fairseq wrapped the layers
    assert not any(hasattr(m, "precheckpoint_forward") for m in reference.modules())
    assert_same_params(dict(reference.named_parameters()), dict(checkpointed.named_parameters()), 0, "init")
    reference.train(), checkpointed.train()
    src, src_lengths, prev = tiny_train_batch(d)
    weights = torch.randn(*prev.shape, len(d), generator=torch.Generator().manual_seed(13))
    out_ref, grads_ref = loss_and_grads(reference, src, src_lengths, prev, weights)
    out_ckpt, grads_ckpt = loss_and_grads(checkpointed, src, src_lengths, prev, weights)
    assert torch.allclose(out_ref, out_ckpt, rtol=1e-5, atol=1e-6)
    assert grads_ref.keys() == grads_ckpt.keys() == {n for n, p in reference.named_parameters() if p.requires_grad}
    # the recompute may sum in another order: fp32 tolerance (a wrong position changes them at 1e-1)
    assert_same_params(grads_ref, grads_ckpt, 1e-6, "gradients with --checkpoint-activations", rtol=1e-5)


@pytest.mark.parametrize("arch", [
    "rposnet_iwslt_de_en", "lstmpe_iwslt_de_en", "rpehead_iwslt_de_en"])
def test_activation_checkpointing_with_another_forward_before_backward(arch):
    """Forward batch A, forward batch B (same shapes, other padding: the rows reversed), then
    backward A: the recompute of A must still see A's positions (e.g. a criterion that runs the
    model twice, R-Drop style). Same gradients as A alone without checkpointing.
    Fails when positions are state left by the last forward call."""
    flags = ["--arch", arch]
    reference, d = build_model(flags, seed=5)
    checkpointed, _ = build_model(flags + ["--checkpoint-activations"], seed=5)
    reference.train(), checkpointed.train()
    src, src_lengths, prev = tiny_train_batch(d)
    weights = torch.randn(*prev.shape, len(d), generator=torch.Generator().manual_seed(13))
    _, grads_ref = loss_and_grads(reference, src, src_lengths, prev, weights)
    checkpointed.zero_grad()
    logits, _ = checkpointed(src, src_lengths, prev)
    checkpointed(src.flip(0), src_lengths.flip(0), prev.flip(0))  # batch B, never backpropagated
    (logits * weights * prev.ne(d.pad()).unsqueeze(-1)).sum().backward()
    grads = {n: p.grad for n, p in checkpointed.named_parameters() if p.grad is not None}
    assert_same_params(grads_ref, grads, 1e-6, "gradients of A after a forward of B", rtol=1e-5)


@pytest.mark.parametrize("arch", DISTRIBUTED_ARCHS + ["aposnet_wmt_en_de", "t5bias_iwslt_de_en"])
def test_no_parameter_is_registered_twice(arch):
    """A table shared by layers must be one parameter registered once, so that data-parallel
    training all-reduces it once: no name aliases another parameter, and no two state-dict
    entries share storage (a second registration would be saved, and loaded, twice).
    Fails when a shared table is also registered as a submodule of each layer that uses it."""
    model, _ = build_model(["--arch", arch])
    with_aliases = list(model.named_parameters(remove_duplicate=False))
    assert len(with_aliases) == len(list(model.named_parameters())), \
        sorted(n for n, p in with_aliases if sum(q is p for _, q in with_aliases) > 1)
    storages = {}
    for name, tensor in model.state_dict().items():
        if tensor.numel():
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
            assert key not in storages, f"{name} and {storages[key]} are the same tensor"
            storages[key] = name


@pytest.mark.parametrize("name", distinct_configs())
def test_every_parameter_gets_a_gradient(name):
    """PyTorch's DistributedDataParallel (fairseq's default --ddp-backend on GPUs) requires every
    parameter to take part in the loss, unless --find-unused-parameters (slower) is given. One
    training step of every config must give every parameter a gradient.
    Fails when a config builds a parameter its forward never reads (rposnet_cross once built an
    unused source-position table in the decoder)."""
    model, d = build_model(ALL_CONFIGS[name], seed=1)
    model.train()
    src, src_lengths, prev = tiny_train_batch(d)
    logits, _ = model(src, src_lengths, prev)
    logits.float().sum().backward()
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not unused, f"parameters without a gradient: {unused}"


def test_fully_sharded_is_refused_at_start_naming_the_backends_that_work(corpus, tmp_path):
    """fairseq's FSDP (--ddp-backend fully_sharded, through fairscale) has never trained a posmix model: the
    fairseq-train entry point stops before building anything, naming the backends the DDP tests cover; the
    same command with one of them trains."""
    from posmix_fairseq.harness import pipeline

    def fairseq_train(save_dir, backend):  # the fairseq-train console script's code path, in a fresh process
        flags = train_flags(corpus, str(save_dir), "rposnet_iwslt_de_en", 1, "--ddp-backend", backend)
        return subprocess.run([sys.executable, "-m", "fairseq_cli.train", *flags], capture_output=True, text=True,
                              env=pipeline.environment(), timeout=300)

    refused = fairseq_train(tmp_path / "fsdp", "fully_sharded")
    assert refused.returncode != 0
    assert ("--ddp-backend fully_sharded (fairseq's FSDP, through fairscale) is not supported by posmix models; use "
            "pytorch_ddp (alias c10d, the default) or legacy_ddp (alias no_c10d)") in refused.stderr, refused.stderr[-2000:]
    assert "fairscale with: pip install" not in refused.stderr  # stopped before fairseq's FSDP wrapper is entered
    assert not os.path.exists(tmp_path / "fsdp" / "checkpoint_last.pt")
    trained = fairseq_train(tmp_path / "ddp", "legacy_ddp")
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert os.path.exists(tmp_path / "ddp" / "checkpoint_last.pt")
