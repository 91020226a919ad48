"""The package's structure (issue 8): one route for positions, the core floor, the Energy contract,
clear errors for bad combinations, and checkpoints made before the reshaping."""
import ast
import os
import re

import pytest
import torch
import torch.nn.functional as F
from fairseq import checkpoint_utils

import posmix_fairseq
from helpers import build_model, mix, mixer_spec, random_batch
from posmix_fairseq.core.positions import PositionFrame
from posmix_fairseq.mixers.base import build_mixer
from posmix_fairseq.mixers.energy import DirectWeights, Energy, SoftmaxEnergy

LEGACY = os.path.join(os.path.dirname(__file__), "data", "legacy_checkpoints")


# ---- checkpoints made by the code before the reshaping (tests/data/legacy_checkpoints) -----------
@pytest.mark.parametrize("name", ["rposnet_cross_sinusoidal", "hc_no_value_projection_shaw_sin_decoder", "posnet_attn"])
def test_checkpoint_made_before_the_renames_loads_and_translates_as_it_did(name):
    """Made with --encoder-self-position-embedding / --encoder-self-value-projection (now
    --S-position-table / --S-gaussian-value-projection) and the old parameter names (v_proj,
    gating.value_norm, energy.relative_values, kernels): the stored arguments and weights are
    upgraded on load, and the log-probs recorded then are reproduced."""
    expected = torch.load(os.path.join(LEGACY, "expected_log_probs.pt"), weights_only=False)[name]
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(LEGACY, f"{name}.pt")], arg_overrides={"data": LEGACY, "source_lang": "src", "target_lang": "tgt"})
    model = models[0].eval()
    assert not any(k.endswith("_position_embedding") or k.endswith("_value_projection") and "gaussian" not in k
                   for k in vars(cfg.model))
    with torch.no_grad():
        logits, _ = model(expected["src_tokens"], expected["src_lengths"], expected["prev_output_tokens"])
    # fp32 model: 1e-5 (the thread count changes the summation order; 1e-6 failed once in a full run)
    torch.testing.assert_close(F.log_softmax(logits.double(), -1), expected["log_probs"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,pinned", [
    ("linearnet_p256", {"encoder_self_linear_max_positions": 256, "decoder_self_linear_max_positions": 256,
                        "encoder_position_encoding": "none"}),
    ("posnet_embed_gelu", {"encoder_posnet_activation": "gelu", "decoder_posnet_activation": "gelu"}),
    ("at5_cumulative", {"encoder_self_t5_adaptive": "cumulative", "decoder_self_t5_adaptive": "cumulative"}),
])
def test_checkpoint_made_before_issue_11_keeps_its_defaults_and_translates_as_it_did(name, pinned):
    """Made by the code before issue 11 (gLinearNet with P = 256 and no token positions, PosNet-Embed
    with GeLU, the cumulative AT5 under --S-t5-adaptive on): stored without posmix_paper_readings,
    its arguments get the defaults it was trained with, and the log-probs recorded then come back."""
    expected = torch.load(os.path.join(LEGACY, "expected_log_probs.pt"), weights_only=False)[name]
    overrides = {"data": LEGACY, "source_lang": "src", "target_lang": "tgt"}
    models, cfg, _ = checkpoint_utils.load_model_ensemble_and_task([os.path.join(LEGACY, f"{name}.pt")],
                                                                    arg_overrides=overrides)
    for key, value in pinned.items():
        assert getattr(cfg.model, key) == value, key
    with torch.no_grad():
        logits, _ = models[0].eval()(expected["src_tokens"], expected["src_lengths"], expected["prev_output_tokens"])
    # fp32 model: 1e-5 (the thread count changes the summation order; 1e-6 failed once in a full run)
    torch.testing.assert_close(F.log_softmax(logits.double(), -1), expected["log_probs"], atol=1e-5, rtol=0)


# ---- positions take one route ----------------------------------------------------------------------
def test_positions_live_only_during_a_forward_call():
    model, d = build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"])
    src, src_len = random_batch(d, [5, 8])
    prev, _ = random_batch(d, [6, 6], seed=1)
    with torch.no_grad():
        model(src, src_len, prev)
    for side in (model.encoder, model.decoder):
        assert not side.position_route.active  # nothing survives the call
    mixer = model.encoder.layers[0].self_attn
    x = torch.randn(8, 2, 32)
    with pytest.raises(RuntimeError, match="called outside its encoder's forward"):
        mixer(x, x, x)
    mix(mixer, x)  # explicit positions work outside a forward


