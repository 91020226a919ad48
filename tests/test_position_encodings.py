"""The positional-encoding family: symmetry, length generalisation, the papers' equations,
parameter formulas and clear errors."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import build_model, mix, parse_model_args, random_batch
from posmix_fairseq.core.placement import DECODER, ENCODER
from posmix_fairseq.harness.recipes.position_limits import position_limits
from posmix_fairseq.models.architectures import VARIANTS
from posmix_fairseq.models.options import side_has_position_signal
from posmix_fairseq.core.positions import PositionFrame
from posmix_fairseq.mixers.t5bias import ScalarRelativeBias, SoftBucketBias, t5_bucket
from posmix_fairseq.position_encodings.base import PositionEncodingSpec
from posmix_fairseq.position_encodings.recurrent import RecurrentPositionalEmbedding

# The position methods are the archs of the table (models/architectures.py) whose side has a position signal
# (an embedding-level encoding, or a position-aware mixer on its queries: models/options.py), read off the
# arguments fairseq-train builds; whether a method extrapolates is read off the model's position-indexed tables
# (harness/recipes/position_limits.py). No list here names a method.
def signal(variant, side) -> bool:
    return side_has_position_signal(parse_model_args(["--arch", f"{variant}_iwslt_de_en"]), side)


ENCODER_METHODS = [variant for variant in VARIANTS if signal(variant, ENCODER)]
DECODER_METHODS = [variant for variant in VARIANTS if signal(variant, DECODER)]


def encoder_states(model, src):
    with torch.no_grad():
        return model.encoder(src, torch.tensor([src.size(1)] * src.size(0)))["encoder_out"][0]  # (T, B, D)


def test_encoder_without_position_signal_is_permutation_equivariant():
    model, d = build_model(["--arch", "nope_iwslt_de_en"])
    src, _ = random_batch(d, [12], seed=7)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    out, out_perm = encoder_states(model, src), encoder_states(model, src[:, perm])
    torch.testing.assert_close(out_perm, out[perm], atol=1e-5, rtol=1e-5)


def test_the_position_methods_are_most_archs():
    assert len(ENCODER_METHODS) > len(VARIANTS) - 3 and len(DECODER_METHODS) > len(VARIANTS) // 2


@pytest.mark.parametrize("variant", ENCODER_METHODS)
def test_each_position_method_breaks_permutation_equivariance(variant):
    model, d = build_model(["--arch", f"{variant}_iwslt_de_en"])
    src, _ = random_batch(d, [12], seed=7)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    out, out_perm = encoder_states(model, src), encoder_states(model, src[:, perm])
    assert (out_perm - out[perm]).abs().max().item() > 1e-3, f"{variant}: the encoder ignores word order"


def last_decoder_state(model, d, prev):
    src, src_len = random_batch(d, [5], seed=3)
    with torch.no_grad():
        features, _ = model.decoder(prev, encoder_out=model.encoder(src, src_len), features_only=True)
    return features[0, -1]


def prefix_permutation_changes_the_last_state(variant, *flags):
    """A one-layer decoder: without a position signal its last state sees the prefix as a set,
    so permuting the earlier tokens leaves it unchanged."""
    model, d = build_model(["--arch", f"{variant}_iwslt_de_en", "--decoder-layers", "1", *flags])
    prev = torch.arange(d.nspecial, d.nspecial + 8).unsqueeze(0)
    permuted = prev[:, [3, 0, 6, 1, 5, 2, 4, 7]]  # the last token stays last
    return (last_decoder_state(model, d, prev) - last_decoder_state(model, d, permuted)).abs().max().item()


def test_decoder_without_position_signal_sees_its_prefix_as_a_set():
    assert prefix_permutation_changes_the_last_state("nope") < 1e-5


@pytest.mark.parametrize("variant", DECODER_METHODS)
def test_each_decoder_position_method_gives_the_decoder_a_position_signal(variant):
    # AT5 starts with a weak signal: Wu et al.'s slopes (U(1, 15) / 256) and MLP (N(0, 0.1^2), biases 0.1)
    # give biases that differ little across distances at initialisation (still 30x the no-PE bound)
    bound = 1e-4 if variant == "at5bias" else 1e-3
    assert prefix_permutation_changes_the_last_state(variant) > bound, f"{variant}: decoder has no position signal"


# ---------------------------------------------------------------------------------------------
# length generalisation: TINY models have --max-source/target-positions 64; sentences of 80 tokens
LONG = 80


def long_batch(d, length=LONG):
    return random_batch(d, [length, 30], seed=11)


@pytest.mark.parametrize("variant", VARIANTS)
def test_long_sentences_run_where_no_table_limits_them_and_are_refused_naming_the_table_otherwise(variant):
    """A model with no position-indexed table runs 80 tokens past its 64 positions; one with a source table is
    refused beyond it with an error naming the option that sizes the table (a table larger than 80 is cut to 70
    by that option), and runs within it."""
    flags = ["--arch", f"{variant}_iwslt_de_en"]
    model, d = build_model(flags)
    limits = position_limits(model)
    if limits["source"] is None and limits["target"] is None:
        src, src_len = long_batch(d)
        prev = torch.cat([torch.full((2, 1), d.eos()), src[:, :-1].flip(1)], dim=1)  # targets of 80 too
        with torch.no_grad():
            logits, _ = model(src, src_len, prev)
        assert torch.isfinite(logits).all()
        return
    assert limits["source"] is not None, f"{variant}: only the decoder has a table (not covered here)"
    option = limits["source"].option
    if limits["source"].tokens >= LONG:
        model, d = build_model(flags + [option, str(LONG - 10)])
    src, src_len = long_batch(d)
    with pytest.raises(ValueError, match=option):
        model.encoder(src, src_len)
    short, short_len = random_batch(d, [20], seed=1)
    model.encoder(short, short_len)  # within the table: fine


def test_learned_decoder_positions_raise_a_clear_error_naming_max_target_positions():
    model, d = build_model(["--arch", "learnedpe_iwslt_de_en"])
    src, src_len = random_batch(d, [5], seed=1)
    prev = torch.full((1, 70), d.nspecial + 2)
    with pytest.raises(ValueError, match="--max-target-positions"):
        model(src, src_len, prev)


def test_shaw_beyond_k_equals_clipped_distance():
    """Relative methods extrapolate by clipping: a key at distance 70 scores like one at K."""
    model, d = build_model(["--arch", "shaw_konly_iwslt_de_en", "--encoder-self-max-relative-position", "4"])
    energy = model.encoder.layers[0].self_attn.energy
    q = torch.randn(1, 1, 32)
    keys = torch.randn(1, 4, 1, 8).expand(1, 4, 2, 8)
    far = energy.logits(energy.query_features(q, torch.tensor([[70]])), torch.tensor([[70]]), keys, torch.tensor([[0, 66]]))
    torch.testing.assert_close(far[..., 0], far[..., 1])


# ---------------------------------------------------------------------------------------------
# the papers' equations
def context_for(length, batch=1, padding_mask=None):
    return PositionFrame.of_padding(padding_mask, batch, length)


def rpe_spec(side="encoder", **options):
    opts = {"rpe-heads": 1, "rpe-cell": "gru", "rpe-direction": "forward", "rpe-sinusoids": "on"}
    opts.update({k.replace("_", "-"): v for k, v in options.items()})
    return PositionEncodingSpec(name="rpehead", side={"encoder": ENCODER, "decoder": DECODER}[side], embed_dim=16,
                                num_heads=4, dropout=0.0, options=opts)


@pytest.mark.parametrize("per_head", [False, True])
def test_rpe_equals_direct_implementation_of_eqs_1_to_5(per_head):
    torch.manual_seed(0)
    rpe = RecurrentPositionalEmbedding(rpe_spec(), per_head=per_head)
    x = torch.randn(1, 6, 16)
    out = rpe(x, context_for(6))
    d_r, d_p = 4, 12  # t = 1 of H = 4 heads, D = 16
    cell = rpe.cells[0]
    r_prev, rs = torch.zeros(1, d_r), []
    for j in range(6):  # Eq. 1: r_j = tanh(f_RNN(x^r_j, r_{j-1}) W^r + b^r)
        h = cell.cell(x[:, j, d_p:], r_prev)
        r_prev = torch.tanh(h @ cell.output.weight.t() + cell.output.bias)
        rs.append(r_prev)
    r = torch.stack(rs, dim=1)
    # Eq. 2: pe_(j,2i) = sin(j / 10000^(2i/d_p)), pe_(j,2i+1) = cos(j / 10000^(2i/d_p)); Eq. 3: p = x^p + pe
    angle = torch.arange(6.0)[:, None] / 10000 ** (2 * (torch.arange(d_p) // 2) / d_p)
    pe = torch.where(torch.arange(d_p) % 2 == 0, torch.sin(angle), torch.cos(angle))
    p = x[..., :d_p] + pe
    if not per_head:
        expected = torch.cat([p, r], dim=-1)  # Eq. 4
    else:  # Eq. 5: [p^1 : r^1 : ... : p^4 : r^4]
        expected = torch.cat([torch.cat([p[..., 3 * h: 3 * h + 3], r[..., h: h + 1]], -1) for h in range(4)], -1)
    torch.testing.assert_close(out, expected)


def test_rpe_backward_and_bidirectional_read_the_sentence_right_to_left():
    torch.manual_seed(0)
    x = torch.randn(1, 5, 16)
    backward = RecurrentPositionalEmbedding(rpe_spec(rpe_direction="backward"), per_head=False)
    out = backward(x, context_for(5))
    flipped = backward.cells[0].run(x[..., 12:].flip(1)).flip(1)
    torch.testing.assert_close(out[..., 12:], flipped)
    bi = RecurrentPositionalEmbedding(rpe_spec(rpe_direction="bidirectional"), per_head=False)
    r = bi(x, context_for(5))[..., 12:]
    torch.testing.assert_close(r[..., :2], bi.cells[0].run(x[..., 12:]))
    torch.testing.assert_close(r[..., 2:], bi.cells[1].run(x[..., 12:].flip(1)).flip(1))


def test_rpehead_first_layer_is_the_transformers_multi_head_attention():
    """RecPE Eqs. 4-5: O_h = Att(Q W^Q_h, K W^K_h, V W^V_h) with Q, K, V from all of T (or M): the
    first layer is the side's own self-attention, so every head sees P and R."""
    model, d = build_model(["--arch", "rpehead_iwslt_de_en", "--encoder-rpe-heads", "1"])
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"
    assert type(model.decoder.layers[0].self_attn).__name__ == "MultiheadAttention"


