"""Unit checks of the mixers against direct implementations of the papers' equations."""
import dataclasses
import math
import re

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention

from helpers import (build_model, mix, mixer_spec, parse_model_args, random_batch, standalone_mixer,
                     standalone_resources)
from posmix_fairseq.harness.testing import ParseRefusal
from posmix_fairseq.core.position_tables import SinusoidalPositionTable, interleaved_sinusoids, sinusoidal_encoding
from posmix_fairseq.core.positions import clipped_relative_index
from posmix_fairseq.mixers import MIXER_REGISTRY, build_mixer
from posmix_fairseq.mixers.alibi import alibi_slopes
from posmix_fairseq.mixers.engine import ContentEnergy, split_heads
from posmix_fairseq.mixers import EnergyMixingAttention


spec = mixer_spec


def test_ungated_content_mixer_equals_fairseq_multihead_attention():
    torch.manual_seed(0)
    ours = EnergyMixingAttention(spec("mha"), standalone_resources(), ContentEnergy(spec("mha")))
    ref = MultiheadAttention(16, 4, self_attention=True)
    with torch.no_grad():
        for a, b in [(ours.energy.q_proj, ref.q_proj), (ours.energy.k_proj, ref.k_proj),
                     (ours.values.projection, ref.v_proj), (ours.out_proj, ref.out_proj)]:
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)
    x = torch.randn(7, 3, 16)
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[1, :2] = True
    out, w = mix(ours, x, key_padding_mask=mask)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=mask, need_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)


def test_gated_aposnet_equals_direct_implementation_of_eq4_and_eq8():
    torch.manual_seed(0)
    s = spec("aposnet", gated=True)
    mixer = standalone_mixer(s)
    x = torch.randn(5, 2, 16)
    out, _ = mix(mixer, x)
    # direct: positions 0..4, n~ = m~ = sinusoids (Section 5.2), Eq. 8 energies, Eq. 4 gating
    pos = sinusoidal_encoding(torch.arange(5), 16)
    q = (pos @ mixer.energy.q_proj.weight.t() + mixer.energy.q_proj.bias).view(5, 4, 4).transpose(0, 1)
    k = (pos @ mixer.energy.k_proj.weight.t() + mixer.energy.k_proj.bias).view(5, 4, 4).transpose(0, 1)
    a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(4), dim=-1)  # (H, N, M), same for every sentence
    v = F.layer_norm(F.gelu(x @ mixer.values.projection.weight.t() + mixer.values.projection.bias), (16,),
                     mixer.values.norm.weight, mixer.values.norm.bias)
    v = v.view(5, 2, 4, 4).permute(1, 2, 0, 3)  # (B, H, M, Dh)
    c = (a.unsqueeze(0) @ v).permute(2, 0, 1, 3).reshape(5, 2, 16)
    g = F.gelu(x @ mixer.gating.gate_proj.weight.t() + mixer.gating.gate_proj.bias)
    expected = (c * g) @ mixer.out_proj.weight.t() + mixer.out_proj.bias
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def direct_position_mixer(mixer, x, lengths, energies):
    """GPA Eq. 4 with the (H, L, L) position-only energies ``energies(L)`` of each left-padded sentence (its
    real tokens only, computed alone): the outputs (T, B, D) at the real tokens, NaN at padding."""
    out = torch.full_like(x, float("nan"))
    values, gate = mixer.values, mixer.gating
    for b, length in enumerate(lengths):
        xs = x[x.size(0) - length:, b]  # (L, D)
        a = torch.softmax(energies(length), dim=-1)  # (H, L, L), the sentence alone
        v = F.layer_norm(F.gelu(xs @ values.projection.weight.t() + values.projection.bias), (16,),
                         values.norm.weight, values.norm.bias).view(length, 4, 4).transpose(0, 1)
        c = (a @ v).transpose(0, 1).reshape(length, 16) * F.gelu(xs @ gate.gate_proj.weight.t() + gate.gate_proj.bias)
        out[x.size(0) - length:, b] = c @ mixer.out_proj.weight.t() + mixer.out_proj.bias
    return out