def test_cross_attention_reuses_the_encoders_positions_and_beam_reordering_moves_them():
    model, d = build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"])
    src, src_len = random_batch(d, [5, 9])  # left padded: row 0 starts at column 4
    prev, _ = random_batch(d, [4, 4], seed=1)
    with torch.no_grad():
        encoder_out = model.encoder(src, src_len)
        assert encoder_out["encoder_positions"][0][0].tolist() == [0, 0, 0, 0, 0, 1, 2, 3, 4]
        reference = model.decoder(prev, encoder_out=encoder_out)[0]
        shifted = dict(encoder_out, encoder_positions=[encoder_out["encoder_positions"][0] + 3])
        assert not torch.allclose(model.decoder(prev, encoder_out=shifted)[0], reference)  # they are read
        order = torch.tensor([1, 0])
        reordered = model.encoder.reorder_encoder_out(encoder_out, order)
        assert torch.equal(reordered["encoder_positions"][0], encoder_out["encoder_positions"][0][order])
        torch.testing.assert_close(model.decoder(prev[order], encoder_out=reordered)[0], reference[order])


# ---- the core floor and the Energy contract ----------------------------------------------------------
def imports_of(package):
    root = os.path.join(os.path.dirname(posmix_fairseq.__file__), package)
    found = set()
    for name in os.listdir(root):
        if name.endswith(".py"):
            for node in ast.walk(ast.parse(open(os.path.join(root, name)).read())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    found.add(("." * node.level) + node.module)
    return found


def test_mixers_and_position_encodings_do_not_import_each_other():
    assert not any("position_encodings" in m for m in imports_of("mixers"))
    assert not any("mixers" in m for m in imports_of("position_encodings"))
    assert not any("mixers" in m or "position_encodings" in m or "models" in m for m in imports_of("core"))


def test_package_and_scripts_do_not_reach_into_tests():
    """Code shared by tests and benchmarks lives in posmix_fairseq.testing: nothing in the package or
    scripts/ imports the tests' helpers or puts tests/ on sys.path."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    offenders = []
    for top in ("posmix_fairseq", "scripts"):
        for folder, _, files in os.walk(os.path.join(repo, top)):
            for name in files:
                if name.endswith((".py", ".sh")):
                    path = os.path.join(folder, name)
                    text = open(path).read()
                    if re.search(r"^\s*(from helpers import|import helpers)|sys\.path\.insert\(.*tests", text, re.M):
                        offenders.append(os.path.relpath(path, repo))
    assert not offenders, offenders


def test_energy_contract_has_one_abstract_method_and_two_kinds():
    assert Energy.__abstractmethods__ == {"mixing_weights"}
    assert SoftmaxEnergy.__abstractmethods__ == {"logits"}
    assert DirectWeights.__abstractmethods__ == {"direct_weights"}
    query, pos = torch.zeros(3, 1, 16), torch.arange(3).unsqueeze(0)
    excluded = torch.tensor([[False, True, False]]).view(1, 1, 1, 3).expand(1, 1, 3, 3).clone()
    excluded[0, 0, 2] = True  # query 2 sees no key at all
    for name in ("rposnet", "gaussian"):  # a softmax energy and direct weights
        energy = build_mixer(mixer_spec(name)).energy
        w = energy.mixing_weights(query, pos, None, pos, torch.zeros(1, 3, dtype=torch.bool), excluded)
        assert torch.isfinite(w).all() and (w[..., 1] == 0).all() and (w[0, :, 2] == 0).all(), name
        if name == "rposnet":
            torch.testing.assert_close(w[0, :, :2].sum(-1), torch.ones(4, 2))


# ---- bad combinations are errors ---------------------------------------------------------------------
@pytest.mark.parametrize("flags,message", [
    (["--arch", "posmix_transformer_iwslt_de_en", "--encoder-self-shaw-value-term", "off"],
     r"--encoder-self-shaw-value-term is read only by the mixer\(s\) shaw, but --encoder-self-mixer is mha"),
    (["--arch", "rposnet_iwslt_de_en", "--decoder-cross-max-relative-position", "4"],
     r"--decoder-cross-max-relative-position is read only by the mixer\(s\) "
     r"gaussian, lightconv, relattn, rposnet, shaw"),
    (["--arch", "hc_sa_iwslt_de_en", "--encoder-self-position-table", "learned"],
     r"--encoder-self-position-table is read only by"),
    (["--arch", "lstmpe_iwslt_de_en", "--encoder-rpe-heads", "2"],
     r"--encoder-rpe-heads is read only by the position encoding\(s\) mprhead, rpehead"),
    (["--arch", "rposnet_iwslt_de_en", "--decoder-self-mixer", "mha"],
     r"the decoder has no position signal: --decoder-position-encoding none and --decoder-self-mixer mha"),
    (["--arch", "rposnet_iwslt_de_en", "--encoder-self-mixer", "none"], r"--position-blind encoder"),
    (["--arch", "nope_iwslt_de_en", "--position-blind", "decoder,source"], r"--position-blind: 'source'"),
])
def test_bad_combinations_are_clear_errors(flags, message):
    with pytest.raises(ValueError, match=message):
        build_model(flags)


def test_position_blind_sides_are_allowed_when_asked_for():
    build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-self-mixer", "mha", "--position-blind", "decoder"])
    build_model(["--arch", "nope_iwslt_de_en"])  # the no-PE baseline asks for it