def test_rpehead_sliced_legacy_first_layer_feeds_t_heads_from_the_recurrent_part_only():
    """The reading of checkpoints stored without the defaults version (their stored legacy reading
    rpe-reading sliced-legacy): with d_r = t D / H, perturbing R changes the attention of the last t heads only."""
    from posmix_fairseq.harness.testing import build_stored_model, stored_arguments
    model, d = build_stored_model(stored_arguments(["--arch", "rpehead_iwslt_de_en"],
                                                   ["encoder_rpe_reading", "encoder_rpe_heads"]))
    assert model.encoder.position_encoding.encoding.d_r == 8  # t = 1
    attn = model.encoder.layers[0].self_attn  # heads from input slices
    x = torch.randn(7, 1, 32)
    y = x.clone()
    y[..., 24:] += torch.randn(7, 1, 8)  # R = the last t * D / H = 8 dims
    _, wx = mix(attn, x, need_weights=False, need_head_weights=True)
    _, wy = mix(attn, y, need_weights=False, need_head_weights=True)
    assert torch.allclose(wx[:3], wy[:3]) and not torch.allclose(wx[3], wy[3])
    assert type(model.encoder.layers[1].self_attn).__name__ == "MultiheadAttention"  # later layers unchanged


def test_posnet_embed_equals_eq_24_with_true_positions():
    model, d = build_model(["--arch", "posnet_embed_iwslt_de_en", "--encoder-posnet-embed-activation", "relu"])
    stage = model.encoder.position_encoding
    posnet = stage.encoding
    x = torch.randn(2, 5, 32)
    pad = torch.tensor([[True, True, False, False, False], [False] * 5])  # row 0 left-padded
    out = posnet(x, context_for(5, 2, pad))
    for b, offset in ((0, 2), (1, 0)):
        for j in range(offset, 5):
            h = F.relu((x[b, j] @ posnet.w1.weight.t()) @ posnet.kernels[j - offset, 0]) @ posnet.w2.weight.t()
            torch.testing.assert_close(out[b, j], h + x[b, j])


