"""The released configuration of Gated position-based attention (``rposnet_released_*``,
``aposnet_released_*``) against the released code's own equations.

The references below are written from github.com/apptek/posnet-position_based_attention (read, not
copied): ``models/posnet/models/posnet.py`` (``PosNetEncoder``, ``PosNetDecoder``, their layers and
``PositionBasedAttention``) and ``pytorchmt/pytorchmt/model/modules.py`` (``PositionalEmbedding``,
``SinusodialPositionalEmbedding``, ``MultiHeadAttention``, ``LayerNormalization``). Given our model's
weights they compute the encoder output and the decoder features of a tiny model, sentence by
sentence; ours runs the sentences in one left-padded batch. This covers use_pos_embed, the
LayerNorm on the learned table, pre-LN layers and the interleaved sinusoids; the table dropout, the
attention dropout and the sources that start with EOS have their own tests.

Their ``LayerNormalization`` uses the unbiased variance and eps 1e-8 inside the root; ours
(torch's) the biased one and eps 1e-5. The references take their formula with the gain a = w
sqrt(D / (D - 1)) of our weight w, which is the same function up to the eps (a reparametrisation,
docs/choices.md); the tolerance covers the eps.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import build_model, make_dictionary, parse_model_args, random_batch, run_generate, run_train
from posmix_fairseq.models.architectures import VARIANTS
from posmix_fairseq.models.posmix_transformer import PosMixTransformerModel

RELEASED = tuple(variant for variant in VARIANTS if variant.endswith("_released"))  # the arch table's released rows
K = 2  # small enough that the test sentences reach the clipped distances


# ---- the released code's equations ----------------------------------------------------------------

def released_layer_norm(x, ours):
    """LayerNormalization: (x - mean) / sqrt(var + 1e-8) * a + b, var the unbiased variance
    (torch.var), with a = w sqrt(D / (D - 1)) from our LayerNorm's w."""
    d = x.size(-1)
    a, b = ours.weight * math.sqrt(d / (d - 1)), ours.bias
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-8) * a + b


