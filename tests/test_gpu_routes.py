"""The GPU user's routes, taken on the CPU: each sublayer's kernels (kernels/choice.py) are settled when
the model is built and printable; the CUDA kernels are taken by simulating CUDA through the one device
predicate (``kernels.common.on_gpu``). A Triton kernel that fails (its launch replaced by one raising what
Triton raises on a host without a C compiler) turns that part of that sublayer to PyTorch with one warning,
and ``kernel_summary`` / ``repr(model)`` say so per sublayer; where the user forced Triton it is a clear
error. Tiny models; seconds."""
import warnings

import pytest
import torch

from helpers import build_model, random_batch
from posmix_fairseq import kernels
from posmix_fairseq.harness.testing import ParseRefusal
from posmix_fairseq.kernels import choice, common, dispatch
from posmix_fairseq.kernels.choice import kernel_summary
from posmix_fairseq.kernels.relative_mixing import relative_mixing_window

NO_COMPILER = "Failed to find C compiler. Please specify via CC environment variable."
RPOSNET = ["--arch", "rposnet_iwslt_de_en", "--encoder-layers", "1", "--decoder-layers", "1",
           "--decoder-self-max-relative-position", "2", "--encoder-self-max-relative-position", "2"]


@pytest.fixture
def simulated_gpu(monkeypatch):
    """CUDA as the kernels see it (the tensors stay on the CPU) and Triton importable."""
    monkeypatch.setattr("posmix_fairseq.kernels.common.on_gpu", lambda device: True)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)


def fake_triton(monkeypatch, fails):
    """Triton's kernels as the kernel calls reach them: a launch raises what Triton raises when it cannot
    build its launcher while ``fails()`` is true, else the window kernel computes its reference."""
    calls = []

    class Triton:
        def __getattr__(self, name):
            def launch(*args):
                calls.append(name)
                if fails() or name != "relative_mixing_triton":
                    raise RuntimeError(NO_COMPILER)
                table, query_positions, values, key_lengths, _, causal = args
                return relative_mixing_window(table, query_positions, values, key_lengths, 1.0, causal)
            return launch

    monkeypatch.setattr(dispatch, "triton_module", lambda: Triton())
    return calls


def forward(model, d):
    src, src_len = random_batch(d, [6, 4], seed=1)
    prev, _ = random_batch(d, [5, 3], seed=2, left_pad=False)
    with torch.no_grad():
        return model(src, src_len, prev)[0]


def test_every_sublayer_prints_its_kernels_and_the_model_repr_shows_them():
    model, _ = build_model(RPOSNET + ["--encoder-self-rposnet-impl", "window"])
    summary = kernel_summary(model).splitlines()
    assert len(summary) == 3  # encoder self, decoder self, decoder cross (1 layer each)
    gpu_window = "window (triton)" if dispatch.triton_available() else "window (torch)"
    assert summary[0] == (f"encoder.layers.0.self_attn: cpu: mixing window (torch), gating torch; "
                          f"cuda: mixing {gpu_window}, gating torch")
    assert summary[1] == ("decoder.layers.0.self_attn: cpu: mixing dense (torch), decode table (torch), gating torch; "
                          "cuda: mixing dense (torch), decode table (torch), gating torch")
    assert summary[2] == "decoder.layers.0.encoder_attn: MultiheadAttention (PyTorch)"
    assert "kernels: cpu: mixing window (torch), gating torch" in repr(model)


def test_decoding_on_a_gpu_runs_the_decode_table_unless_the_defaults_choose_triton(simulated_gpu, monkeypatch):
    """On CUDA the decoding step follows the defaults like every other part: the decode-weight table
    (one product per step), not the Triton step; ``rposnet_decode`` = triton in POSMIX_GPU_DEFAULTS
    makes the decoder's self-attention step call it (here its reference)."""
    steps = []
    real_step = kernels.relative_decode_step
    monkeypatch.setattr(kernels, "relative_decode_step",
                        lambda *args: steps.append(args[-1]) or real_step(*args[:-1], "torch"))
    for defaults, expected in ((None, []), ('{"rposnet_decode": "triton"}', ["triton"] * 2)):
        if defaults:
            monkeypatch.setenv("POSMIX_GPU_DEFAULTS", defaults)
        model, d = build_model(RPOSNET)
        src, src_len = random_batch(d, [4, 3], seed=1)
        prev = torch.full((2, 1), d.eos())
        with torch.no_grad():
            encoder_out, state = model.encoder(src, src_len), {}
            for t in range(2):
                model.decoder(prev, encoder_out=encoder_out, incremental_state=state)
                prev = torch.cat([prev, torch.full((2, 1), d.nspecial)], dim=1)
        assert steps == expected, (defaults, steps)
        assert ("decode triton" in kernel_summary(model)) == bool(defaults)


