"""Search-time rPosNet: the window form (``--<sublayer>-rposnet-impl window``) against the dense
softmax, constant-state decoding (a state whose size does not grow with t), and a whole model with
the Triton kernels forced on (interpreter, child process) against the PyTorch reference.

The every-arch exactness suite (tests/test_decoding_exactness.py) runs the window impl and the
constant state with far sums through the config ``rposnet_window_small_k`` of conftest.py."""
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from helpers import mix, mixer_spec, random_batch, standalone_mixer
from posmix_fairseq.core.positions import PositionFrame
from posmix_fairseq.kernels import common as kernel_common
from posmix_fairseq.kernels.decode_step import position_decode_weights, weighted_decode_step
from posmix_fairseq.mixers.paths import constant_state, rposnet_band
from posmix_fairseq.mixers.paths.constant_state import STATE_KEYS, TABLE_KEY, decode_weights
from posmix_fairseq.mixers.rposnet import MIXING, rposnet_paths
from test_freeze import trained_and_frozen

TOL = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))


def future_mask(length):
    return torch.triu(torch.full((length, length), float("-inf")), 1)


def run_both(mixer, x, real, **kwargs):
    """Outputs of the dense and window impls of one mixer, and the gradients of the same loss
    (a fixed random projection of the outputs at real queries) w.r.t. its parameters."""
    g = torch.Generator().manual_seed(7)
    probe = torch.randn(x.shape, generator=g, dtype=x.dtype, device="cpu").to(x.device)
    # the mixer's parameters and the shared learned n~ table it reads (owned by the side, not the mixer)
    params = {**dict(mixer.named_parameters()),
              **{"n~." + n: p for n, p in mixer.energy.query_table.named_parameters()}}
    results = []
    for impl in ("dense", "window"):
        mixer.use_paths(rposnet_paths(mixer.placement, impl))
        for p in params.values():
            p.grad = None
        out, _ = mix(mixer, x, **kwargs)
        (out * probe * real.t()[:, :, None]).sum().backward()
        grads = {n: p.grad.clone() for n, p in params.items() if p.grad is not None}
        results.append((out.detach(), grads))
    return results


def check_equal(results, real, what):
    (dense, dense_grads), (window, window_grads) = results
    mask = real.t()[:, :, None]
    err = ((dense - window) * mask).abs().max().item()
    assert err <= TOL * max(1.0, dense.abs().max().item()), f"{what}: outputs differ by {err:.2e}"
    assert dense_grads.keys() == window_grads.keys() and len(dense_grads) >= 4, what
    assert any(name.startswith("n~.") for name in dense_grads) or what.startswith("decoder_cross"), what
    for name, grad in dense_grads.items():
        gerr = (grad - window_grads[name]).abs().max().item()
        assert gerr <= TOL * max(1.0, grad.abs().max().item()), f"{what}: d/d{name} differs by {gerr:.2e}"


def padding(lengths, width, left):
    p = torch.arange(width)[None, :]
    n = torch.tensor(lengths)[:, None]
    return p < width - n if left else p >= n


@pytest.mark.parametrize("k", [2, 32])  # K < N (far sums) and K >= N (band only)
def test_window_equals_dense_self_attention(k):
    torch.manual_seed(0)
    lengths, width = [11, 5, 9], 11
    for placement in ("encoder_self", "decoder_self"):
        mixer = standalone_mixer(mixer_spec("rposnet", placement, gated=True, k=k, table="learned", d=16, h=4))
        x = torch.randn(width, 3, 16, dtype=torch.float32)
        for left in (True, False):
            pad = padding(lengths, width, left)
            kwargs = {"key_padding_mask": pad}
            if placement == "decoder_self":
                kwargs["attn_mask"] = future_mask(width)
            check_equal(run_both(mixer, x, ~pad, **kwargs), ~pad, f"{placement} K={k} left_pad={left}")


