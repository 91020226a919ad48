"""posmix_fairseq.kernels: every implementation equals the dense reference, the dense references
equal the definitions (GPA Eqs. 8-10 written as loops; Eq. 4 written
out), the decoding state equals causal dense mixing, and bad input or an impossible backend gets a
clear error.

The Triton kernels run on the CPU through the Triton interpreter. Triton reads TRITON_INTERPRET
once, when it is first imported, so the Triton tests run in a child pytest process started by
``test_interpreter_child_runs_the_kernel_tests`` with TRITON_INTERPRET=1 in its environment; in this process
they are skipped, and the environment of the other test modules is left untouched.

Tolerances (max abs error over max(1, max |reference|); the inputs are O(1)): float32 1e-5
(forward and gradients; float64 for gradcheck); float16 5e-3 and bfloat16 3e-2 against the
float32 reference of the same rounded inputs (one rounding of the output/gradient to the storage
dtype: 2^-11 resp. 2^-8, plus the rounding of P before the P V product on the GPU).
"""
import importlib.util
import math
import os
import subprocess
import sys
import zlib

import pytest
import torch

import posmix_fairseq.kernels as kernels
from posmix_fairseq.kernels import dispatch
from posmix_fairseq.harness.benchmarks.kernel_candidates import absolute_position_mixing
from posmix_fairseq.harness.benchmarks.kernel_candidates.absolute_mixing import absolute_mixing_dense
from posmix_fairseq.kernels.relative_mixing import relative_mixing_dense, relative_mixing_window

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 3e-2}


CHILD_FLAG = "POSMIX_KERNELS_INTERPRETER_CHILD"
IN_CHILD = os.environ.get(CHILD_FLAG) == "1"


@pytest.fixture(scope="module")
def triton_device():
    """The device the Triton tests run on: the CPU in the interpreter child, else a GPU if any."""
    if IN_CHILD:
        assert dispatch.interpreter_enabled() and dispatch.triton_available()
        return torch.device("cpu")
    if torch.cuda.is_available() and dispatch.triton_available() and not dispatch.interpreter_enabled():
        return torch.device("cuda")
    pytest.skip("runs in the TRITON_INTERPRET=1 child process of test_interpreter_child_runs_the_kernel_tests (no GPU here)")


@pytest.mark.skipif(IN_CHILD, reason="this is the child")
def test_interpreter_child_runs_the_kernel_tests():
    if importlib.util.find_spec("triton") is None:  # (without importing Triton into this process)
        pytest.skip("Triton is not installed (it has wheels for Linux x86-64 only)")
    env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_FLAG: "1"})
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                             "--noconftest",  # this file needs no fairseq (tests/conftest.py imports it)
                             os.path.abspath(__file__), "-k", "triton"],  # the tests named *triton*
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in summary and "skipped" not in summary and "deselected" in summary, summary


@pytest.mark.skipif(IN_CHILD, reason="this is the child")
def test_kernels_compile_for_gpu_ahead_of_time(tmp_path):
    """Every kernel compiles to an sm_90 (H100) binary with bf16 storage, no GPU needed
    (tests/kernels_compile_check.py): the interpreter alone would accept code the compiler rejects."""
    if importlib.util.find_spec("triton") is None:  # (without importing Triton into this process)
        pytest.skip("Triton is not installed (it has wheels for Linux x86-64 only)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]))
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "kernels_compile_check.py")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert result.stdout.count("ok sm_90 bf16") == 10, result.stdout

def assert_close(actual, expected, rel, what=""):
    actual, expected = actual.double(), expected.double()
    assert torch.isfinite(actual).all(), f"{what}: non-finite values"
    scale = max(float(expected.abs().max()) if expected.numel() else 0.0, 1.0)
    err = float((actual - expected).abs().max()) if expected.numel() else 0.0
    assert err <= rel * scale, f"{what}: max error {err:.3g} > {rel} x {scale:.3g}"


def positions_from_padding(padding_mask):
    """fairseq-style true positions (0-based; padding slots get 0)."""
    not_pad = (~padding_mask).long()
    return ((torch.cumsum(not_pad, dim=1) - 1) * not_pad).clamp(min=0)