def released_sinusoids(length, d):
    """SinusodialPositionalEmbedding: pe[p, 0::2] = sin(p exp(-(i / D) ln 10000)), pe[p, 1::2] = cos(..),
    i = 0, 2, 4, ..."""
    p = torch.arange(length, dtype=torch.float).unsqueeze(-1)
    angles = p * torch.exp(-(torch.arange(0, d, 2, dtype=torch.float) / d) * math.log(10000))
    pe = torch.zeros(length, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


def linear(x, module):
    return x @ module.weight.t() + module.bias


def heads(x, h):
    """(L, D) -> (H, L, D/H)"""
    return x.view(x.size(0), h, -1).transpose(0, 1)


def released_position_attention(kind, q_pos, k_pos, v_in, g_in, mixer, h, causal):
    """PositionBasedAttention.__call__ for one sentence: v = LN(GeLU(W_v v_in)), g = GeLU(W_g g_in);
    aPosNet a = (W_q1 q_pos)(W_k k_pos)^T, rPosNet a[n, m] = (W_q2 q_pos_n) . rel_embed[clamp(m - n, -K, K) + K];
    softmax(a / sqrt(D_h)) v, times g, W_o."""
    energy, values = mixer.energy, mixer.values
    v = heads(released_layer_norm(F.gelu(linear(v_in, values.projection)), values.norm), h)
    g = heads(F.gelu(linear(g_in, mixer.gating.gate_proj)), h)
    if kind == "rposnet":
        # their rows are indexed by clamp(m - n) + K; ours (sliced, one D-vector per distance) by clamp(n - m) + K
        rel = energy.relative_embeddings.weight.flip(0)
        r = heads(rel, h)  # (H, 2K+1, D_h)
        scores = heads(linear(q_pos, energy.q_proj), h) @ r.transpose(-1, -2)  # (H, I, 2K+1)
        n, m = torch.arange(q_pos.size(0)).unsqueeze(1), torch.arange(k_pos.size(0)).unsqueeze(0)
        index = ((m - n).clamp(-K, K) + K).expand(h, -1, -1)
        a = torch.gather(scores, -1, index)
    else:
        a = heads(linear(q_pos, energy.q_proj), h) @ heads(linear(k_pos, energy.k_proj), h).transpose(-1, -2)
    a = a / math.sqrt(v.size(-1))
    if causal:
        a = a.masked_fill(torch.ones_like(a, dtype=torch.bool).triu(1), float("-inf"))
    o = (a.softmax(-1) @ v) * g
    return linear(o.transpose(0, 1).reshape(q_pos.size(0), -1), mixer.out_proj)


def released_mha(s, enc, attn, h):
    """MultiHeadAttention (cross-attention): softmax(W_q s (W_k enc)^T / sqrt(D_h)) W_v enc, W_o."""
    q, k, v = heads(linear(s, attn.q_proj), h), heads(linear(enc, attn.k_proj), h), heads(linear(enc, attn.v_proj), h)
    o = ((q @ k.transpose(-1, -2)) / math.sqrt(q.size(-1))).softmax(-1) @ v
    return linear(o.transpose(0, 1).reshape(s.size(0), -1), attn.out_proj)


def released_embed(tokens, side, role, kind):
    """PositionalEmbedding (rPosNet, learned): x = sqrt(D) (E[w] + P[p]), the attention's j = LN(P[p]);
    SinusodialPositionalEmbedding (aPosNet): x = sqrt(D) E[w] + S[p], j = S[p] (then dropout, off here)."""
    d = side.embed_tokens.weight.size(1)
    word = side.embed_tokens.weight[tokens]
    if kind == "rposnet":
        tables = side.mixer_position_tables
        name = next(k for k in tables if k.startswith(role) and not k.endswith("layernorm"))
        pos = tables[name].weight[: len(tokens)]
        return (word + pos) * math.sqrt(d), released_layer_norm(pos, tables[name + "_layernorm"])
    pos = released_sinusoids(len(tokens), d)
    return word * math.sqrt(d) + pos, pos


def released_ffn(x, layer):
    return linear(torch.relu(linear(released_layer_norm(x, layer.final_layer_norm), layer.fc1)), layer.fc2)


def released_encoder(tokens, encoder, kind, h):
    """PosNetEncoder: pre-LN layers (LN -> attention -> + residual; LN -> FFN -> + residual), final LN."""
    x, j = released_embed(tokens, encoder, "source", kind)
    for layer in encoder.layers:
        x = x + released_position_attention(kind, j, j, released_layer_norm(x, layer.self_attn_layer_norm),
                                            released_layer_norm(x, layer.self_attn_layer_norm), layer.self_attn, h,
                                            causal=False)
        x = x + released_ffn(x, layer)
    return released_layer_norm(x, encoder.layer_norm)


def released_decoder_features(tokens, enc, decoder, kind, h):
    """PosNetDecoder up to its final LN: causal position-based self-attention, MHA cross-attention."""
    s, i = released_embed(tokens, decoder, "target", kind)
    for layer in decoder.layers:
        normed = released_layer_norm(s, layer.self_attn_layer_norm)
        s = s + released_position_attention(kind, i, i, normed, normed, layer.self_attn, h, causal=True)
        s = s + released_mha(released_layer_norm(s, layer.encoder_attn_layer_norm), enc, layer.encoder_attn, h)
        s = s + released_ffn(s, layer)
    return released_layer_norm(s, decoder.layer_norm)


# ---- the tests --------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", RELEASED)
def test_released_archs_compute_what_the_released_code_computes(variant):
    kind = variant.split("_")[0]
    clip = ["--encoder-self-max-relative-position", str(K), "--decoder-self-max-relative-position", str(K)]
    model, d = build_model(["--arch", f"{variant}_iwslt_de_en", *(clip if kind == "rposnet" else [])])
    with torch.no_grad():  # weights away from their initial values: LayerNorm gains and biases too
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    h = model.encoder.layers[0].self_attn.num_heads
    src, src_lengths = random_batch(d, [9, 5], seed=3)
    tgt, _ = random_batch(d, [7, 4], seed=4, left_pad=False)
    tgt = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)  # [EOS] y, right-padded
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        features, _ = model.decoder.extract_features(tgt, encoder_out)
        for b, (n, t) in enumerate(zip([9, 5], [7, 4])):
            tokens = src[b, src.size(1) - n:]
            enc = released_encoder(tokens, model.encoder, kind, h)
            ours = encoder_out["encoder_out"][0][src.size(1) - n:, b]
            torch.testing.assert_close(ours, enc, atol=2e-4, rtol=1e-4)
            dec = released_decoder_features(tgt[b, :t], enc, model.decoder, kind, h)
            torch.testing.assert_close(features[b, :t], dec, atol=2e-4, rtol=1e-4)