def test_posnet_kernels_allow_a_batch_wider_than_the_table_when_its_sentences_fit():
    model, d = build_model(["--arch", "posnet_embed_iwslt_de_en", "--encoder-posnet-embed-max-positions", "8"])
    posnet = model.encoder.position_encoding.encoding
    x = torch.randn(1, 12, 32)
    pad = torch.tensor([[True] * 5 + [False] * 7])  # 7 tokens, left-padded to 12 columns
    wide = posnet(x, context_for(12, 1, pad))
    torch.testing.assert_close(wide[0, 5:], posnet(x[:, 5:], context_for(7))[0])


def test_posnet_attn_equals_eqs_20_and_23():
    model, d = build_model(["--arch", "posnet_attn_iwslt_de_en"])
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(6, 2, 32)
    pad = torch.tensor([[True, False, False, False, False, False], [False] * 6])
    out, _ = mix(attn, x, key_padding_mask=pad)
    e = attn.energy
    phi = attn.values.kernels.weight  # (P, 1, Dh, Dh): Phi in R^{L x d_k x d_k}, the same for every head
    assert phi.shape == (128, 1, 8, 8)
    for b, offset in ((0, 1), (1, 0)):
        xs = x[offset:, b]
        q = (xs @ e.q_proj.weight.t() + e.q_proj.bias).view(-1, 4, 8).transpose(0, 1) / math.sqrt(8)
        k = (xs @ e.k_proj.weight.t() + e.k_proj.bias).view(-1, 4, 8).transpose(0, 1)
        v = (xs @ attn.values.projection.weight.t() + attn.values.projection.bias).view(-1, 4, 8).transpose(0, 1)  # (H, M, Dh)
        # Eq. 23 with act = ReLU (the default: PosNet-Embed's act, Figure 5), true positions
        v_pos = F.relu(torch.einsum("hmd,mde->hme", v, phi[: v.size(1), 0])) + v
        c = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v_pos  # Eq. 20
        expected = c.transpose(0, 1).reshape(-1, 32) @ attn.out_proj.weight.t() + attn.out_proj.bias
        torch.testing.assert_close(out[offset:, b], expected, atol=1e-5, rtol=1e-5)