def test_window_equals_dense_cross_attention_with_gamma():
    torch.manual_seed(1)
    mixer = standalone_mixer(mixer_spec("rposnet", "decoder_cross", gated=True, k=3, gamma=1.3, d=16, h=2))
    x, source = torch.randn(8, 3, 16), torch.randn(13, 3, 16)
    source_pad = padding([13, 4, 9], 13, left=True)
    target_pad = padding([8, 6, 3], 8, left=False)
    results = run_both(mixer, x, ~target_pad, key_padding_mask=target_pad, source=source,
                       source_padding_mask=source_pad)
    check_equal(results, ~target_pad, "decoder_cross gamma=1.3")


def test_window_cross_attention_while_decoding_step_by_step():
    """A decoding step has one query at position t (cached source values, static_kv)."""
    torch.manual_seed(2)
    spec = mixer_spec("rposnet", "decoder_cross", gated=True, k=2, gamma=0.7, d=16, h=2)
    mixer = standalone_mixer(spec).eval()
    x, source = torch.randn(9, 2, 16), torch.randn(12, 2, 16)
    source_pad = padding([12, 7], 12, left=True)
    with torch.no_grad():
        full, _ = mix(mixer, x, source=source, source_padding_mask=source_pad, need_weights=False)
        mixer.use_paths(rposnet_paths(mixer.placement, "window"))
        state = {}
        src = PositionFrame.of_padding(source_pad, 2, 12)
        for t in range(9):
            frame = PositionFrame(torch.full((2, 1), t), torch.zeros(2, 1, dtype=torch.bool), src.positions)
            step, _ = mixer(x[t:t + 1], source, source, key_padding_mask=source_pad, incremental_state=state,
                            static_kv=True, need_weights=False, positions=frame)
            assert (step[0] - full[t]).abs().max().item() <= TOL, f"step {t}"


def test_window_has_no_dropout_and_no_weights():
    spec = replace(mixer_spec("rposnet", "encoder_self", k=2, options={"rposnet-impl": "window"}), attention_dropout=0.1)
    mixer = standalone_mixer(spec)
    assert mixer.path_names == ("window", "table", "dense")
    x = torch.randn(6, 2, 16)
    mixer.train()
    with pytest.raises(ValueError, match=r"--encoder-self-rposnet-impl window.*--attention-dropout 0.*"
                                         r"--encoder-self-rposnet-impl dense"):
        mix(mixer, x, need_weights=False)
    mixer.eval()  # no dropout at inference: the window form is exact there
    out, attn = mix(mixer, x, need_weights=False)
    assert attn is None
    # weights requested (posmix-attention, alignments): this call runs dense and returns them
    dense_out, weights = mix(mixer, x, need_head_weights=True)
    assert weights.shape == (4, 2, 6, 6) and torch.allclose(dense_out, out, atol=TOL)
    with pytest.raises(ValueError, match=r"--encoder-self-rposnet-impl: 'banded' is not one of its values; "
                                         r"valid values: auto, dense, window, triton"):
        standalone_mixer(mixer_spec("rposnet", "encoder_self", options={"rposnet-impl": "banded"}))


def test_auto_impl_is_dense_on_the_cpu_and_the_gpu_default_for_cuda(monkeypatch):
    """``--<sublayer>-rposnet-impl auto`` (the default) takes the GPU defaults for CUDA tensors only, read once when
    the sublayer is built (its paths too: no window path where no device runs the window form); CUDA is
    simulated by the one device predicate, so the tensors are CPU tensors also where POSMIX_TEST_DEVICE=cuda."""
    with torch.device("cpu"):
        auto_impl_checks(monkeypatch)


