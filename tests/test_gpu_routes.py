"""The GPU user's routes, taken on the CPU: each sublayer's choice (kernels/choice.py) is settled when
the model is built and printable; the CUDA choice is taken by simulating CUDA through the choices'
one device check (``kernels.common.on_gpu``), and a Triton kernel that fails at its first call (its launch
replaced by one raising what Triton raises on a host without a C compiler) falls back with one
warning, or is a clear error where the user forced Triton. Tiny models; seconds."""
import warnings

import pytest
import torch

from helpers import build_model, random_batch
from posmix_fairseq import kernels
from posmix_fairseq.kernels import choice, common, dispatch
from posmix_fairseq.kernels.choice import kernel_summary

NO_COMPILER = "Failed to find C compiler. Please specify via CC environment variable."
RPOSNET = ["--arch", "rposnet_iwslt_de_en", "--encoder-layers", "1", "--decoder-layers", "1",
           "--decoder-self-max-relative-position", "2", "--encoder-self-max-relative-position", "2"]


@pytest.fixture
def simulated_gpu(monkeypatch):
    """CUDA as the choices see it (the tensors stay on the CPU), Triton importable, and a fresh record
    of Triton's first calls."""
    monkeypatch.setattr("posmix_fairseq.kernels.common.on_gpu", lambda device: True)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    monkeypatch.setattr(dispatch, "TRITON_STATE", {"failure": None, "proven": set()})


@pytest.fixture
def triton_without_compiler(monkeypatch):
    """Every Triton launch raises what Triton raises when it cannot build its launcher."""
    calls = []

    class NoCompiler:
        def __getattr__(self, name):
            def launch(*args, **kwargs):
                calls.append(name)
                raise RuntimeError(NO_COMPILER)
            return launch

    monkeypatch.setattr(kernels, "_triton_module", lambda: NoCompiler())
    return calls


def forward(model, d):
    src, src_len = random_batch(d, [6, 4], seed=1)
    prev, _ = random_batch(d, [5, 3], seed=2, left_pad=False)
    with torch.no_grad():
        return model(src, src_len, prev)[0]


def test_every_sublayer_prints_its_choice_and_the_model_repr_shows_it():
    model, _ = build_model(RPOSNET + ["--encoder-self-rposnet-impl", "window"])
    summary = kernel_summary(model).splitlines()
    assert len(summary) == 3  # encoder self, decoder self, decoder cross (1 layer each)
    gpu_window = "window mixing (triton)" if dispatch.triton_available() else "window mixing (torch)"
    assert summary[0] == (f"encoder.layers.0.self_attn: cpu: window mixing (torch), gating torch; "
                          f"cuda: {gpu_window}, gating torch")
    assert summary[1] == ("decoder.layers.0.self_attn: cpu: dense mixing, decode table, gating torch; "
                          "cuda: dense mixing, decode table, gating torch")
    assert summary[2] == "decoder.layers.0.encoder_attn: MultiheadAttention (PyTorch)"
    assert "kernels: cpu: window mixing (torch), gating torch" in repr(model)


def test_decoding_on_a_gpu_runs_the_decode_table_unless_the_defaults_choose_triton(simulated_gpu, monkeypatch):
    """On CUDA the decoding step follows the defaults like every other part: the decode-weight table
    (one product per step), not the Triton step; ``rposnet_decode`` = triton in POSMIX_GPU_DEFAULTS
    makes the decoder's self-attention step call it (here its reference, with backend ``auto``)."""
    steps = []
    real_step = kernels.relative_decode_step
    monkeypatch.setattr(kernels, "relative_decode_step",
                        lambda *args, backend=None: steps.append(backend) or real_step(*args, backend="torch"))
    for defaults, expected in ((None, []), ('{"rposnet_decode": "triton"}', ["auto"] * 2)):
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


def test_a_triton_failure_at_the_first_call_falls_back_with_one_warning(simulated_gpu, triton_without_compiler):
    """``--S-rposnet-impl window`` on a GPU chooses the Triton window kernel; its first launch fails as
    on a host without a C compiler: one warning, the PyTorch window form (the same outputs as on the
    CPU), and no Triton launch again in the process."""
    flags = RPOSNET + ["--encoder-self-rposnet-impl", "window"]
    model, d = build_model(flags)
    assert model.encoder.layers[0].self_attn.kernel_choice.gpu.kernels == "triton"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = forward(model, d), forward(model, d)
    fallbacks = [w for w in caught if issubclass(w.category, dispatch.TritonFallbackWarning)]
    assert len(fallbacks) == 1 and NO_COMPILER in str(fallbacks[0].message)
    assert "relative window mixing failed at its first call" in str(fallbacks[0].message)
    assert triton_without_compiler == ["relative_mixing_triton"]  # the second forward did not try again
    assert dispatch.TRITON_STATE["failure"].startswith("relative window mixing: RuntimeError")
    with choice_on_cpu():
        reference = forward(model, d)
    assert torch.allclose(first, reference, atol=1e-6) and torch.equal(first, second)


def test_a_triton_failure_is_a_clear_error_when_triton_was_forced(simulated_gpu, triton_without_compiler):
    model, d = build_model(RPOSNET + ["--encoder-self-rposnet-impl", "triton"])
    with pytest.raises(dispatch.KernelBackendError,
                       match=r"--encoder-self-rposnet-impl triton: backend asks for the 'triton' kernel backend, "
                             r"but the Triton kernel (relative window mixing|gelu_layernorm) failed at its first "
                             r"call \(RuntimeError: Failed to find C compiler"):
        forward(model, d)
    assert dispatch.TRITON_STATE["failure"] is None  # forced: no fallback recorded


def test_rposnet_impl_names_its_valid_values():
    with pytest.raises(SystemExit):
        build_model(RPOSNET + ["--encoder-self-rposnet-impl", "cuda"])
    with pytest.raises(ValueError, match=r"--decoder-self-rposnet-impl: 'cuda' is not a mixing implementation of "
                                         r"rposnet; valid values: auto, dense, window, triton"):
        choice.choose("cuda", "--decoder-self-rposnet-impl")


class choice_on_cpu:
    """The CPU choices again inside the block (undoing ``simulated_gpu``'s device check)."""

    def __enter__(self):
        self.saved = common.on_gpu
        common.on_gpu = lambda device: False

    def __exit__(self, *exc):
        common.on_gpu = self.saved
