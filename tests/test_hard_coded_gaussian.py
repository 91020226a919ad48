"""Hard-coded Gaussian attention: the paper's own numbers, gamma, removal switches, SH-X."""
import pytest
import torch

from helpers import build_model, mix, mixer_spec as spec, random_batch, standalone_mixer
from posmix_fairseq.mixers.gaussian import parse_offsets


def weights_of(mixer, n_query, n_key, qpos=None):
    qpos = torch.arange(n_query).unsqueeze(0) if qpos is None else qpos
    kpos = torch.arange(n_key).unsqueeze(0)
    pad = torch.zeros(1, n_key, dtype=torch.bool)
    return mixer.energy.direct_weights(torch.zeros(n_query, 1, 16), qpos, None, kpos, pad)[0]


def test_head_centred_on_query_matches_footnote_1():
    mixer = standalone_mixer(spec("gaussian", options={"gaussian-offsets": "0"}))
    w = weights_of(mixer, 9, 9)[0, 4]  # query 4, keys 0..8
    torch.testing.assert_close(w[2:7], torch.tensor([0.054, 0.242, 0.399, 0.242, 0.054]), atol=5e-4, rtol=0)
    assert w.sum() < 1.0  # cut, not renormalised (footnote 5)


def test_conv_kernel_is_window_3_and_index_copies_one_neighbour():
    conv = weights_of(standalone_mixer(spec("gaussian", options={"gaussian-offsets": "1", "gaussian-impl": "conv"})), 6, 6)[0]
    torch.testing.assert_close(conv[2, 2:5], torch.tensor([0.242, 0.399, 0.242]), atol=5e-4, rtol=0)
    assert conv[2, :2].abs().sum() == 0 and conv[2, 5:].abs().sum() == 0
    index = standalone_mixer(spec("gaussian", options={"gaussian-offsets": "-1", "gaussian-impl": "index"}))
    w = weights_of(index, 5, 5)[0]
    assert w.tolist() == [[1.0 if j == i - 1 else 0.0 for j in range(5)] for i in range(5)]
    # the index head returns exactly the (projected) value of the previous token
    x = torch.randn(5, 2, 16)
    out, _ = mix(index, x)
    v = index.values.projection(x)
    expected = index.out_proj(torch.cat([torch.zeros(1, 2, 16), v[:-1]], dim=0))
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


def test_cross_attention_centres_use_gamma_per_call():
    mixer = standalone_mixer(spec("gaussian", placement="decoder_cross", gamma=1.5, h=3, d=12,
                             options={"gaussian-offsets": "-1,0,1", "gaussian-impl": "index"}))
    w = weights_of(mixer, 4, 9)
    for i in range(4):
        for h, o in enumerate((-1, 0, 1)):
            centre = int(torch.floor(torch.tensor(1.5 * i + o)))
            expected = [1.0 if j == centre else 0.0 for j in range(9)]
            assert w[h, i].tolist() == expected, (i, h)


def test_offsets_expand_over_layers_and_heads_with_clear_errors():
    assert parse_offsets("-1,1", 2, 4, "--x") == [[-1, 1, -1, 1]] * 2
    assert parse_offsets("-1,1;0", 2, 4, "--x") == [[-1, 1, -1, 1], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"--x: give one offset list for all layers or one per layer \(3"):
        parse_offsets("1;2", 3, 4, "--x")
    with pytest.raises(ValueError, match=r"--x: 'a' is not a comma list of numbers"):
        parse_offsets("a", 1, 4, "--x")
    with pytest.raises(ValueError, match=r"--encoder-self-gaussian-sigma: 0 is out of range: must be a finite number > 0"):
        build_model(["--arch", "hc_sa_iwslt_de_en", "--encoder-self-gaussian-sigma", "0"])


def test_value_projection_can_be_dropped_footnote_6():
    """GPA Table 8 counts 2D^2 for GaussianNet (W^V and W^O; matrices only, its totals are checked in
    test_paper_counts.py); the HC paper's footnote 6 drops W^V, leaving W^O's D^2."""
    with_v = standalone_mixer(spec("gaussian"))
    without_v = standalone_mixer(spec("gaussian", options={"gaussian-value-projection": "off"}))
    assert sum(p.numel() for p in with_v.parameters() if p.dim() == 2) == 2 * 16 * 16
    assert sum(p.numel() for p in without_v.parameters() if p.dim() == 2) == 16 * 16
    assert not hasattr(without_v.values.projection, "weight")  # the values are the inputs themselves


def test_sh_x_has_a_single_learned_cross_head_in_the_last_layer_only():
    model, _ = build_model(["--arch", "sh_x_iwslt_de_en", "--decoder-layers", "3"])
    attn = [layer.encoder_attn for layer in model.decoder.layers]
    assert attn[0] is None and attn[1] is None and attn[2].num_heads == 1
    model, _ = build_model(["--arch", "hc_sa_iwslt_de_en", "--decoder-cross-heads", "2,0"])  # Figure 7 form
    assert [l.encoder_attn.num_heads if l.encoder_attn is not None else 0 for l in model.decoder.layers] == [2, 0]
    for bad, msg in [("1", r"one number per decoder layer \(2\)"), ("0,0", "at least one decoder layer"),
                     ("3,1", r"3 heads is invalid: use 0 or a divisor of --decoder-embed-dim 32"),
                     ("a,1", "not a comma list of integers")]:
        with pytest.raises(ValueError, match=msg):
            build_model(["--arch", "hc_sa_iwslt_de_en", "--decoder-cross-heads", bad])