def eq8_energies(energy, length):
    """(H, L, L) aPosNet energies of one sentence alone (GPA Eq. 8): (W^Q n~)(W^K m~)^T / sqrt(D_h), with
    sinusoidal n~ = m~."""
    n = sinusoidal_encoding(torch.arange(length), 16)
    q = (n @ energy.q_proj.weight.t() + energy.q_proj.bias).view(length, 4, 4).transpose(0, 1)  # (H, N, Dh)
    k = (n @ energy.k_proj.weight.t() + energy.k_proj.bias).view(length, 4, 4).transpose(0, 1)
    return q @ k.transpose(1, 2) / 2.0


def eq10_energies(energy, length):
    """(H, L, L) rPosNet energies of one sentence alone (GPA Eq. 10): (W^Q n~_n) . Emb_rel[clip(n - m, K)] /
    sqrt(D_h), K = 2."""
    positions = torch.arange(length)
    n = energy.query_table(positions)  # learned n~
    q = (n @ energy.q_proj.weight.t() + energy.q_proj.bias).view(length, 4, 4).transpose(0, 1)  # (H, N, Dh)
    table = energy.relative_embeddings.weight.view(5, 4, 4).transpose(0, 1)  # (H, 2K+1, Dh), sliced
    index = (positions[:, None] - positions[None, :]).clamp(-2, 2) + 2
    return torch.stack([(q[h] @ table[h].t()).gather(1, index) for h in range(4)]) / 2.0


#: mixer -> (the reference of its position-only energies for one sentence, its position table)
POSITION_ONLY_ENERGIES = {"aposnet": (eq8_energies, "sinusoidal"), "rposnet": (eq10_energies, "learned")}