def test_posnet_attn_max_positions_follow_the_kernel_table():
    """The arch defaults the model's max positions to P (so fairseq filters longer sentences and stops
    decoding there); a model whose max positions exceed P is a build-time error."""
    model, _ = build_model(["--arch", "posnet_attn_iwslt_de_en"], tiny=False)
    assert model.max_positions() == (128, 128)
    with pytest.raises(ValueError, match=r"--max-target-positions 200 exceeds the PosNet-Attn kernel table of 64 "
                                         r"positions \(--decoder-self-posnet-max-positions\)"):
        build_model(["--arch", "posnet_attn_iwslt_de_en", "--max-target-positions", "200",
                     "--decoder-self-posnet-max-positions", "64"])


def test_posnet_attn_dropout_is_on_the_posnet_output_before_the_residual():
    """PosNet paper Section 3.3: "the dropout is also applied to the output of PosNet modules ...
    immediately followed by the residual connection": Dropout(act(v Phi)) + v, so a dropped entry is v's."""
    model, _ = build_model(["--arch", "posnet_attn_iwslt_de_en", "--encoder-self-posnet-dropout", "0.5"])
    values = model.encoder.layers[0].self_attn.values
    x, positions, pad = torch.randn(6, 2, 32), torch.arange(6).repeat(2, 1), torch.zeros(2, 6, dtype=torch.bool)
    plain = values.projection(x).view(6, 2, 4, 8).permute(1, 2, 0, 3)  # (B, H, S, Dh): v
    with torch.no_grad():
        values.eval()
        kernelled = values(x, positions, pad) - plain  # act(v Phi)
        values.train()
        torch.manual_seed(0)
        dropped = values(x, positions, pad) - plain
    active = kernelled.abs() > 1e-6  # act = ReLU zeroes some of act(v Phi) before any dropout
    zero = (dropped.abs() < 1e-6) & active
    assert 0.3 < zero.float().sum() / active.float().sum() < 0.7
    torch.testing.assert_close(dropped[active & ~zero], 2 * kernelled[active & ~zero], atol=1e-5, rtol=1e-5)