def test_removed_self_attention_and_ffn_sublayers_are_exactly_absent():
    model, d = build_model(["--arch", "posmix_transformer", "--encoder-self-mixer", "none",
                            "--decoder-self-mixer", "none", "--no-encoder-ffn"])
    layer = model.encoder.layers[0]
    x = torch.randn(5, 2, 32)
    torch.testing.assert_close(layer(x, encoder_padding_mask=None), x)  # both sublayers gone
    n_params = sum(p.numel() for p in layer.parameters())
    assert n_params == 0
    dec = model.decoder.layers[0]
    assert isinstance(dec.self_attn_layer_norm, torch.nn.Identity) and dec.fc1.weight.numel() > 0
    with pytest.raises(ValueError, match="argument --decoder-cross-mixer: invalid choice: 'none'"):  # use --decoder-cross-heads
        build_model(["--arch", "posmix_transformer", "--decoder-cross-mixer", "none"])


def test_hc_all_cross_heads_follow_gamma_in_a_real_model():
    model, d = build_model(["--arch", "hc_all_iwslt_de_en", "--length-ratio", "2.0",
                            "--decoder-cross-gaussian-impl", "index", "--decoder-cross-gaussian-offsets", "0"])
    src, src_len = random_batch(d, [9])
    prev = torch.tensor([[d.eos(), 5, 6, 7]])
    with torch.no_grad():
        _, extra = model(src, src_len, prev, return_all_hiddens=False)
    attn = extra["attn"][0][0]  # (tgt, src), mean over heads of the last layer
    assert attn.argmax(-1).tolist() == [0, 2, 4, 6]  # floor(2 * i)


# ---- the windowed computation (GPA Table 8: K_hat N D) ---------------------------------------------
def direct_gaussian_context(values, query_positions, key_positions, key_pad, offsets, sigma, gamma, window, causal):
    """Per (sentence, head, query, key) loop: N(m - c; 0, sigma^2) for |m - c| <= window, c = floor(gamma n + o_h)."""
    b, h, s, dh = values.shape
    t = query_positions.size(1)
    out = torch.zeros(b, h, t, dh, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for ti in range(t):
                c = int(torch.floor(torch.tensor(gamma * int(query_positions[bi, ti]) + offsets[hi % len(offsets)],
                                                 dtype=torch.float64)))
                for si in range(s):
                    m = int(key_positions[bi, si])
                    if key_pad[bi, si] or abs(m - c) > window or (causal and si > ti):
                        continue
                    w = torch.exp(torch.tensor(-0.5 * ((m - c) / sigma) ** 2, dtype=torch.float64)) / (
                        sigma * (2 * torch.pi) ** 0.5)
                    out[bi, hi, ti] += w * values[bi, hi, si].double()
    return out


@pytest.mark.parametrize("placement,sigma,k", [("encoder_self", 1.0, 16), ("decoder_self", 1.0, 8),
                                               ("encoder_self", 3.0, 2), ("decoder_cross", 2.0, 1)])
def test_window_equals_a_direct_windowed_sum_and_full_where_the_cut_mass_is_negligible(placement, sigma, k):
    """window == the direct sum over |m - c| <= K (left padding, causal decoder, gamma = 1.5 across);
    with sigma = 1 and K >= 8 (the sizes' K) it equals `full` too: the mass cut beyond K,
    erfc((K + 1/2) / sqrt 2) < 1e-16, is below float precision."""
    torch.manual_seed(0)
    cross = placement == "decoder_cross"
    sizes = dict(placement=placement, k=k, gamma=1.5 if cross else 1.0, h=4, d=16)
    options = {"gaussian-sigma": sigma, "gaussian-offsets": "-1,0,1" if cross else "-1,1"}
    window = standalone_mixer(spec("gaussian", **sizes, options={**options, "gaussian-impl": "window"})).eval()
    full = standalone_mixer(spec("gaussian", **sizes, options={**options, "gaussian-impl": "full"})).eval()
    full.load_state_dict(window.state_dict())
    x = torch.randn(12, 2, 16)
    pad = torch.zeros(2, 12, dtype=torch.bool)
    pad[1, :5] = True  # left padded: sentence 1 has 7 tokens
    causal = placement == "decoder_self"
    mask = torch.triu(torch.full((12, 12), float("-inf")), 1) if causal else None
    with torch.no_grad():
        if cross:
            source, spad = torch.randn(20, 2, 16), torch.zeros(2, 20, dtype=torch.bool)
            spad[0, :6] = True
            got, _ = mix(window, x, pad, source=source, source_padding_mask=spad, need_weights=False)
            reference, _ = mix(full, x, pad, source=source, source_padding_mask=spad, need_weights=False)
            values, kpad, kpos_from = window.values(source, None, spad), spad, spad
        else:
            got, _ = mix(window, x, pad, attn_mask=mask, need_weights=False)
            reference, _ = mix(full, x, pad, attn_mask=mask, need_weights=False)
            values, kpad, kpos_from = window.values(x, None, pad), pad, pad
        qpos = (~pad).long().cumsum(1).sub(1).clamp(min=0)
        kpos = (~kpos_from).long().cumsum(1).sub(1).clamp(min=0)
        direct = direct_gaussian_context(values, qpos, kpos, kpad, [float(o) for o in options["gaussian-offsets"]
                                                                    .split(",")], sigma, sizes["gamma"], k, causal)
        expected = window.out_proj(direct.float().permute(2, 0, 1, 3).reshape(12, 2, 16))
    real = ~pad.t().unsqueeze(-1)  # padded query slots are not compared
    torch.testing.assert_close(got * real, expected * real, atol=1e-5, rtol=1e-5)
    if sigma == 1.0 and k >= 8:
        torch.testing.assert_close(got * real, reference * real, atol=1e-6, rtol=1e-6)
    else:
        assert not torch.allclose(got * real, reference * real, atol=1e-4)  # a real cut: the window matters