@pytest.mark.parametrize("name", sorted(POSITION_ONLY_ENERGIES))
def test_position_table_path_equals_eqs_8_and_10_on_a_padded_batch(name, monkeypatch):
    """A full forward of aPosNet / rPosNet (no weights asked for) mixes from the energy table, one softmax per
    distinct row of positions and padding: each sentence of a left-padded batch whose lengths repeat gets GPA
    Eq. 4 with its own Eq. 8 / Eq. 10 energies, computed alone; the padding slots and every gradient (training,
    attention dropout 0) are those of dense mixing, the per-token reference."""
    from posmix_fairseq.mixers.engine.mixing import DenseMixing
    torch.manual_seed(0)
    reference, table = POSITION_ONLY_ENERGIES[name]
    mixer = standalone_mixer(spec(name, gated=True, k=2, table=table))

    lengths = [6, 4, 6, 3, 4]
    x = torch.randn(6, 5, 16)
    mask = torch.arange(6)[None, :] < (6 - torch.tensor(lengths))[:, None]  # left padding
    mixer.train()
    with monkeypatch.context() as patched:
        patched.setattr(DenseMixing, "mix", lambda *a: pytest.fail("the call ran dense mixing"))
        out, attn = mix(mixer, x, key_padding_mask=mask, need_weights=False)
    assert attn is None
    expected = direct_position_mixer(mixer, x, lengths, lambda length: reference(mixer.energy, length))
    real = ~mask.t()
    torch.testing.assert_close(out[real], expected[real], atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(out.square().sum(), list(mixer.parameters()))
    dense, _ = mix(mixer, x, key_padding_mask=mask, need_weights=True)  # weights asked for: dense mixing
    torch.testing.assert_close(out, dense, atol=1e-6, rtol=1e-5)
    for grad, dense_grad in zip(grads, torch.autograd.grad(dense.square().sum(), list(mixer.parameters()))):
        torch.testing.assert_close(grad, dense_grad, atol=1e-5, rtol=1e-4)


def test_rposnet_energy_equals_eq10_with_gamma_and_clipping():
    torch.manual_seed(0)
    s = spec("rposnet", placement="decoder_cross", gated=True, k=2, table="learned", gamma=1.5)
    mixer = standalone_mixer(s)
    qpos, kpos = torch.tensor([[0, 1, 2, 3]]), torch.tensor([[0, 1, 2, 3, 4, 5]])
    energy = mixer.energy.logits(torch.zeros(4, 1, 16), qpos, None, kpos)
    n = mixer.energy.query_table(qpos)[0]
    q = (n @ mixer.energy.q_proj.weight.t() + mixer.energy.q_proj.bias).view(4, 4, 4)  # (N, H, Dh)
    table = mixer.energy.relative_embeddings.weight  # (2K+1, D): head h uses slice h (GPA Table 8)
    assert table.shape == (5, 16)
    for i in range(4):
        for j in range(6):
            d = max(-2, min(2, math.floor(1.5 * i) - j))
            expected = (q[i] * table[d + 2].view(4, 4)).sum(-1) / 2.0
            torch.testing.assert_close(energy[0, :, i, j], expected, atol=1e-6, rtol=1e-5)


def test_clipped_relative_index():
    idx = clipped_relative_index(torch.tensor([[0, 3]]), torch.tensor([[0, 1, 9]]), 2.0, 3)
    # floor(2*0)-[0,1,9] = [0,-1,-9] -> clip 3 -> [0,-1,-3] + 3; floor(2*3)-... = [6,5,-3] -> [3,3,-3] + 3
    assert idx.tolist() == [[[3, 2, 0], [6, 6, 0]]]


def test_shaw_value_term_equals_direct_sum():
    torch.manual_seed(0)
    s = spec("shaw", k=2, table="learned")
    mixer = standalone_mixer(s)
    probs = torch.softmax(torch.randn(1, 4, 3, 5), dim=-1)
    qpos, kpos = torch.arange(3).unsqueeze(0), torch.arange(5).unsqueeze(0)
    term = mixer.values.relative_term(probs, qpos, kpos)
    table = mixer.values.relative_values.weight
    for n in range(3):
        expected = sum(probs[0, :, n, m, None] * table[max(-2, min(2, n - m)) + 2] for m in range(5))
        torch.testing.assert_close(term[0, :, n], expected, atol=1e-6, rtol=1e-5)


# GPA Table 8, training column, per attention
# layer: Transformer 4D^2, Shaw K^D + 4D^2, aPosNet 5D^2 (gated), rPosNet K^D + 4D^2 (gated), with
# K^ = 2K + 1. Rel. self-attention (Section 7.2, Table 6) is Shaw without W^K: K^D + 3D^2. The paper
# counts weight matrices only; the layers also hold a bias per D x D map and, gated, Eq. 4's W^G and
# LayerNorm (gate: D^2 + D + 2D). Shaw is read as the shaw_* archs build it (sliced, no a^V).
TABLE8 = {  # mixer -> its training-time parameters per layer, GPA Table 8's form (d: D, k_hat: 2K + 1)
    "mha": lambda d, k_hat: 4 * d * d + 4 * d,
    "shaw": lambda d, k_hat: k_hat * d + 4 * d * d + 4 * d,
    "relattn": lambda d, k_hat: k_hat * d + 3 * d * d + 3 * d,
    "aposnet": lambda d, k_hat: 4 * (d * d + d),  # W^Q, W^K act on the shared position embeddings
    "rposnet": lambda d, k_hat: k_hat * d + 3 * d * d + 3 * d,  # + gate: Table 8's K^D + 4D^2
}


def expected_params(name, gated, d, h, k):
    gate = d * d + d + 2 * d if gated else 0  # W^G and the value LayerNorm (Eq. 4)
    return TABLE8[name](d, 2 * k + 1) + gate


PAPER_READINGS = {"shaw": {"relative-embedding-heads": "sliced", "shaw-value-term": "off"}}


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("name", sorted(TABLE8))
def test_parameter_counts_match_table8_formulas(name, gated):
    for d, h, k in [(512, 8, 16), (1024, 16, 8)]:
        mixer = standalone_mixer(spec(name, gated=gated, k=k, table="learned" if name != "aposnet" else "sinusoidal",
                                 d=d, h=h, options=PAPER_READINGS.get(name)))
        got = sum(p.numel() for p in mixer.parameters())
        assert got == expected_params(name, gated, d, h, k), (name, gated, d)


@pytest.mark.parametrize("layout", ["concatenated", "interleaved"])
def test_a_sinusoidal_table_reads_one_tensor_of_positions_once_and_a_changed_one_again(layout):
    """The layers of a side read the shared table at one tensor of positions per forward: its rows are computed
    once and given again for that tensor, with the bits of a fresh encoding (the integer positions enter the
    product in float32, as .float() gave them); a tensor changed in place, or another one, is read again, inference
    tensors (read once per object: they keep no version); a copy of the table keeps no rows."""
    import copy
    table = SinusoidalPositionTable(16, layout)

    def fresh(positions):
        floats = positions.float()
        return sinusoidal_encoding(floats, 16) if layout == "concatenated" else interleaved_sinusoids(floats, 16, 16)

    positions = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 2]])
    rows = table(positions)
    assert torch.equal(rows, fresh(positions)) and table(positions) is rows
    positions[1, 3] = 700
    again = table(positions)
    assert again is not rows and torch.equal(again, fresh(positions)) and again[1, 3].abs().sum() > 0
    other = positions.clone()
    assert table(other) is not again and torch.equal(table(other), again)
    with torch.inference_mode():
        frozen = torch.arange(5)[None]
        assert table(frozen) is table(frozen) and torch.equal(table(frozen), fresh(frozen))
    assert copy.deepcopy(table)._last is None