def test_posnet_kernels_are_shared_across_layers_but_not_between_encoder_and_decoder():
    model, _ = build_model(["--arch", "posnet_attn_iwslt_de_en"])
    enc = [layer.self_attn.values.kernels.weight for layer in model.encoder.layers]
    dec = [layer.self_attn.values.kernels.weight for layer in model.decoder.layers]
    assert enc[0] is enc[1] and dec[0] is dec[1] and enc[0] is not dec[0]
    unshared, _ = build_model(["--arch", "posnet_attn_iwslt_de_en", "--encoder-self-posnet-share-kernels", "off"])
    first, second = (layer.self_attn.values.kernels.weight for layer in unshared.encoder.layers[:2])
    assert first is not second


def reference_t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """Raffel et al.'s bucket of memory_position - query_position, written out per element."""
    ret, n = 0, -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_equal_the_reference_definition(bidirectional):
    distances = torch.arange(-300, 301)  # query - key
    ours = t5_bucket(distances, bidirectional, 32, 128)
    ref = [reference_t5_bucket(-int(dd), bidirectional, 32, 128) for dd in distances]
    assert ours.tolist() == ref


@pytest.mark.parametrize("bidirectional", [True, False])
def test_at5_equals_t5_at_initialisation_and_stays_monotone(bidirectional):
    torch.manual_seed(0)
    t5 = ScalarRelativeBias(4, 32, 128, bidirectional, cumulative=False, embed_dim=16)
    at5 = ScalarRelativeBias(4, 32, 128, bidirectional, cumulative=True, embed_dim=16)
    with torch.no_grad():
        at5.bias.copy_(t5.bias)
    qp, kp = torch.arange(200).unsqueeze(0), torch.arange(200).unsqueeze(0)
    torch.testing.assert_close(at5(qp, kp), t5(qp, kp), atol=0, rtol=0)
    # gradients reach the bucket boundaries, and any increments keep u monotone
    at5(qp, kp).pow(2).sum().backward()
    assert at5.increments.grad.abs().sum() > 0
    with torch.no_grad():
        at5.increments.add_(torch.randn_like(at5.increments))
    u = at5.bucket_coordinates()
    assert (u[:, 1:] >= u[:, :-1]).all()