def auto_impl_checks(monkeypatch):
    from posmix_fairseq.kernels import choice
    spec = replace(mixer_spec("rposnet", "encoder_self", k=2), attention_dropout=0.1)
    mixer = standalone_mixer(spec).eval()
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert mixer.path_names == ("table", "dense")
    assert mixer.sublayer_kernels.on(cpu).value(MIXING) == mixer.sublayer_kernels.on(cuda).value(MIXING) == "dense"
    mix(mixer.train(), torch.randn(6, 2, 16), need_weights=False)  # dense in training with dropout: no error
    monkeypatch.setitem(choice.GPU_DEFAULTS, "rposnet_impl", ("window", "a test"))
    assert mixer.sublayer_kernels.on(cuda).value(MIXING) == "dense"  # settled when the sublayer was built
    mixer = standalone_mixer(spec).eval()
    assert mixer.path_names == ("window", "table", "dense")
    assert mixer.sublayer_kernels.on(cuda).value(MIXING) == "window"
    assert mixer.sublayer_kernels.on(cpu).value(MIXING) == "dense"
    x = torch.randn(6, 2, 16)
    expected, _ = mix(mixer, x, need_weights=False)
    served = []
    monkeypatch.setattr(rposnet_band, "window_context", lambda *a: served.append(a[5]) or torch.zeros(2, 4, 6, 4))
    mix(mixer, x, need_weights=False)
    assert served == []  # CPU tensors: dense
    monkeypatch.setattr("posmix_fairseq.kernels.common.on_gpu", lambda device: True)
    mix(mixer, x, need_weights=False)
    assert served == ["triton" if choice.dispatch.triton_available() else "torch"]
    mix(mixer.train(), x, need_weights=False)  # attention dropout in training: dense, not an error
    assert len(served) == 1 and expected.shape == (6, 2, 16)
    monkeypatch.setenv("POSMIX_GPU_DEFAULTS", '{"rposnet_impl": "dense"}')  # one run's override
    assert standalone_mixer(spec).sublayer_kernels.gpu.value(MIXING) == "dense"
    monkeypatch.setenv("POSMIX_GPU_DEFAULTS", '{"impl": "dense"}')
    with pytest.raises(ValueError, match=r"POSMIX_GPU_DEFAULTS: \['impl'\] is not an object of GPU defaults; "
                                         r"valid keys: gating, rposnet_impl, rposnet_decode"):
        standalone_mixer(spec)
    monkeypatch.delenv("POSMIX_GPU_DEFAULTS")
    monkeypatch.setitem(choice.GPU_DEFAULTS, "rposnet_impl", ("banded", "a test"))
    with pytest.raises(ValueError, match=r"GPU_DEFAULTS: rposnet_impl = 'banded'; valid values: dense, window"):
        standalone_mixer(spec)


def test_gating_kernels_where_the_choice_says_so_compute_eq4(monkeypatch):
    """The model's calls of the fused gating kernels (kernels.gelu_layernorm, kernels.gelu_gate: on a
    GPU where the GPU defaults say triton) give what its PyTorch ops give; here the choice is made
    for a simulated GPU and the kernels' Triton launches are replaced by their references."""
    from posmix_fairseq.kernels import choice, dispatch
    mixer = standalone_mixer(mixer_spec("rposnet", "encoder_self", gated=True, k=2)).eval()
    with torch.no_grad():
        mixer.values.norm.weight.uniform_(0.5, 1.5)
        mixer.values.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(7, 2, 16)
    expected, _ = mix(mixer, x, need_weights=False)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    monkeypatch.setitem(choice.GPU_DEFAULTS, "gating", ("triton", "a test"))
    gated = standalone_mixer(mixer_spec("rposnet", "encoder_self", gated=True, k=2)).eval()
    gated.load_state_dict(mixer.state_dict())
    assert str(gated.sublayer_kernels) == ("cpu: mixing dense (torch), gating torch; "
                                           "cuda: mixing dense (torch), gating triton")
    launched = []

    class FakeTriton:
        def gelu_layernorm_triton(self, x, weight, bias, eps):
            launched.append("gelu_layernorm")
            return F.layer_norm(F.gelu(x), (x.size(-1),), weight, bias, eps)

        def gelu_gate_triton(self, context, gate_preact):
            launched.append("gelu_gate")
            return context * F.gelu(gate_preact)

    monkeypatch.setattr(dispatch, "triton_module", lambda: FakeTriton())
    monkeypatch.setattr("posmix_fairseq.kernels.common.on_gpu", lambda device: True)
    actual, _ = mix(gated, x, need_weights=False)
    assert launched == ["gelu_layernorm", "gelu_gate"]
    assert (actual - expected).abs().max().item() <= 1e-6