def test_a_triton_failure_shows_in_kernel_summary_per_sublayer(simulated_gpu, monkeypatch):
    """``--encoder-self-rposnet-impl window`` on a GPU chooses the Triton window kernel for both encoder
    layers. Its launch fails in the first layer only (as a kernel that cannot be built there): one warning,
    that layer's mixing turns to PyTorch (the same outputs as on the CPU) and says so in kernel_summary and
    repr(model), and never launches again; the second layer keeps running Triton, and says that."""
    failing = [True]
    launches = fake_triton(monkeypatch, lambda: failing[0])
    model, d = build_model(RPOSNET + ["--encoder-layers", "2", "--encoder-self-rposnet-impl", "window"])
    layers = [layer.self_attn for layer in model.encoder.layers]
    assert all("cuda: mixing window (triton)" in str(mixer.sublayer_kernels) for mixer in layers)
    sublayer_run = choice.SublayerKernels.run

    def run(self, device, part, triton_call, torch_call):  # the launch fails in layer 0 only
        failing[0] = self is layers[0].sublayer_kernels
        return sublayer_run(self, device, part, triton_call, torch_call)

    monkeypatch.setattr(choice.SublayerKernels, "run", run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = forward(model, d), forward(model, d)
    fallbacks = [w for w in caught if issubclass(w.category, dispatch.TritonFallbackWarning)]
    assert len(fallbacks) == 1 and NO_COMPILER in str(fallbacks[0].message)
    assert launches == ["relative_mixing_triton"] * 3  # layer 0 once (failed), layer 1 at each forward
    summary = kernel_summary(model).splitlines()
    assert summary[0] == ("encoder.layers.0.self_attn: cpu: mixing window (torch), gating torch; cuda: mixing "
                          f"window (torch) after Triton failed: RuntimeError: {NO_COMPILER}, gating torch")
    assert summary[1] == ("encoder.layers.1.self_attn: cpu: mixing window (torch), gating torch; "
                          "cuda: mixing window (triton), gating torch")
    assert "after Triton failed" not in "\n".join(summary[2:])
    assert choice.sublayer_kernels(model)["encoder.layers.1.self_attn"] == (
        "cpu: mixing window (torch), gating torch; cuda: mixing window (triton), gating torch")
    assert f"cuda: mixing window (torch) after Triton failed: RuntimeError: {NO_COMPILER}" in repr(model)
    with choice_on_cpu():
        reference = forward(model, d)
    assert torch.allclose(first, reference, atol=1e-6) and torch.equal(first, second)


def test_a_triton_failure_is_a_clear_error_when_triton_was_forced(simulated_gpu, monkeypatch):
    fake_triton(monkeypatch, lambda: True)
    model, d = build_model(RPOSNET + ["--encoder-self-rposnet-impl", "triton"])
    with pytest.raises(dispatch.KernelBackendError,
                       match=r"--encoder-self-rposnet-impl triton: backend asks for the 'triton' kernel backend, "
                             r"but the Triton kernel (relative window mixing|gelu_layernorm) failed "
                             r"\(RuntimeError: Failed to find C compiler"):
        forward(model, d)
    assert "after Triton failed" not in kernel_summary(model)  # forced: no fallback


def test_rposnet_impl_names_its_valid_values():
    with pytest.raises(ParseRefusal, match="argument --encoder-self-rposnet-impl: invalid choice: 'cuda'"):
        build_model(RPOSNET + ["--encoder-self-rposnet-impl", "cuda"])
    with pytest.raises(ValueError, match=r"--decoder-self-rposnet-impl: 'cuda' is not one of its values; "
                                         r"valid values: auto, dense, window, triton"):
        from posmix_fairseq.mixers.rposnet import MIXING
        choice.choose((MIXING,), "cuda", "--decoder-self-rposnet-impl")


def test_a_new_mixer_declares_its_part_where_it_is_defined(monkeypatch):
    """A part declared outside kernels/choice.py (here, in the test) is chosen with the same precedence:
    the option, then POSMIX_GPU_DEFAULTS, then its declared GPU default; and runs as chosen."""
    monkeypatch.setattr(choice, "PARTS", dict(choice.PARTS))
    monkeypatch.setattr(choice, "GPU_DEFAULTS", dict(choice.GPU_DEFAULTS))
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    part = choice.declare("mixing", "toy_impl", ("dense", "fast"), triton="fast", gpu_default="fast", why="a test")
    kernels = choice.choose((part,), "auto", "--encoder-self-toy-impl", gated=True)
    assert str(kernels) == "cpu: mixing dense (torch), gating torch; cuda: mixing fast (triton), gating torch"
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    ran = [kernels.run(device, part, lambda: "triton", lambda: "torch") for device in (cpu, cuda)]
    assert ran == ["torch", "triton"]
    assert str(choice.choose((part,), "dense", "--encoder-self-toy-impl").gpu) == "mixing dense (torch)"
    monkeypatch.setenv("POSMIX_GPU_DEFAULTS", '{"toy_impl": "dense"}')
    assert str(choice.choose((part,), "auto", "--encoder-self-toy-impl").gpu) == "mixing dense (torch)"
    with pytest.raises(ValueError, match=r"--encoder-self-toy-impl: 'slow' is not one of its values; "
                                         r"valid values: auto, dense, fast, triton"):
        choice.choose((part,), "slow", "--encoder-self-toy-impl")


def test_a_device_neither_cpu_nor_cuda_is_refused():
    """The one device predicate says CPU or CUDA; any other device is a clear error, not the CPU's kernels
    with the GPU's checks."""
    assert not common.on_gpu(torch.device("cpu")) and common.on_gpu(torch.device("cuda"))
    with pytest.raises(ValueError, match=r"mixers run on cpu or cuda tensors, got a tensor on 'meta'"):
        common.on_gpu(torch.device("meta"))
    model, _ = build_model(RPOSNET)
    with pytest.raises(ValueError, match="'meta'"):
        model.encoder.layers[0].self_attn.sublayer_kernels.on(torch.device("meta"))


class choice_on_cpu:
    """The CPU kernels again inside the block (undoing ``simulated_gpu``'s device predicate)."""

    def __enter__(self):
        self.saved = common.on_gpu
        common.on_gpu = lambda device: False

    def __exit__(self, *exc):
        common.on_gpu = self.saved