@pytest.mark.parametrize("bidirectional", [True, False])
def test_at5_soft_buckets_equal_a_direct_per_pair_computation(bidirectional):
    """Wu et al. (2021): b_h(n, m) = MLP_h(1 - exp(-alpha_h |n - m|)), alpha_h = ReLU(alpha'_h) / 256,
    one slope and MLP per head and direction (keys after the query use the second), computed here
    pair by pair with torch.nn layers holding the same weights."""
    torch.manual_seed(0)
    heads = 3
    soft = SoftBucketBias(heads, bidirectional, widths=(5, 2)).eval()
    positions = torch.tensor([[0, 0, 1, 2, 3, 4]])  # left padded: the first slot repeats position 0
    got = soft(positions, positions)[0]
    for h in range(heads):
        for i, n in enumerate(positions[0].tolist()):
            for j, m in enumerate(positions[0].tolist()):
                direction = 1 if m > n else 0
                if direction and not bidirectional:
                    assert got[h, i, j] == 0  # masked in the decoder anyway
                    continue
                mlp = torch.nn.Sequential(torch.nn.Linear(1, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2),
                                          torch.nn.ReLU(), torch.nn.Linear(2, 1))
                with torch.no_grad():
                    mlp[0].weight.copy_(soft.w1[direction, h].view(5, 1)); mlp[0].bias.copy_(soft.b1[direction, h])
                    mlp[2].weight.copy_(soft.w2[direction, h].t()); mlp[2].bias.copy_(soft.b2[direction, h])
                    mlp[4].weight.copy_(soft.w3[direction, h].view(1, 2)); mlp[4].bias.copy_(soft.b3[direction, h])
                    alpha = max(float(soft.slopes[direction, h]), 0.0) / 256
                    f = 1 - math.exp(-alpha * abs(n - m))
                    torch.testing.assert_close(got[h, i, j], mlp(torch.tensor([[f]]))[0, 0])
    # the slopes learn: gradients reach them through the soft buckets
    soft(positions, positions).sum().backward()
    assert soft.slopes.grad.abs().sum() > 0


def test_t5_bias_table_is_shared_by_the_layers_of_one_side():
    model, _ = build_model(["--arch", "t5bias_iwslt_de_en"])
    enc = [layer.self_attn.energy.relative_bias for layer in model.encoder.layers]
    dec = [layer.self_attn.energy.relative_bias for layer in model.decoder.layers]
    assert enc[0] is enc[1] and dec[0] is dec[1] and enc[0] is not dec[0]
    assert enc[0].bidirectional and not dec[0].bidirectional


def test_lstm_encoder_equals_torch_bilstm_on_the_unpadded_sentence():
    model, d = build_model(["--arch", "lstmpe_iwslt_de_en"])
    stage = model.encoder.position_encoding
    x = torch.randn(2, 6, 32)
    pad = torch.tensor([[True, True, False, False, False, False], [False] * 6])
    out = stage.encoding(x, context_for(6, 2, pad))
    with torch.no_grad():
        ref, _ = stage.encoding.lstm(x[0:1, 2:])
        ref = stage.encoding.proj(ref)  # 2 x 2D units -> D
    torch.testing.assert_close(out[0, 2:], ref[0])


def test_position_encoding_is_chosen_per_side():
    model, _ = build_model(["--arch", "posmix_transformer_iwslt_de_en", "--encoder-position-encoding", "learned",
                            "--decoder-position-encoding", "none", "--position-blind", "decoder"])
    assert type(model.encoder.embed_positions).__name__ == "LearnedPositionalEmbedding"
    assert model.decoder.embed_positions is None
    model, _ = build_model(["--arch", "nope_iwslt_de_en", "--decoder-position-encoding", "sinusoidal"])
    assert model.encoder.embed_positions is None
    assert type(model.decoder.embed_positions).__name__ == "SinusoidalPositionalEmbedding"