# --------------------------------------------------------------------------------------------
# scenarios: (query_positions, key_lengths, keys S, gamma, causal-capable)
def scenario(name):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    if name == "odd_right_padded":  # self-attention, queries at padding slots carry position 0
        lengths = torch.tensor([7, 5, 3])
        mask = torch.arange(7)[None] >= lengths[:, None]
        return positions_from_padding(mask), lengths, 7, 1.0
    if name == "left_padded":  # fairseq left-pads sources: queries at the start are padding
        lengths = torch.tensor([9, 4, 6])
        mask = torch.arange(9)[None] < (9 - lengths)[:, None]
        return positions_from_padding(mask), lengths, 9, 1.0
    if name == "length_one":
        return torch.zeros(2, 1, dtype=torch.long), torch.tensor([1, 1]), 1, 1.0
    if name == "empty_rows":  # rows whose keys are all padding
        return torch.randint(0, 5, (3, 5), generator=g), torch.tensor([0, 5, 0]), 5, 1.0
    if name == "k_ge_n":  # handled by the K argument of the test (K = 6 > N = 4)
        return torch.arange(4).repeat(2, 1), torch.tensor([4, 3]), 4, 1.0
    if name == "gamma_1.3":  # cross-attention: target positions, longer source
        return torch.arange(7).repeat(2, 1), torch.tensor([11, 6]), 11, 1.3
    if name == "gamma_0.7":
        return torch.arange(9).repeat(2, 1), torch.tensor([7, 4]), 7, 0.7
    raise KeyError(name)


SCENARIOS = ["odd_right_padded", "left_padded", "length_one", "empty_rows", "k_ge_n", "gamma_1.3", "gamma_0.7"]


def relative_inputs(name, dtype=torch.float32, heads=2, head_dim=5, device="cpu"):
    qp, lengths, keys, gamma = scenario(name)
    k = 6 if name == "k_ge_n" else 2
    g = torch.Generator().manual_seed(7)
    pq = int(qp.max()) + 3
    table = torch.randn(heads, pq, 2 * k + 1, generator=g).to(device, dtype).requires_grad_()
    values = torch.randn(qp.size(0), heads, keys, head_dim, generator=g).to(device, dtype).requires_grad_()
    return table, qp.to(device), values, lengths.to(device), gamma


def absolute_inputs(name, dtype=torch.float32, heads=2, head_dim=5, device="cpu"):
    qp, lengths, keys, _ = scenario(name)
    g = torch.Generator().manual_seed(8)
    table = torch.randn(heads, int(qp.max()) + 2, keys + 1, generator=g).to(device, dtype).requires_grad_()
    values = torch.randn(qp.size(0), heads, keys, head_dim, generator=g).to(device, dtype).requires_grad_()
    return table, qp.to(device), values, lengths.to(device)


def forward_and_grads(fn, table, values, *args):
    out = fn(table, *args)
    weight = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float64, device=out.device).view_as(out)
    grads = torch.autograd.grad((out.double() * weight).sum(), (table, values), allow_unused=True)
    return [out] + [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads, (table, values))]


def upcast(*tensors):
    return [t.detach().float().requires_grad_() for t in tensors]