def state_bytes(state):
    return sum(t.numel() * t.element_size() for buf in state.values() for t in buf.values() if torch.is_tensor(t))


@pytest.mark.parametrize("k, frozen", [(2, False), (2, True), (16, True)], ids=["K2", "K2-frozen", "K16-frozen"])
def test_constant_state_size_does_not_grow_and_matches_full_forward(k, frozen, monkeypatch):
    """Steps t = 0..39 against the trained model's full forward: from step K on every step moves a
    value into the far sum; a left-padded prefix (steps at padding) and a beam reordering on the way.
    Frozen: the steps read the per-position weights of the frozen table (spied: the unmasked search
    step runs at the real steps of an unpadded batch, the masked one at the padding steps)."""
    model, frozen_model, d = trained_and_frozen(["--arch", "rposnet_iwslt_de_en",
                                                 "--decoder-self-max-relative-position", str(k)])
    decoder_model = frozen_model if frozen else model
    calls = {"unmasked": 0, "masked": 0}

    def spy(weights, values, state, valid=None):
        calls["unmasked" if valid is None else "masked"] += 1
        return weighted_decode_step(weights, values, state, valid)
    monkeypatch.setattr(constant_state, "weighted_decode_step", spy)
    src, src_len = random_batch(d, [9], seed=1)
    src, src_len = src.repeat(2, 1), src_len.repeat(2)  # two hypotheses of one sentence, as in a beam
    tgt, _ = random_batch(d, [40, 37], seed=2, left_pad=True)
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)
    prev[1, :4] = d.pad()  # left-padded prefix of the second hypothesis
    with torch.no_grad():
        full = F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)
        encoder_out = decoder_model.encoder(src, src_len)
        state, rows, sizes = {}, torch.arange(2), []
        for t in range(prev.size(1)):
            if t == 20:
                new_order = torch.tensor([1, 1])
                decoder_model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = decoder_model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows = rows[new_order]
            logits, _ = decoder_model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)
            step = F.log_softmax(logits[:, -1].double(), dim=-1)
            real = prev[rows, t].ne(d.pad())
            diff = (step - full[rows, t])[real].abs().max().item()
            assert diff <= TOL, f"step {t}: incremental differs from the full forward by {diff:.2e}"
            sizes.append(state_bytes(state))
    self_buffers = [buf for buf in state.values() if STATE_KEYS[0] in buf]
    assert len(self_buffers) == 2 and all(set(buf) == set(STATE_KEYS) for buf in self_buffers)
    assert all(buf[STATE_KEYS[0]].size(2) == k + 1 for buf in self_buffers)  # K recent slots + the far sum
    assert sizes[2] == sizes[10] == sizes[-1], sizes  # constant from the first step, whatever t
    if kernel_common.on_gpu(prev.device):  # whether a step has padding is not asked there (a host read): masked
        assert calls == {"masked": 2 * prev.size(1), "unmasked": 0}, calls
    else:  # 2 layers x (4 steps at the second hypothesis' padding + the rest unmasked)
        assert calls == {"masked": 2 * 4, "unmasked": 2 * (prev.size(1) - 4)}, calls