# ---------------------------------------------------------------------------------------------
# parameter formulas (D = 32, H = 4, D_h = 8, FFN 64, 2 + 2 layers, 44-word joined dictionary)
def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_parameter_counts_match_the_formulas():
    D, H, Dh = 32, 4, 8
    base, _ = build_model(["--arch", "nope_iwslt_de_en"])
    # LSTM PE, RPEHead/MPRHead and the Shaw variants against the papers' own numbers:
    # tests/test_paper_counts_relative_and_recurrent.py
    # PosNet-Embed: 2 D d_p + P d_p^2 per side (d_p = 16 in the tiny models, P = 256)
    embed, _ = build_model(["--arch", "posnet_embed_iwslt_de_en"])
    assert n_params(embed) - n_params(base) == 2 * (2 * D * 16 + 256 * 16 * 16)
    # PosNet-Attn: P d_k^2 per side (Phi in R^{L x d_k x d_k}, shared by the heads and layers; P = 128)
    attn, _ = build_model(["--arch", "posnet_attn_iwslt_de_en"])
    assert n_params(attn) - n_params(base) == 2 * 128 * Dh * Dh
    # T5: B H per side; cumulative AT5 adds max_distance increments per direction (2 in the encoder)
    t5, _ = build_model(["--arch", "t5bias_iwslt_de_en"])
    assert n_params(t5) - n_params(base) == 2 * 32 * H
    from posmix_fairseq.harness.testing import build_stored_model, stored_arguments
    cumulative, _ = build_stored_model(stored_arguments(["--arch", "at5bias_iwslt_de_en"]))  # the legacy reading
    assert n_params(cumulative) - n_params(t5) == 2 * 128 + 128
    # AT5 (Wu et al.): per head and direction a slope and the MLP 1 -> 32 -> 4 -> 1 (2 directions in the encoder)
    at5, _ = build_model(["--arch", "at5bias_iwslt_de_en"])
    assert n_params(at5) - n_params(base) == 3 * H * (1 + (32 + 32) + (32 * 4 + 4) + (4 + 1))


def test_big_posnet_embed_uses_d_p_256_and_base_128():
    """Sizes from the arch itself (not the tiny test sizes)."""
    for arch, d_p in (("posnet_embed_wmt_en_de", 128), ("posnet_embed_wmt_en_de_big", 256)):
        model, _ = build_model(["--arch", arch, "--encoder-layers", "1", "--decoder-layers", "1",
                                "--encoder-posnet-embed-max-positions", "4", "--decoder-posnet-embed-max-positions", "4"],
                               tiny=False)
        assert model.encoder.position_encoding.encoding.kernels.shape == (4, 1, d_p, d_p)


# ---------------------------------------------------------------------------------------------
ERRORS = [
    (["--arch", "rpehead_iwslt_de_en", "--decoder-rpe-direction", "bidirectional"], "--decoder-rpe-direction"),
    (["--arch", "rpehead_iwslt_de_en", "--encoder-rpe-heads", "4"], "--encoder-rpe-heads"),
    (["--arch", "mprhead_iwslt_de_en", "--encoder-embed-dim", "24", "--decoder-embed-dim", "24",
      "--encoder-rpe-heads", "1"], "--encoder-rpe-heads"),  # d_r = 6 cannot be split into 4 heads
    (["--arch", "t5bias_iwslt_de_en", "--decoder-cross-mixer", "t5bias"], "--decoder-cross-mixer: invalid choice: 't5bias'"),
    (["--arch", "t5bias_iwslt_de_en", "--encoder-self-t5-buckets", "2"], "--encoder-self-t5-buckets"),
    (["--arch", "t5bias_iwslt_de_en", "--decoder-self-t5-max-distance", "8"], "--decoder-self-t5-max-distance"),
    (["--arch", "posnet_embed_iwslt_de_en", "--decoder-posnet-embed-dropout", "1.5"], "--decoder-posnet-embed-dropout"),
    (["--arch", "posnet_embed_iwslt_de_en", "--encoder-posnet-embed-dim", "0"], "--encoder-posnet-embed-dim"),
    (["--arch", "posnet_attn_iwslt_de_en", "--decoder-self-posnet-max-positions", "0"],
     "--decoder-self-posnet-max-positions"),
    (["--arch", "lstmpe_iwslt_de_en", "--encoder-position-lstm-layers", "0"], "--encoder-position-lstm-layers"),
]


@pytest.mark.parametrize("flags,message", ERRORS, ids=[m for _, m in ERRORS])
def test_bad_options_raise_clear_errors(flags, message):
    with pytest.raises(ValueError, match=message):
        build_model(flags)