def test_position_tables_are_shared_across_layers_not_duplicated():
    model, _ = build_model(["--arch", "rposnet_iwslt_de_en", "--encoder-self-position-table", "learned"])
    names = [n for n, _ in model.named_parameters() if "mixer_position_tables" in n]
    assert names == ["encoder.mixer_position_tables.source_learned_32.weight",
                     "decoder.mixer_position_tables.target_learned_32.weight"]
    assert not any("_tables" in k for k in model.state_dict() if "layers" in k)


def test_a_spec_is_frozen_configuration_and_the_side_lends_its_tables_and_route():
    """A MixerSpec is plain data (assigning to it is an error); the mixers built with one SideResources share
    its position table and read its route, a mixer built with other resources has its own."""
    s = spec("aposnet", table="learned")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.gated = True
    lent, other = standalone_resources(), standalone_resources()
    first, second = build_mixer(s, lent), build_mixer(dataclasses.replace(s, layer_idx=1), lent)
    alone = build_mixer(s, other)
    (table,) = lent.shared_tables.tables.values()  # n~ = m~ in encoder self-attention
    assert first.energy.query_table is table and second.energy.query_table is table
    assert first.energy._key_table is table and alone.energy.query_table is not table
    assert first._route is second._route is lent.route and alone._route is other.route


def test_fully_masked_query_rows_give_no_nan():
    for flags in (["--arch", "rposnet_iwslt_de_en"], ["--arch", "shaw_iwslt_de_en", "--decoder-self-gating", "on"]):
        model, d = build_model(flags)
        src, src_len = random_batch(d, [5, 3])
        # left-padded target: the first pad query of row 1 sees only padding under the causal mask
        prev = torch.tensor([[d.eos(), 5, 6, 7], [d.pad(), d.pad(), d.eos(), 8]])
        model.train()  # gradients must be finite too
        out, _ = model(src, src_len, prev)
        assert torch.isfinite(out).all()
        out[:, -1].sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    mixer = standalone_mixer(spec("rposnet", gated=True))
    x = torch.randn(4, 2, 16)
    mask = torch.tensor([[True] * 4, [False] * 4])
    out, w = mix(mixer, x, key_padding_mask=mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("arch", ["rposnet_iwslt_de_en", "aposnet_iwslt_de_en", "shaw_iwslt_de_en",
                                  "relattn_iwslt_de_en", "posmix_transformer"])
def test_half_precision_forward_runs(arch, dtype):
    model, d = build_model(["--arch", arch])
    model = model.to(dtype)
    src, src_len = random_batch(d, [6, 4])
    prev = torch.tensor([[d.eos(), 5, 6], [d.eos(), 7, d.pad()]])
    with torch.no_grad():
        out, _ = model(src, src_len, prev)
    assert out.dtype == dtype and torch.isfinite(out).all()


def test_unknown_mixer_is_a_clear_error():
    with pytest.raises(ParseRefusal, match=r"argument --encoder-self-mixer: invalid choice: 'nope' \(choose from"):
        parse_model_args(["--arch", "posmix_transformer", "--encoder-self-mixer", "nope"])
    valid = ", ".join(MIXER_REGISTRY.names())
    assert valid.split(", ") == sorted(MIXER_REGISTRY.names()) and "rposnet" in valid
    with pytest.raises(ValueError, match=re.escape(f"--encoder-self-mixer: unknown token mixer 'nope'; "
                                                   f"valid: {valid}")):
        MIXER_REGISTRY.get("nope", "--encoder-self-mixer")


def test_unknown_mixer_message_lists_valid_names():
    with pytest.raises(ParseRefusal) as refused:
        parse_model_args(["--arch", "posmix_transformer", "--decoder-cross-mixer", "nope"])
    err = str(refused.value)
    assert "--decoder-cross-mixer" in err and "invalid choice: 'nope'" in err and "rposnet" in err


@pytest.mark.parametrize("k", ["0", "-2"])
def test_relative_clip_below_one_is_a_clear_error(k):
    with pytest.raises(ParseRefusal, match=r"--decoder-self-max-relative-position: -?\d is out of range: must be an "
                                           r"integer >= 1"):
        build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-self-max-relative-position", k])


def test_sentence_longer_than_learned_position_table_names_the_option():
    model, d = build_model(["--arch", "rposnet_iwslt_de_en"])  # learned n~ table, 64 positions
    src, src_len = random_batch(d, [70])
    with pytest.raises(ValueError, match=r"beyond the learned position table of 64 positions; raise "
                                         r"--max-source-positions"):
        model.encoder(src, src_len)
    prev = torch.full((1, 70), 5)
    with pytest.raises(ValueError, match=r"--max-target-positions"):
        model(src[:, :10], torch.tensor([10]), prev)


def test_missing_length_ratio_without_data_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match=r"--length-ratio was not given and cannot be computed"):
        build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"], default_length_ratio=None)
    with pytest.raises(ValueError, match=r"--length-ratio 0.0: gamma .* from 0.01 to 100"):
        build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet", "--length-ratio", "0"])