def test_the_embeddings_and_the_mixers_share_one_table():
    model, _ = build_model(["--arch", "rposnet_released_iwslt_de_en"])
    for side in (model.encoder, model.decoder):
        table = side.position_encoding.encoding._table
        assert all(layer.self_attn.energy.query_table is table for layer in side.layers)
        assert sum(p.numel() for p in side.layernorm_embedding.parameters()) == 0  # no copy of its own


@pytest.mark.parametrize("size,dropout", [("iwslt_de_en", 0.3), ("wmt_en_de", 0.1), ("wmt_en_de_big", 0.3)])
def test_released_configs_dropouts_k_lengths_and_pre_ln(size, dropout):
    """posnet*.yaml: attention dropout = dropout, the same dropout on n~, K = 16 (Big too),
    max_sentence_length 128; every layer pre-LN."""
    for variant in RELEASED:
        args = parse_model_args(["--arch", f"{variant}_{size}"], tiny=False)
        assert args.dropout == args.attention_dropout == dropout
        assert args.encoder_self_position_table_dropout == args.decoder_self_position_table_dropout == dropout
        assert args.encoder_normalize_before and args.decoder_normalize_before
        assert args.max_source_positions == args.max_target_positions == 128
        if variant == "rposnet_released":
            assert args.encoder_self_max_relative_position == args.decoder_self_max_relative_position == 16


def test_table_dropout_drops_the_normalised_rows_in_training_only():
    model, d = build_model(["--arch", "rposnet_released_iwslt_de_en", "--encoder-self-position-table-dropout", "0.5"])
    energy = model.encoder.layers[0].self_attn.energy
    positions = torch.arange(20).unsqueeze(0)
    rows = lambda: energy.table_rows(energy.query_table, energy.__dict__["_query_norm"], positions, torch.float32)
    kept = rows()  # eval: LayerNorm only
    torch.testing.assert_close(kept, torch.nn.functional.layer_norm(
        energy.query_table.weight[:20], (32,), energy.__dict__["_query_norm"].weight,
        energy.__dict__["_query_norm"].bias).unsqueeze(0))
    energy.train()
    dropped = rows()
    zero = dropped == 0
    assert 0.3 < zero.float().mean() < 0.7
    torch.testing.assert_close(dropped[~zero], 2 * kept[~zero])


@pytest.mark.parametrize("flags,message", [
    (["--arch", "rposnet_iwslt_de_en", "--encoder-self-position-table-dropout", "1.0"],
     r"--encoder-self-position-table-dropout: 1.0 is out of range: must be a finite number from 0.0 to 1.0 \(exclusive\)"),
    (["--arch", "rposnet_iwslt_de_en", "--encoder-self-absolute-sinusoids", "interleaved"],
     r"--encoder-self-absolute-sinusoids interleaved applies to sinusoidal tables only"),
    (["--arch", "shaw_iwslt_de_en", "--encoder-self-position-table-layernorm", "on"],
     r"--encoder-self-position-table-layernorm is read only by the mixer\(s\) aposnet, rposnet"),
    (["--arch", "posmix_transformer_iwslt_de_en", "--encoder-position-encoding", "mixer-table"],
     r"--encoder-position-encoding mixer-table .* --encoder-self-mixer mha has none"),
])
def test_bad_released_options_are_clear_errors(flags, message):
    with pytest.raises(ValueError, match=message):
        build_model(flags)