def test_constant_state_checks_its_start_and_the_frozen_table():
    """A first incremental call that starts a hypothesis after position 0 (it never saw the earlier
    tokens) and a position beyond the frozen table are clear errors on the CPU (on a GPU both are device-side
    assertions, without a host read; the next test checks the start's)."""
    with torch.device("cpu"):
        model, frozen_model, d = trained_and_frozen(["--arch", "rposnet_iwslt_de_en",
                                                     "--decoder-self-max-relative-position", "2"], num_positions=8)
        src, src_len = random_batch(d, [5], seed=1)
        prev = torch.cat([torch.full((1, 1), d.eos()), random_batch(d, [9], seed=2)[0]], dim=1)  # 10 tokens
        with torch.no_grad():
            encoder_out = frozen_model.encoder(src, src_len)
            with pytest.raises(ValueError, match="starts at the first target token.*position 2"):
                frozen_model.decoder(prev[:, :3], encoder_out=encoder_out, incremental_state={})
            state = {}
            with pytest.raises(ValueError, match="target position 8 is beyond the frozen rPosNet energy table"):
                for t in range(10):
                    frozen_model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)


CUDA_LATE_START = """
import torch
from posmix_fairseq.mixers.paths.constant_state import check_first_step
no_padding = torch.zeros(2, 1, dtype=torch.bool, device="cuda")
check_first_step(torch.tensor([[0], [0]], device="cuda"), no_padding)
torch.cuda.synchronize()
print("a start at position 0 passes", flush=True)
check_first_step(torch.tensor([[0], [2]], device="cuda"), no_padding)
torch.cuda.synchronize()
print("a start at position 2 passed", flush=True)
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (posmix-bench-gpu runs it)")
def test_constant_state_start_check_on_cuda_is_a_device_assert_with_the_message():
    """On a GPU the start check is a device-side assertion (torch._assert_async: no host read); it stops the
    process with the check's message. A child process, since a device-side assertion ends its CUDA context."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CUDA_LATE_START], capture_output=True, text=True, env=env, timeout=300)
    assert "a start at position 0 passes" in proc.stdout, proc.stderr[-3000:]
    assert "a start at position 2 passed" not in proc.stdout and proc.returncode != 0, proc.stdout
    assert "constant-state decoding starts at the first target token" in proc.stderr, proc.stderr[-3000:]


def test_constant_state_takes_several_tokens_per_call_and_reads_a_reloaded_table():
    """Several tokens in one call equal one token per call; a frozen table that changes (loaded weights)
    changes the weights."""
    model, frozen_model, d = trained_and_frozen(["--arch", "rposnet_iwslt_de_en",
                                                 "--decoder-self-max-relative-position", "2"], num_positions=8)
    with torch.no_grad():
        mixer = frozen_model.decoder.layers[0].self_attn
        energy = mixer.energy
        x = torch.randn(4, 1, 32)
        positions = PositionFrame(torch.arange(4)[None], torch.zeros(1, 4, dtype=torch.bool))
        together, _ = mixer(x, x, x, incremental_state={}, positions=positions)
        state = {}
        one_by_one = [mixer(x[t:t + 1], x[t:t + 1], x[t:t + 1], incremental_state=state,
                            positions=PositionFrame(positions.positions[:, t:t + 1],
                                                    positions.padding_mask[:, t:t + 1]))[0] for t in range(4)]
        assert torch.allclose(together, torch.cat(one_by_one), atol=1e-6)
        before = decode_weights(energy, torch.tensor([[3]])).clone()
        energy.load_state_dict({"table": energy.table * 2})
        after = decode_weights(energy, torch.tensor([[3]]))
        assert not torch.allclose(before, after)
        assert torch.allclose(after, position_decode_weights(energy.table[:, 3], torch.tensor([3]))[:, None], atol=1e-6)