def test_plugin_imports_twice_without_duplicate_registration(tmp_path):
    import importlib.util
    import sys

    import posmix_fairseq
    from fairseq import utils

    # 1) fairseq's own --user-dir import of the already imported package
    utils.import_user_module(type("A", (), {"user_dir": posmix_fairseq.USER_DIR})())
    # 2) the same files imported under a second module name
    spec_ = importlib.util.spec_from_file_location(
        "posmix_copy", posmix_fairseq.USER_DIR + "/__init__.py",
        submodule_search_locations=[posmix_fairseq.USER_DIR])
    module = importlib.util.module_from_spec(spec_)
    sys.modules["posmix_copy"] = module
    try:
        spec_.loader.exec_module(module)
    finally:
        for name in [n for n in sys.modules if n == "posmix_copy" or n.startswith("posmix_copy.")]:
            del sys.modules[name]


# ---- ALiBi and RoPE against plain references ----------------------------------------------------------
LEFT_PADDED = torch.tensor([[True, True, False, False, False, False], [False] * 6])  # row 0: 4 tokens


def per_head(mixer, xs, proj):
    """(H, L, D_h) of one sentence's projection ``proj`` (a torch.nn.Linear), in float64."""
    return (xs @ proj.weight.double().t() + proj.bias.double()).view(xs.size(0), mixer.num_heads, -1).transpose(0, 1)


def plain_attention(mixer, x, scores_of, causal):
    """Each sentence of the left-padded batch x (T, B, D) alone: W^O [softmax(scores) v]_h, with
    scores_of(q, k, positions) the (H, L, L) scores of its queries and keys at positions 0..L-1."""
    out = {}
    for b, offset in ((0, 2), (1, 0)):
        xs, e = x[offset:, b].double(), mixer.energy
        q = per_head(mixer, xs, e.q_proj) / math.sqrt(mixer.head_dim)
        k, v = per_head(mixer, xs, e.k_proj), per_head(mixer, xs, mixer.values.projection)
        n = torch.arange(xs.size(0))
        scores = scores_of(q, k, n)
        if causal:
            scores = scores.masked_fill(n.view(-1, 1) < n.view(1, -1), float("-inf"))
        c = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(xs.size(0), -1)
        out[b] = c @ mixer.out_proj.weight.double().t() + mixer.out_proj.bias.double()
    return out


def run_on_left_padded_batch(mixer, causal):
    x = torch.randn(6, 2, 16)
    mask = torch.triu(torch.full((6, 6), float("-inf")), 1) if causal else None
    out, _ = mix(mixer, x, key_padding_mask=LEFT_PADDED, attn_mask=mask)
    return x, out


def test_alibi_slopes_are_the_papers():
    """Press et al. (2022), Section 3: "For models with 8 heads, the slopes that we used are the geometric sequence
    1/2^1, 1/2^2, ..., 1/2^8. For models that require 16 heads ... 1/2^0.5, 1/2^1, 1/2^1.5, ..., 1/2^8"."""
    torch.testing.assert_close(alibi_slopes(8, 8.0), torch.tensor([2.0 ** -i for i in range(1, 9)], dtype=torch.float64))
    torch.testing.assert_close(alibi_slopes(16, 8.0), torch.tensor([2.0 ** (-i / 2) for i in range(1, 17)],
                                                                   dtype=torch.float64))