# ---- sources that start with EOS (task posmix_translation) -------------------------------------------

def test_released_model_needs_a_task_that_starts_sources_with_eos():
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask
    d = make_dictionary()
    args = parse_model_args(["--arch", "rposnet_released_iwslt_de_en"])
    with pytest.raises(ValueError, match=r"start with EOS .* use --task posmix_translation"):
        PosMixTransformerModel.build_model(args, TranslationTask(TranslationConfig(data="x"), d, d))
    explicit = PosMixTranslationTask(PosMixTranslationConfig(data="x", source_prefix="none"), d, d)
    with pytest.raises(ValueError, match=r"--source-prefix none, but the model was trained with --source-prefix eos"):
        PosMixTransformerModel.build_model(parse_model_args(["--arch", "rposnet_released_iwslt_de_en"]), explicit)
    task = PosMixTranslationTask(PosMixTranslationConfig(data="x"), d, d)  # unset: takes the model's
    PosMixTransformerModel.build_model(parse_model_args(["--arch", "rposnet_released_iwslt_de_en"]), task)
    assert task.source_prefix == "eos"
    item = task.build_dataset_for_inference([torch.tensor([7, 8, d.eos()])], [3])[0]  # fairseq-interactive
    assert item["source"].tolist() == [d.eos(), 7, 8, d.eos()]
    with pytest.raises(ValueError, match=r"--source-prefix 'bos': valid values are none, eos"):
        PosMixTranslationTask(PosMixTranslationConfig(data="x", source_prefix="bos"), d, d)


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    from helpers import binarized_toy_corpus
    return binarized_toy_corpus(tmp_path_factory.mktemp("toy"), sizes={"train": 200, "valid": 20, "test": 12})


def test_released_rposnet_trains_decodes_and_scores_with_sources_starting_with_eos(toy_data, tmp_path):
    run_train(toy_data, str(tmp_path), ["--arch", "rposnet_released_iwslt_de_en", "--task", "posmix_translation"])
    checkpoint = str(tmp_path / "checkpoint_last.pt")
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert state["cfg"]["model"].source_prefix == state["cfg"]["task"]["source_prefix"] == "eos"
    # a fresh process; the task takes the stored prefix (fairseq prints S- lines without EOS)
    result = run_generate(toy_data, checkpoint, "--task", "posmix_translation", "--print-alignment")
    assert sum(line.startswith("H-") for line in result.stdout.splitlines()) == 12, result.stderr[-2000:]
    assert "prepending src bos: 2" in result.stderr  # fairseq's own log line of prepend_bos_src
    # what fairseq-generate feeds the model: the same loading, in this process
    from posmix_fairseq.harness.fairseq_loading import load_for_inference
    _, task, _ = load_for_inference(toy_data, checkpoint, ["--task", "posmix_translation"])
    sources = [task.dataset("test")[i]["source"] for i in range(12)]
    eos = task.source_dictionary.eos()
    assert all(s[0] == eos and s[-1] == eos and (s[1:-1] != eos).all() for s in sources)
    scored = run_generate(toy_data, checkpoint, "--task", "posmix_translation", "--score-reference")
    assert sum(line.startswith("H-") for line in scored.stdout.splitlines()) == 12, scored.stderr[-2000:]
    wrong = run_generate(toy_data, checkpoint)  # --task translation would feed sources without EOS
    assert wrong.returncode != 0 and "use --task posmix_translation" in wrong.stderr