def test_decode_weight_table_equals_the_rows_of_each_step():
    """Without gradients (search) the decode weights come from a table of every position kept in
    the decode's constants (mixers/paths/constant_state.py): equal to the weights from the step's
    own energy rows (the path with gradients), also beyond its first 64 positions (the table grows,
    up to a learned n~ table's size), and a new decode after the trained weights change in place
    (as fairseq's optimizers change them, through ``.data``) reads the new weights."""
    torch.manual_seed(0)
    energy = standalone_mixer(mixer_spec("rposnet", "decoder_self", gated=True, k=3, table="sinusoidal", d=16,
                                       h=4)).energy
    constants = {}
    for positions in (torch.tensor([[0], [2], [5], [63]]), torch.tensor([[64], [150], [3], [149]])):
        expected = decode_weights(energy, positions)  # gradients enabled: from energy_rows
        with torch.no_grad():
            table = decode_weights(energy, positions, constants)
        assert table.shape == expected.shape == (4, 4, 1, 4)
        assert torch.allclose(table, expected, atol=1e-6)
    assert constants[TABLE_KEY].size(0) >= 151
    with torch.no_grad():
        energy.q_proj.weight.data.mul_(2.0)  # neither the storage nor the version of the parameter changes
        table = decode_weights(energy, positions, {})  # the next decode
    assert torch.allclose(table, decode_weights(energy, positions), atol=1e-6)
    assert not torch.allclose(table, expected, atol=1e-3)
    learned = standalone_mixer(mixer_spec("rposnet", "decoder_self", gated=True, k=3, table="learned", d=16,
                                       h=4)).energy
    limit = learned.decode_weight_limit()
    with torch.no_grad():
        constants = {}
        decode_weights(learned, torch.tensor([[limit - 1]]), constants)
        assert constants[TABLE_KEY].size(0) == limit


CHILD = r"""
import json, os, sys
sys.path.insert(0, {here!r})
impl = os.environ["POSMIX_TEST_RPOSNET_IMPL"]
import torch, torch.nn.functional as F
from helpers import build_model, random_batch
out = {{}}
configs = {{
    "rposnet_window": ["--arch", "rposnet_iwslt_de_en", "--encoder-self-rposnet-impl", impl,
                       "--decoder-self-rposnet-impl", impl, "--decoder-cross-mixer", "rposnet",
                       "--decoder-cross-rposnet-impl", impl, "--length-ratio", "1.3",
                       "--encoder-self-max-relative-position", "2", "--decoder-self-max-relative-position", "2",
                       "--encoder-layers", "1", "--decoder-layers", "1"],
}}
for name, flags in configs.items():
    model, d = build_model(flags)
    src, src_len = random_batch(d, [5, 3], seed=1)
    tgt, _ = random_batch(d, [6, 4], seed=2, left_pad=False)
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        full = F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)
        encoder_out, state, steps = model.encoder(src, src_len), {{}}, []
        for t in range(4):
            logits, _ = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            steps.append(F.log_softmax(logits[:, -1].double(), dim=-1))
    out[name] = {{"full": full.tolist(), "steps": torch.stack(steps, 1).tolist(), "real": prev.ne(d.pad()).tolist()}}
print("RESULT" + json.dumps(out))
"""


def run_child(**env):
    env = dict(os.environ, **env)
    result = subprocess.run([sys.executable, "-c", CHILD.format(here=HERE)], cwd=HERE, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_whole_model_with_triton_kernels_forced_equals_torch_reference():
    """The window mixing (encoder, decoder causal, cross with gamma), the decoding step and the gating
    run as Triton kernels (interpreter, forced by ``--<sublayer>-rposnet-impl triton``) and as PyTorch (``window``)."""
    pytest.importorskip("triton")
    reference = run_child(POSMIX_TEST_RPOSNET_IMPL="window")
    triton = run_child(POSMIX_TEST_RPOSNET_IMPL="triton", TRITON_INTERPRET="1")
    for name in reference:
        real = torch.tensor(reference[name]["real"])
        for part in ("full", "steps"):
            a, b = torch.tensor(reference[name][part]), torch.tensor(triton[name][part])
            rows = real if part == "full" else real[:, : a.size(1)]
            err = (a - b)[rows].abs().max().item()
            assert err <= TOL, f"{name} {part}: Triton vs torch log-probs differ by {err:.2e}"
        # and the steps equal the full forward (constant state through the Triton decoding step)
        full, steps = torch.tensor(triton[name]["full"]), torch.tensor(triton[name]["steps"])
        assert (full[:, : steps.size(1)] - steps).abs().max().item() <= TOL
