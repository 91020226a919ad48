"""Data-parallel training with ``--checkpoint-activations`` of every config whose layers share a
parameter (rPosNet's and aPosNet's tables n~, PosNet-Attn's kernels, T5/AT5 bucket tables, ...).

fairseq's default ``--ddp-backend pytorch_ddp`` wraps the model as
``ModuleProxyWrapper(DistributedDataParallel(model, find_unused_parameters=False))`` (on a GPU, with
``device_ids``, which PyTorch refuses for CPU modules); these tests build exactly that wrapper over a
gloo group on the CPU. Reentrant activation checkpointing recomputes each layer in the backward
pass; a parameter that the layers read directly then reaches DistributedDataParallel once per
layer and it raises "Expected to mark a variable ready only once".

The configs are found by inspecting the built models (a parameter used while more than one layer
runs), not listed by hand.
"""
import datetime
import os
from collections import defaultdict

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fairseq.distributed import LegacyDistributedDataParallel, ModuleProxyWrapper
from torch.nn.parallel import DistributedDataParallel
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from conftest import ALL_CONFIGS, build_model, random_batch
from posmix_fairseq.core.shared_parameters import SharedParameters

CHECKPOINTED = ["--checkpoint-activations"]
SEED = 7
WORLD_SIZE = 2


def layers_of(model):
    return [(f"{side}.layers.{i}", layer) for side in ("encoder", "decoder")
            for i, layer in enumerate(getattr(model, side).layers)]


class ParameterUses(TorchFunctionMode):
    """Records which layers were running whenever a parameter was an argument of a torch function."""

    def __init__(self, model):
        super().__init__()
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.running, self.users = [], defaultdict(set)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.running:
            for value in tree_flatten((args, kwargs or {}))[0]:
                if id(value) in self.names:
                    self.users[self.names[id(value)]].add(self.running[-1])
        return func(*args, **(kwargs or {}))


def parameters_shared_across_layers(model, d):
    """The names of the parameters that more than one layer reads in a training forward."""
    uses = ParameterUses(model)
    handles = []

    def leave(module, args, output):
        uses.running.pop()

    for name, layer in layers_of(model):
        handles.append(layer.register_forward_pre_hook(lambda module, args, name=name: uses.running.append(name)))
        handles.append(layer.register_forward_hook(leave))
    try:
        with uses:
            src, src_lengths, prev, weights = batch(d)
            model(src, src_lengths, prev)
    finally:
        for handle in handles:
            handle.remove()
    return sorted(name for name, layers in uses.users.items() if len(layers) > 1)


def batch(d):
    """Four sentences (left-padded sources, right-padded previous outputs) and the loss weights."""
    src, src_lengths = random_batch(d, [7, 3, 6, 2], seed=11)
    prev, _ = random_batch(d, [5, 6, 2, 4], seed=12, left_pad=False)
    weights = torch.randn(*prev.shape, len(d), generator=torch.Generator().manual_seed(13))
    return src, src_lengths, prev, weights


def half_loss(model, d, half):
    """The loss of the ``half``-th two sentences: a weighted sum of the non-padding logits."""
    src, src_lengths, prev, weights = (t[2 * half:2 * half + 2] for t in batch(d))
    logits, _ = model(src, src_lengths, prev)
    return (logits * weights * prev.ne(d.pad()).unsqueeze(-1)).sum()


