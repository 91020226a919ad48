"""FourierNet, LinearNet and light convolution checked against direct implementations."""
from dataclasses import replace

import pytest
import torch

from helpers import build_model, mix, mixer_spec as spec, random_batch, standalone_mixer


def test_fourier_equals_real_part_of_fft_over_the_true_length():
    torch.manual_seed(0)
    mixer = standalone_mixer(spec("fourier"))
    x = torch.randn(7, 2, 16)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, :3] = True  # sentence 1 is left-padded: true length 4
    out, _ = mix(mixer, x, key_padding_mask=pad)
    v = mixer.values.projection(x)
    for b, start in ((0, 0), (1, 3)):
        c = torch.fft.fft(v[start:, b].double(), dim=0).real.float()
        expected = mixer.out_proj(c)
        torch.testing.assert_close(out[start:, b], expected, atol=1e-4, rtol=1e-4)


def test_linearnet_uses_its_matrix_by_true_position_and_names_its_limit():
    # the model's limits may not exceed P
    linear = replace(spec("linear", options={"linear-max-positions": 8}), max_query_positions=8, max_key_positions=8)
    mixer = standalone_mixer(linear)
    qpos = torch.tensor([[0, 0, 1, 2]])  # left padded: the first slot is padding
    pad = torch.tensor([[True, False, False, False]])
    w = mixer.energy.direct_weights(torch.zeros(4, 1, 16), qpos, None, qpos, pad)
    torch.testing.assert_close(w[0, :, 3, 1:], mixer.energy.weight[:, 2, :3])
    with pytest.raises(ValueError, match=r"beyond the LinearNet mixing matrix of 8 positions; raise "
                                         r"--encoder-self-linear-max-positions"):
        mix(mixer, torch.randn(9, 1, 16))


def direct_lightconv(kernel, n, length, k, causal, global_context):
    taps = torch.softmax(kernel, dim=-1)
    out = torch.zeros(taps.size(0), length)
    for m in range(length):
        d = n - m
        if causal and d < 0:
            continue
        tap = taps[:, d] if causal and 0 <= d <= k else (taps[:, d + k] if not causal and abs(d) <= k else None)
        if abs(d) <= k and not global_context:
            out[:, m] = tap
        elif global_context:
            if d >= k:
                share = sum(1 for j in range(length) if n - j >= k)
                out[:, m] = (taps[:, k] if causal else taps[:, 2 * k]) / share
            elif d <= -k:
                share = sum(1 for j in range(length) if n - j <= -k)
                out[:, m] = taps[:, 0] / share
            else:
                out[:, m] = tap
    return out


@pytest.mark.parametrize("placement", ["encoder_self", "decoder_self"])
@pytest.mark.parametrize("global_context", ["off", "on"])
def test_light_convolution_weights_equal_direct_kernel_sum(placement, global_context):
    torch.manual_seed(0)
    mixer = standalone_mixer(spec("lightconv", placement=placement, k=2, options={"lightconv-global-context": global_context}))
    length = 8
    pos = torch.arange(length).unsqueeze(0)
    w = mixer.energy.direct_weights(torch.zeros(length, 1, 16), pos, None, pos,
                                    torch.zeros(1, length, dtype=torch.bool))[0]
    for n in range(length):
        expected = direct_lightconv(mixer.energy.kernel.detach(), n, length, 2, placement == "decoder_self",
                                    global_context == "on")
        if placement == "decoder_self":
            expected[:, n + 1:] = 0
            w_n = w[:, n].masked_fill(torch.arange(length) > n, 0)
        else:
            w_n = w[:, n]
        torch.testing.assert_close(w_n, expected, atol=1e-6, rtol=1e-5)
        if global_context == "on" and placement == "encoder_self" and 2 <= n <= length - 3:
            torch.testing.assert_close(w_n.sum(-1), torch.ones(4))  # interior query: the kernel mass is kept


def test_lightconv_glu_and_gating_together_is_a_clear_error():
    with pytest.raises(ValueError, match=r"--encoder-self-gating on replaces the GLU"):
        build_model(["--arch", "lightconvnet_iwslt_de_en", "--encoder-self-gating", "on"])


def test_causal_lightconv_has_k_plus_1_taps():
    """Parameter counts are checked against the GPA paper's Tables 2, 3, 7, 8 in test_paper_counts.py;
    the causal decoder kernel covers distances 0..K only."""
    causal = standalone_mixer(spec("lightconv", placement="decoder_self", k=16, d=512, h=8))
    assert causal.energy.kernel.numel() == 8 * 17


def test_linearnet_max_positions_beyond_the_matrix_is_a_build_time_error():
    """GPA Table 2's N = 128 is the default; the archs default the model's max positions to it."""
    model, _ = build_model(["--arch", "linearnet_iwslt_de_en", "--max-source-positions", "128",
                            "--max-target-positions", "128"], tiny=False)
    assert model.encoder.layers[0].self_attn.energy.weight.shape == (8, 128, 128)
    assert model.max_positions() == (128, 128)
    with pytest.raises(ValueError, match=r"--max-source-positions 200 exceeds the LinearNet mixing matrix of 128 "
                                         r"positions \(--encoder-self-linear-max-positions\).*"
                                         r"--skip-invalid-size-inputs-valid-test"):
        build_model(["--arch", "linearnet_iwslt_de_en", "--max-source-positions", "200"])


def test_linearnet_long_test_sentence_is_rejected_before_generation(tmp_path):
    """A test sentence longer than the matrix: fairseq's own size filter rejects it before any
    decoding (naming --skip-invalid-size-inputs-valid-test), since the model reports P as its max
    positions; with that flag the sentence is skipped and the rest are translated."""
    from helpers import binarized_toy_corpus, run_generate, run_train
    data = binarized_toy_corpus(tmp_path / "toy", sizes={"train": 60, "valid": 8, "test": 8})
    run_train(data, str(tmp_path / "ckpt"), ["--arch", "linearnet_iwslt_de_en", "--encoder-self-linear-max-positions",
                                             "16", "--decoder-self-linear-max-positions", "16",
                                             "--required-batch-size-multiple", "1",
                                             "--skip-invalid-size-inputs-valid-test"], updates=1)
    failed = run_generate(data, str(tmp_path / "ckpt" / "checkpoint_last.pt"), beam=1)
    assert failed.returncode != 0
    assert "skip-invalid-size-inputs-valid-test" in failed.stderr and "max_positions=(16, 16)" in failed.stderr
    assert "beyond the LinearNet" not in failed.stderr  # not a crash inside the model
    skipped = run_generate(data, str(tmp_path / "ckpt" / "checkpoint_last.pt"), "--skip-invalid-size-inputs-valid-test",
                           beam=1)
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    translated = [line for line in skipped.stdout.splitlines() if line.startswith("H-")]
    assert 0 < len(translated) < 8  # the short test sentences are translated, the long ones skipped


def test_lightconv_cross_attention_follows_gamma():
    model, d = build_model(["--arch", "lightconvnet_iwslt_de_en", "--decoder-cross-mixer", "lightconv",
                            "--length-ratio", "2.0", "--decoder-cross-max-relative-position", "1"])
    src, src_len = random_batch(d, [9])
    with torch.no_grad():
        _, extra = model(src, src_len, torch.tensor([[d.eos(), 5, 6, 7]]))
    attn = extra["attn"][0][0]
    for i in range(4):  # support: floor(2 i) - 1 .. floor(2 i) + 1 within the sentence
        support = (attn[i] > 0).nonzero().flatten().tolist()
        assert support == [j for j in range(2 * i - 1, 2 * i + 2) if 0 <= j < 9]