@pytest.mark.parametrize("placement", ["encoder_self", "decoder_self"])
def test_alibi_equals_a_plain_implementation_of_press_et_al(placement):
    """softmax_m(q_n k_m / sqrt(D_h) - s_h |n - m|) per head, on each sentence's true positions (left padding)."""
    torch.manual_seed(0)
    mixer = standalone_mixer(mixer_spec("alibi", placement=placement, d=16, h=4, options={"alibi-max-bias": 6.0}))
    causal = placement == "decoder_self"
    x, out = run_on_left_padded_batch(mixer, causal)
    slopes = torch.tensor([2.0 ** (-6.0 * h / 4) for h in range(1, 5)], dtype=torch.float64).view(4, 1, 1)
    expected = plain_attention(mixer, x, lambda q, k, n: q @ k.transpose(1, 2) - slopes * (n.view(-1, 1) - n).abs(),
                               causal)
    for b, offset in ((0, 2), (1, 0)):
        torch.testing.assert_close(out[offset:, b].double(), expected[b], atol=1e-5, rtol=1e-5)


def rotation(p: int, head_dim: int, base: float) -> torch.Tensor:
    """R_p of RoFormer Eq. 34: 2x2 blocks [[cos p θ_i, -sin p θ_i], [sin p θ_i, cos p θ_i]], θ_i = base^(-2i/D_h)."""
    r = torch.zeros(head_dim, head_dim, dtype=torch.float64)
    for i in range(head_dim // 2):
        angle = torch.tensor(p * base ** (-2 * i / head_dim), dtype=torch.float64)
        r[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.stack([torch.stack([angle.cos(), -angle.sin()]),
                                                             torch.stack([angle.sin(), angle.cos()])])
    return r


@pytest.mark.parametrize("placement", ["encoder_self", "decoder_self"])
def test_rope_equals_a_plain_implementation_of_roformer(placement):
    """softmax_m((R_n q_n)(R_m k_m)^T / sqrt(D_h)) per head, R_p the block rotation matrix of Eq. 34 at each
    sentence's true positions (left padding)."""
    torch.manual_seed(0)
    mixer = standalone_mixer(mixer_spec("rope", placement=placement, d=16, h=4, options={"rope-base": 100.0}))
    causal = placement == "decoder_self"
    x, out = run_on_left_padded_batch(mixer, causal)

    def scores(q, k, n):
        rotations = torch.stack([rotation(int(p), 4, 100.0) for p in n])  # (L, D_h, D_h)
        rotated_q = torch.einsum("lij,hlj->hli", rotations, q)
        rotated_k = torch.einsum("lij,hlj->hli", rotations, k)
        return rotated_q @ rotated_k.transpose(1, 2)
    expected = plain_attention(mixer, x, scores, causal)
    for b, offset in ((0, 2), (1, 0)):
        torch.testing.assert_close(out[offset:, b].double(), expected[b], atol=1e-5, rtol=1e-5)


def test_rope_energies_depend_on_the_distance_only_and_its_cache_holds_rotated_keys():
    """RoFormer Eq. 16: q_n^T R_(m-n) k_m: shifting every position leaves the energies unchanged; the keys the
    incremental cache keeps are W^K x rotated by their own positions."""
    torch.manual_seed(0)
    energy = standalone_mixer(mixer_spec("rope", d=16, h=4)).energy
    x, positions = torch.randn(5, 1, 16), torch.arange(5).unsqueeze(0)
    for shift in (0, 7, 300):
        keys = energy.key_features(x, positions + shift)
        logits = energy.logits(energy.query_features(x, positions + shift), positions + shift, keys, positions + shift)
        if shift == 0:
            reference = logits
            plain = split_heads(energy.k_proj(x), 4)[0].double()  # (H, L, D_h)
            rotated = torch.stack([torch.einsum("ij,hj->hi", rotation(p, 4, 10000.0), plain[:, p]) for p in range(5)], 1)
            torch.testing.assert_close(keys[0].double(), rotated, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(logits, reference, atol=1e-5, rtol=1e-5)


def test_rope_needs_an_even_head_dimension():
    with pytest.raises(ValueError, match=r"--encoder-self-mixer rope rotates pairs of dimensions: the head dimension "
                                         r"12/4 = 3 must be even \(choose --encoder-embed-dim and "
                                         r"--encoder-attention-heads"):
        standalone_mixer(mixer_spec("rope", d=12, h=4))