# --------------------------------------------------------------------------------------------
# the dense references equal the definitions (loops over queries and keys)
def loop_mixing(energy, qp, values, lengths, causal):
    batch, heads, steps = qp.size(0), values.size(1), qp.size(1)
    out = torch.zeros(batch, heads, steps, values.size(3), dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            for t in range(steps):
                p = int(qp[b, t])
                keys = [m for m in range(int(lengths[b])) if not causal or m <= p]
                if not keys:
                    continue
                e = torch.tensor([energy(h, p, m) for m in keys], dtype=torch.float64)
                a = torch.softmax(e, 0)
                out[b, h, t] = sum(a[i] * values[b, h, m].double() for i, m in enumerate(keys))
    return out


@pytest.mark.parametrize("name,causal", [("left_padded", False), ("gamma_1.3", False), ("odd_right_padded", True),
                                         ("empty_rows", False)])
def test_dense_references_equal_the_definitions(name, causal):
    table, qp, values, lengths, gamma = relative_inputs(name)
    k = (table.size(2) - 1) // 2

    def rel_energy(h, p, m):  # Eq. 10: clip(floor(gamma p) - m, K)
        return float(table[h, p, max(-k, min(k, math.floor(gamma * p) - m)) + k])

    expected = loop_mixing(rel_energy, qp, values, lengths, causal)
    assert_close(relative_mixing_dense(table, qp, values, lengths, gamma, causal), expected, 1e-6, "rel dense")
    atable, qp, values, lengths = absolute_inputs(name)
    expected = loop_mixing(lambda h, p, m: float(atable[h, p, m]), qp, values, lengths, causal)
    assert_close(absolute_mixing_dense(atable, qp, values, lengths, causal), expected, 1e-6, "abs dense")


# --------------------------------------------------------------------------------------------
# rPosNet: window (torch) and Triton against dense, float32
CASES = [(name, False) for name in SCENARIOS] + [(name, True) for name in
                                                  ("odd_right_padded", "left_padded", "length_one", "empty_rows",
                                                   "k_ge_n")]


def _relative(backend, impl="window"):
    def fn(table, qp, values, lengths, gamma, causal):
        return kernels.relative_position_mixing(table, qp, values, lengths, gamma, causal, backend=backend, impl=impl)
    return fn


def _check_relative(name, causal, fn, device="cpu"):
    table, qp, values, lengths, gamma = relative_inputs(name, device=device)
    expected = forward_and_grads(relative_mixing_dense, table, values, qp, values, lengths, gamma, causal)
    actual = forward_and_grads(fn, table, values, qp, values, lengths, gamma, causal)
    for what, a, e in zip(("output", "d table", "d values"), actual, expected):
        assert_close(a, e, TOL[torch.float32], f"{name} causal={causal} {what}")
    if name == "empty_rows":  # rows without keys: exactly 0
        assert actual[0][lengths == 0].abs().max() == 0


@pytest.mark.parametrize("name,causal", CASES)
def test_relative_window_torch_equals_dense(name, causal):
    _check_relative(name, causal, _relative("torch", "window"))


@pytest.mark.parametrize("name,causal", CASES)
def test_relative_triton_equals_dense(triton_device, name, causal):
    _check_relative(name, causal, _relative("triton"), triton_device)


def test_relative_window_gradcheck_float64():
    for name, causal in (("gamma_1.3", False), ("odd_right_padded", True), ("left_padded", False)):
        table, qp, values, lengths, gamma = relative_inputs(name, torch.float64, heads=1, head_dim=2)
        assert torch.autograd.gradcheck(  # full Jacobians for one case, random projections for the others
            lambda tb, v: relative_mixing_window(tb, qp, v, lengths, gamma, causal), (table, values),
            fast_mode=name != "gamma_1.3")


def test_relative_triton_block_boundaries(triton_device):
    """Several 32-query blocks, band ranges wider than one 32-key tile (K = 5), a left-padded row
    (its padding queries at position 0 widen the first block's range), a right-padded row whose
    last block mixes positions 96-99 with padding at position 0 (the key tile [32, 64) between
    them holds no band key and is skipped), gamma != 1, causal."""
    g = torch.Generator().manual_seed(4)
    lengths = torch.tensor([70, 45])
    left_padded = positions_from_padding(torch.arange(70)[None] < (70 - lengths)[:, None])
    right_padded = positions_from_padding(torch.arange(128)[None] >= torch.tensor([[100], [128]]))
    cases = [(left_padded, lengths, 70, 1.0, True), (left_padded, lengths, 70, 1.0, False),
             (right_padded, torch.tensor([100, 128]), 128, 1.0, False),
             (torch.arange(70).repeat(2, 1), torch.tensor([90, 60]), 90, 1.3, False)]
    for qp, key_lengths, keys, gamma, causal in cases:
        table = torch.randn(2, 130, 11, generator=g).to(triton_device).requires_grad_()
        values = torch.randn(2, 2, keys, 3, generator=g).to(triton_device).requires_grad_()
        qp, key_lengths = qp.to(triton_device), key_lengths.to(triton_device)
        expected = forward_and_grads(relative_mixing_dense, table, values, qp, values, key_lengths, gamma, causal)
        actual = forward_and_grads(_relative("triton"), table, values, qp, values, key_lengths, gamma, causal)
        for what, a, e in zip(("output", "d table", "d values"), actual, expected):
            assert_close(a, e, 1e-5, f"gamma={gamma} causal={causal} {what}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_relative_triton_low_precision(triton_device, dtype):
    for name, causal in (("left_padded", True), ("gamma_0.7", False)):
        table, qp, values, lengths, gamma = relative_inputs(name, dtype, device=triton_device)
        ref_table, ref_values = upcast(table, values)
        expected = forward_and_grads(relative_mixing_dense, ref_table, ref_values, qp, ref_values, lengths, gamma,
                                     causal)
        for backend in ("torch", "triton"):
            actual = forward_and_grads(_relative(backend), table, values, qp, values, lengths, gamma, causal)
            assert actual[0].dtype == dtype and actual[2].dtype == dtype
            for what, a, e in zip(("output", "d table", "d values"), actual, expected):
                assert_close(a, e, TOL[dtype], f"{backend} {dtype} {name} {what}")


# --------------------------------------------------------------------------------------------
# aPosNet: Triton against dense
def _check_absolute(name, causal, dtype, device):
    table, qp, values, lengths = absolute_inputs(name, dtype, device=device)
    ref_table, ref_values = upcast(table, values)
    expected = forward_and_grads(absolute_mixing_dense, ref_table, ref_values, qp, ref_values, lengths, causal)
    actual = forward_and_grads(
        lambda tb, q, v, ln, c: absolute_position_mixing(tb, q, v, ln, c, backend="triton"),
        table, values, qp, values, lengths, causal)
    for what, a, e in zip(("output", "d table", "d values"), actual, expected):
        assert_close(a, e, TOL[dtype], f"{name} causal={causal} {dtype} {what}")


@pytest.mark.parametrize("name,causal", [(n, c) for n, c in CASES if n != "k_ge_n"])
def test_absolute_triton_equals_dense(triton_device, name, causal):
    _check_absolute(name, causal, torch.float32, triton_device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_absolute_triton_low_precision(triton_device, dtype):
    _check_absolute("left_padded", True, dtype, triton_device)
    _check_absolute("gamma_1.3", False, dtype, triton_device)


def test_absolute_triton_block_boundaries(triton_device):
    """More queries and keys than one 32-wide block: the online softmax across key blocks."""
    g = torch.Generator().manual_seed(3)
    qp = torch.arange(37, device=triton_device).repeat(2, 1)
    table = torch.randn(1, 40, 40, generator=g).to(triton_device).requires_grad_()
    values = torch.randn(2, 1, 37, 3, generator=g).to(triton_device).requires_grad_()
    lengths = torch.tensor([37, 33], device=triton_device)
    for causal in (False, True):
        expected = forward_and_grads(absolute_mixing_dense, table, values, qp, values, lengths, causal)
        actual = forward_and_grads(
            lambda tb, q, v, ln, c: absolute_position_mixing(tb, q, v, ln, c, backend="triton"),
            table, values, qp, values, lengths, causal)
        for what, a, e in zip(("output", "d table", "d values"), actual, expected):
            assert_close(a, e, 1e-5, f"causal={causal} {what}")


# --------------------------------------------------------------------------------------------
# FlexAttention formulations (harness/benchmarks/kernel_candidates/flex.py, what posmix-bench-gpu measures the kernels against):
# forward on the CPU (eager FlexAttention; it has no CPU backward), in float32
@pytest.mark.parametrize("name,causal", [("left_padded", True), ("gamma_1.3", False), ("empty_rows", False)])
def test_flex_formulations_equal_dense(name, causal):
    from posmix_fairseq.harness.benchmarks.kernel_candidates.flex import absolute_mixing_flex, relative_mixing_flex
    table, qp, values, lengths, gamma = (t.detach() if torch.is_tensor(t) else t for t in relative_inputs(name))
    expected = relative_mixing_dense(table, qp, values, lengths, gamma, causal)
    assert_close(relative_mixing_flex(table, qp, values, lengths, gamma, causal), expected, 1e-5, f"rel {name}")
    table, qp, values, lengths = (t.detach() for t in absolute_inputs(name))
    expected = absolute_mixing_dense(table, qp, values, lengths, causal)
    assert_close(absolute_mixing_flex(table, qp, values, lengths, causal), expected, 1e-5, f"abs {name}")


# --------------------------------------------------------------------------------------------
# constant-state decoding
def _decode_run(backend, k=2, steps=20, device="cpu"):
    g = torch.Generator().manual_seed(5)
    batch, heads, dim = 3, 2, 4
    table = torch.randn(heads, steps, 2 * k + 1, generator=g).to(device)
    values = torch.randn(batch, heads, steps, dim, generator=g).to(device)
    positions = torch.arange(steps, device=device).repeat(batch, 1)
    dense = relative_mixing_dense(table, positions, values, torch.full((batch,), steps, device=device), 1.0, True)
    state = kernels.RelativeDecodeState.empty(batch, heads, k, dim, device=device)
    sizes = []
    for t in range(steps):
        state.push(values[:, :, t])
        rows = table[:, t].unsqueeze(0).expand(batch, -1, -1)
        out = kernels.relative_decode_step(rows, *state.tensors(), backend=backend)
        assert_close(out, dense[:, :, t], 1e-5, f"{backend} step t={t} (K={k})")
        sizes.append(state.nbytes())
    assert len(set(sizes)) == 1, "the decoding state grows with t"
    # beam reordering keeps each hypothesis' own state
    order = torch.tensor([2, 0, 0], device=device)
    state.reorder(order)
    out = kernels.relative_decode_step(table[:, steps - 1].unsqueeze(0).expand(3, -1, -1), *state.tensors(),
                                       backend=backend)
    assert_close(out, dense[order, :, steps - 1], 1e-5, "after reorder")


def test_decode_step_torch_equals_dense():
    _decode_run("torch", k=2, steps=20)  # t < K at the first steps, t >> K at the last
    _decode_run("torch", k=5, steps=4)   # K >= N: every key in the window


def test_decode_step_triton_equals_dense(triton_device):
    with torch.no_grad():
        _decode_run("triton", k=2, steps=12, device=triton_device)
        _decode_run("triton", k=5, steps=3, device=triton_device)


def test_decode_state_padding_rows_keep_their_state():
    state = kernels.RelativeDecodeState.empty(2, 1, 2, 3)
    first = torch.randn(2, 1, 3)
    state.push(first)
    state.push(torch.randn(2, 1, 3), valid=torch.tensor([True, False]))
    assert state.recent_valid.tolist() == [[True, True], [True, False]]
    assert torch.equal(state.recent_values[1, :, 0], first[1])
    state.push(torch.randn(2, 1, 3))
    assert state.far_count.tolist() == [1, 0]
    assert torch.allclose(state.far_sum[0], first[0])


def causal_relative_context(table, history, t, k):
    """Eq. 10 written out for one hypothesis: softmax over its real keys m = 0..t (values
    ``history`` (t+1, H, Dh)) of E[t, clip(t - m, K) + K], then the weighted sum."""
    index = torch.tensor([min(t - m, k) + k for m in range(t + 1)])
    probs = torch.softmax(table[:, t, index].double(), dim=-1)  # (H, t+1)
    return torch.einsum("hm,mhd->hd", probs, history.double())


@pytest.mark.parametrize("k", [2, 16])
def test_weighted_decode_step_equals_general_step_and_definition(k):
    """Search's step (packed state, weights of the position alone) against the general step
    (relative_decode_step on RelativeDecodeState) and Eq. 10 written out, at every t = 0..40:
    rows with 0, 5 and 17 padding steps first (a left-padded prefix: their state stays, their
    output is 0) and a beam reordering at t = 20 (one hypothesis copied over another)."""
    from posmix_fairseq.kernels.decode_step import (packed_state, position_decode_weights, unpack_state,
                                                    weighted_decode_step)
    g = torch.Generator().manual_seed(11)
    batch, heads, dim, steps = 3, 2, 4, 41
    table = torch.randn(heads, steps, 2 * k + 1, generator=g)
    values = torch.randn(batch, heads, steps, dim, generator=g)
    weight_table = position_decode_weights(table.transpose(0, 1), torch.arange(steps)[:, None]).unsqueeze(2)
    padding_steps = torch.tensor([0, 5, 17])
    state = packed_state(batch, heads, k, dim)
    general = kernels.RelativeDecodeState.empty(batch, heads, k, dim)
    histories = [[] for _ in range(batch)]
    sizes = set()
    for t in range(steps):
        if t == 20:
            order = torch.tensor([0, 0, 2])
            state, histories = state.index_select(0, order), [list(histories[i]) for i in order]
            general.reorder(order)
            padding_steps = padding_steps[order]
        valid = t >= padding_steps
        positions = (t - padding_steps).clamp(min=0)
        for b in range(batch):
            if valid[b]:
                histories[b].append(values[b, :, t])
        out, state = weighted_decode_step(weight_table[positions], values[:, :, t:t + 1], state, valid)
        general.push(values[:, :, t], valid=valid)
        reference = kernels.relative_decode_step(table[:, positions].transpose(0, 1), *general.tensors(),
                                                 backend="torch")
        assert out.shape == (batch, heads, 1, dim) and torch.equal(out[~valid], torch.zeros_like(out[~valid]))
        assert_close(out[valid, :, 0], reference[valid], 1e-5, f"K={k} t={t}: against the general step")
        for b in range(batch):
            if valid[b]:
                expected = causal_relative_context(table, torch.stack(histories[b]), int(positions[b]), k)
                assert_close(out[b, :, 0], expected, 1e-5, f"K={k} t={t} row {b}: against Eq. 10")
        unpacked = unpack_state(state, positions, values.dtype)
        for name, mine, theirs in zip(("window", "valid", "far sum", "far count"), unpacked, general.tensors()):
            assert torch.equal(mine[valid], theirs[valid]) if name in ("valid", "far count") else \
                torch.allclose(mine[valid], theirs[valid], atol=1e-5), f"K={k} t={t}: {name}"
        sizes.add(state.numel())
    assert sizes == {batch * heads * (k + 1) * dim}, "the packed state grows with t"


def test_decode_weights_sum_to_one_over_the_keys():
    """position_decode_weights: window weights and count x far weight form a distribution over the
    t + 1 keys, with 0 on slots not yet filled and on the far sum before t = K."""
    from posmix_fairseq.kernels.decode_step import position_decode_weights
    k, steps = 3, 9
    rows = torch.randn(steps, 2, 2 * k + 1, generator=torch.Generator().manual_seed(2))
    weights = position_decode_weights(rows, torch.arange(steps)[:, None])  # (N, H, K+1)
    for t in range(steps):
        count = max(0, t + 1 - k)
        total = weights[t, :, :k].sum(-1) + count * weights[t, :, k]
        assert torch.allclose(total, torch.ones(2), atol=1e-6), t
        assert (weights[t, :, min(t + 1, k):k] == 0).all() and (count > 0 or (weights[t, :, k] == 0).all()), t


# --------------------------------------------------------------------------------------------
# gating epilogue (Eq. 4)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gating_triton_equals_reference(triton_device, dtype):
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(3, 5, 40, generator=g) * 2).to(triton_device, dtype).requires_grad_()
    weight = torch.randn(40, generator=g).to(triton_device, dtype).requires_grad_()
    bias = torch.randn(40, generator=g).to(triton_device, dtype).requires_grad_()
    gate = torch.randn(3, 5, 40, generator=g).to(triton_device, dtype).requires_grad_()
    ref_in = upcast(x, weight, bias, gate)
    for fn, args, ref_args in (
            (kernels.gelu_layernorm, (x, weight, bias, 1e-5), (*ref_in[:3], 1e-5)),
            (kernels.gelu_gate, (x, gate), (ref_in[0], ref_in[3]))):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        ref_tensors = [a for a in ref_args if isinstance(a, torch.Tensor)]
        expected = fn(*ref_args, backend="torch")
        actual = fn(*args, backend="triton")
        weight_out = torch.linspace(-1, 1, expected.numel(), device=expected.device).view_as(expected)
        ref_grads = torch.autograd.grad((expected * weight_out).sum(), ref_tensors)
        grads = torch.autograd.grad((actual.float() * weight_out).sum(), tensors)
        assert actual.dtype == dtype
        assert_close(actual, expected, TOL[dtype] * 3, f"{fn.__name__} output")  # GeLU then a rounding
        for i, (a, e) in enumerate(zip(grads, ref_grads)):
            assert_close(a, e, TOL[dtype] * 3, f"{fn.__name__} grad {i}")


def test_gating_reference_is_eq4():
    x = torch.tensor([[-1.0, 0.0, 2.0]])
    gelu = x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    expected = (gelu - gelu.mean()) / torch.sqrt(gelu.var(unbiased=False) + 1e-5)
    assert_close(kernels.gelu_layernorm(x, torch.ones(3), torch.zeros(3), 1e-5, backend="torch"), expected, 1e-6)
    assert_close(kernels.gelu_gate(torch.full((1, 3), 2.0), x, backend="torch"), 2 * gelu, 1e-6)


# --------------------------------------------------------------------------------------------
# dispatch and input errors
def test_dispatch_settings_and_errors(monkeypatch):
    """A direct call's backend is its argument alone (no process-wide setting, no environment variable):
    auto is Triton where it runs without the interpreter (CUDA tensors), a forced triton that cannot
    run and an unknown name are clear errors."""
    # Triton "installed" without importing it here: an import in this process would fix its
    # interpreter mode for every later test module
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("POSMIX_KERNELS", "triton")  # not a setting: a direct call's backend is its argument
    cpu = torch.device("cpu")
    assert dispatch.resolve(None, cpu) == dispatch.resolve("auto", cpu) == "torch"  # auto: no Triton for CPU tensors
    assert not hasattr(kernels, "set_backend") and not hasattr(dispatch, "TRITON_STATE")
    with pytest.raises(kernels.KernelBackendError, match=r"backend='cuda'.*auto, torch, triton"):
        dispatch.resolve("cuda", cpu)
    with pytest.raises(kernels.KernelBackendError, match=r"backend asks for the 'triton'.*TRITON_INTERPRET"):
        dispatch.resolve("triton", cpu)
    assert dispatch.resolve("torch", cpu) == "torch"
    monkeypatch.setattr(dispatch, "triton_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(kernels.KernelBackendError, match="Triton is not installed"):
        dispatch.resolve("triton", cpu)
    assert dispatch.resolve("auto", cpu) == "torch"


def test_input_errors(monkeypatch):
    table, qp, values, lengths, gamma = relative_inputs("odd_right_padded")
    with pytest.raises(ValueError, match=r"impl='fast'.*dense, window"):
        kernels.relative_position_mixing(table, qp, values, lengths, impl="fast")
    with pytest.raises(ValueError, match=r"query positions must lie in \[0, 9\)"):
        kernels.relative_position_mixing(table, qp + 5, values, lengths)
    with pytest.raises(ValueError, match=r"key_lengths must lie in \[0, 7\]"):
        kernels.relative_position_mixing(table, qp, values, lengths + 1)
    with pytest.raises(ValueError, match="odd last axis"):
        kernels.relative_position_mixing(table[..., :4], qp, values, lengths)
    atable, qp, values, lengths = absolute_inputs("odd_right_padded")
    with pytest.raises(ValueError, match="table's key axis 5"):
        absolute_position_mixing(atable[..., :5], qp, values, lengths)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)  # (checked before any Triton import)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(kernels.KernelBackendError, match="float32, float16 and bfloat16, not torch.float64"):
        kernels.relative_position_mixing(table.double(), qp, values.double(), lengths, backend="triton")
    state = kernels.RelativeDecodeState.empty(1, 2, 3, 4)
    rows = torch.zeros(1, 2, 7, requires_grad=True)
    with pytest.raises(kernels.KernelBackendError, match="the Triton decoding step, which is forward-only"):
        kernels.relative_decode_step(rows, *state.tensors(), backend="triton")
    with pytest.raises(ValueError, match=r"energy_rows must be \(B, H, 2K\+1\) = \(1, 2, 7\)"):
        kernels.relative_decode_step(rows[..., :5], *state.tensors())


BLOCKER = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):  # every finder, blind to fairseq: as if it were not installed
    def __init__(self, inner):
        self.inner = inner
    def find_spec(self, name, path=None, target=None):
        if name == "fairseq" or name.startswith("fairseq."):
            return None
        return self.inner.find_spec(name, path, target)
    def invalidate_caches(self):
        getattr(self.inner, "invalidate_caches", lambda: None)()
sys.meta_path[:] = [Hide(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]
try:
    import fairseq
    raise SystemExit("the blocker did not hide fairseq")
except ModuleNotFoundError:
    pass
import posmix_fairseq.kernels as k
import posmix_fairseq.harness.benchmarks.kernels as bench
assert not any(m == "fairseq" or m.startswith("fairseq.") for m in sys.modules)
print("ok", k.relative_position_mixing.__name__, bench.main.__name__)
"""


def test_kernels_and_benchmark_import_without_fairseq():
    env = dict(os.environ, PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", BLOCKER], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok relative_position_mixing main"


@pytest.mark.skipif(IN_CHILD, reason="runs in the parent")
def test_benchmark_runs_end_to_end():
    """posmix-bench-kernels end to end at tiny sizes, its Triton rows through the interpreter (a
    subprocess): every rPosNet output in it equals the dense reference's."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed (it has wheels for Linux x86-64 only)")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    command = [sys.executable, "-m", "posmix_fairseq.harness.benchmarks.kernels", "--device", "cpu",
               "--force-triton", "--lengths", "16,40", "--tokens", "40", "--dim", "32", "--heads", "2", "--k", "2",
               "--repeats", "1", "--warmup", "0", "--hypotheses", "2", "--decode-t", "8"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    rows = [line.split("|") for line in result.stdout.splitlines() if line.startswith("| ") and "rPosNet" in line
            and "step" not in line]
    assert len(rows) == 6, result.stdout
    assert all(float(row[-2]) <= 1e-5 for row in rows), result.stdout
    assert "Triton step vs torch step: max error" in result.stdout


def test_launch_grid_keeps_batch_times_heads_off_axis_1():
    """4,096 sentences of 16 heads are 65,536 (sentence, head) rows, one over CUDA's 65,535 limit of
    grid axes 1 and 2: the relative kernels' launches put the rows on axis 0 (limit 2^31 - 1) and the
    query tiles on axis 1. The launch is intercepted (the grid it asks for is recorded; nothing runs)."""
    from posmix_fairseq.kernels.common import GRID_LIMITS, row_grid
    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed (it has wheels for Linux x86-64 only)")
    from posmix_fairseq.kernels import triton_kernels

    grids = []

    class Launch:
        def __getitem__(self, grid):
            grids.append(grid)
            return lambda *args, **kwargs: None

    batch, heads, steps, k = 4096, 16, 40, 2
    table = torch.zeros(heads, steps, 2 * k + 1, requires_grad=True)
    values = torch.zeros(batch, heads, steps, 2, requires_grad=True)
    positions = torch.arange(steps).expand(batch, steps)
    lengths = torch.full((batch,), steps)
    original = triton_kernels._rel_fwd, triton_kernels._rel_bwd
    triton_kernels._rel_fwd = triton_kernels._rel_bwd = Launch()
    try:
        out = triton_kernels.RelativeWindowMixing.apply(table, values, positions, positions, lengths, True)
        out.sum().backward()
    finally:
        triton_kernels._rel_fwd, triton_kernels._rel_bwd = original
    assert grids == [(batch * heads, 2), (batch * heads, 2)]  # 40 queries in tiles of 32: 2 tiles
    assert all(size <= limit for grid in grids for size, limit in zip(grid, GRID_LIMITS))
    assert row_grid(65536, 64) == (65536, 64)
    with pytest.raises(ValueError, match="70000 programs on grid axis 1 .* over CUDA's limit of 65535"):
        row_grid(16, 70000)