def gradients(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def shared_configs():
    """{config: the parameters its layers share} over every arch and extra config of conftest."""
    found = {}
    for name, flags in ALL_CONFIGS.items():
        model, d = build_model(flags, seed=SEED)
        model.train()
        shared = parameters_shared_across_layers(model, d)
        if shared:
            found[name] = shared
    return found


#: fairseq's --ddp-backend values as it wraps the model (fully_sharded needs fairscale, not installed here)
BACKENDS = {
    "pytorch_ddp": lambda model: ModuleProxyWrapper(DistributedDataParallel(model, find_unused_parameters=False)),
    "legacy_ddp": lambda model: ModuleProxyWrapper(LegacyDistributedDataParallel(model, dist.group.WORLD)),
}


def _rank(rank, init_file, configs, result_dir):
    """One data-parallel worker: each config under each backend's wrapper with checkpointed layers,
    its half of the batch, one backward; an error is recorded as the result."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=120))
    results = {}
    for name in configs:
        for backend, wrap in BACKENDS.items():
            model, d = build_model(ALL_CONFIGS[name] + CHECKPOINTED, seed=SEED)
            model.train()
            wrapped = wrap(model)
            loss = half_loss(wrapped, d, rank)
            try:
                loss.backward()
                if backend == "legacy_ddp":
                    wrapped.all_reduce_grads()  # what fairseq's trainer calls after the backward
                results[name, backend] = (loss.detach(), gradients(model))
            except RuntimeError as error:
                results[name, backend] = str(error)
    dist.barrier()
    dist.destroy_process_group()
    torch.save(results, os.path.join(result_dir, f"rank{rank}.pt"))


def test_shared_parameters_are_found_by_inspection(shared_configs):
    """The inspection finds the known sharers: rPosNet's n~, PosNet-Attn's kernels, T5's and AT5's
    tables, the released rPosNet, aPosNet with learned tables; and none in the Transformer."""
    for name in ["rposnet_iwslt_de_en", "posnet_attn_iwslt_de_en", "t5bias_iwslt_de_en", "at5bias_iwslt_de_en",
                 "rposnet_released_iwslt_de_en", "aposnet_learned"]:
        assert name in shared_configs, name
    assert "decoder.mixer_position_tables.target_learned_32.weight" in shared_configs["rposnet_iwslt_de_en"]
    assert "posmix_transformer" not in shared_configs


def test_two_ddp_ranks_with_checkpointed_layers_equal_one_process_accumulating(shared_configs, tmp_path):
    """Two gloo ranks, each ``ModuleProxyWrapper(DistributedDataParallel(model,
    find_unused_parameters=False))`` of the model built with ``--checkpoint-activations``, each
    backpropagating its half of a batch, against one process without the wrapper accumulating both
    halves (``--update-freq 2``): the same losses, and the ranks' averaged gradients times 2 equal
    the accumulated ones, for every config whose layers share a parameter; the same with fairseq's
    ``legacy_ddp`` (``no_c10d``) wrapper, which all-reduces after the backward.

    Fails when a shared parameter is read inside the checkpointed layers: under pytorch_ddp every
    such config raised "Expected to mark a variable ready only once ... has been marked as ready
    twice".
    """
    configs = sorted(shared_configs)
    mp.spawn(_rank, args=(str(tmp_path / "init"), configs, str(tmp_path)), nprocs=WORLD_SIZE, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD_SIZE)]
    errors = {key: result for key, result in ranks[0].items() if isinstance(result, str)}
    assert not errors, f"{len(errors)} of {len(ranks[0])} runs (config, backend) failed: {errors}"
    for name in configs:
        reference, d = build_model(ALL_CONFIGS[name], seed=SEED)
        reference.train()
        losses = []
        for half in range(WORLD_SIZE):
            loss = half_loss(reference, d, half)
            loss.backward()  # accumulates
            losses.append(loss.detach())
        expected = gradients(reference)
        for (rank, result), backend in ((r, b) for r in enumerate(ranks) for b in BACKENDS):
            loss, grads = result[name, backend]
            what = f"{name} {backend} rank {rank}"
            assert torch.allclose(loss, losses[rank], rtol=1e-5, atol=1e-5), (what, loss, losses[rank])
            assert grads.keys() == expected.keys(), what
            for param, grad in grads.items():  # both backends average over the ranks; accumulation sums
                diff = (grad * WORLD_SIZE - expected[param]).abs().max().item()
                scale = expected[param].abs().max().item()
                assert diff <= 1e-6 + 1e-5 * scale, f"{what}: {param} differs by {diff:.3g} ({scale:.3g})"


@pytest.fixture
def gloo_world_of_one():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def ddp_checkpointed_gradients(arch):
    model, d = build_model(["--arch", arch] + CHECKPOINTED, seed=SEED)
    model.train()
    wrapped = ModuleProxyWrapper(DistributedDataParallel(model, find_unused_parameters=False))
    half_loss(wrapped, d, 0).backward()
    return gradients(model)


def test_world_of_one_ddp_with_checkpointed_rposnet(gloo_world_of_one, monkeypatch):
    """One gloo rank, pytorch_ddp's wrapper, ``--checkpoint-activations``, rPosNet (n~ shared by the
    layers of each side): the backward passes and gives the gradients of the plain model.

    The same run with the layers reading the shared tables' parameters directly (no views handed
    to the checkpointed layers) reproduces the error fairseq's pytorch_ddp raised on a GPU."""
    arch = "rposnet_iwslt_de_en"
    reference, d = build_model(["--arch", arch], seed=SEED)
    reference.train()
    half_loss(reference, d, 0).backward()
    grads = ddp_checkpointed_gradients(arch)
    assert grads.keys() == gradients(reference).keys()
    for param, grad in grads.items():
        expected = reference.get_parameter(param).grad
        assert torch.allclose(grad, expected, rtol=1e-5, atol=1e-6), param

    monkeypatch.setattr(SharedParameters, "as_arguments", lambda self: {})
    with pytest.raises(RuntimeError, match=r"Expected to mark a variable ready only once(.|\n)*"
                                           r"decoder\.mixer_position_tables\.target_learned_32\.weight "
                                           r"has been marked as ready twice"):
        ddp_checkpointed_gradients(arch)
