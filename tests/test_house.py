"""The package's structure: one route for positions, the core floor, the mixers' machinery and
variants found by file, the Energy contract, clear errors for bad combinations, and the upgrades that
let older checkpoints load and translate as they did (models/upgrades.py)."""
import ast
import os
import re

import pytest
import torch
import torch.nn.functional as F
from fairseq import checkpoint_utils

import posmix_fairseq
from helpers import (build_model, build_model_from_args, mix, mixer_spec, parse_model_args, random_batch,
                     standalone_mixer)
from posmix_fairseq.harness.testing import stored_arguments
from posmix_fairseq.models.options import DEFAULTS_VERSION
from posmix_fairseq.models.upgrades import upgrade_stored_args
from posmix_fairseq.mixers.engine import DirectWeights, Energy, SoftmaxEnergy

LEGACY = os.path.join(os.path.dirname(__file__), "data", "legacy_checkpoints")


# ---- checkpoints stored with older option and parameter names (tests/data/legacy_checkpoints) ------
@pytest.mark.parametrize("name", ["rposnet_cross_sinusoidal", "hc_no_value_projection_shaw_sin_decoder", "posnet_attn"])
def test_checkpoint_made_before_the_renames_loads_and_translates_as_it_did(name):
    """Made with --encoder-self-position-embedding / --encoder-self-value-projection (now
    --<sublayer>-position-table / --<sublayer>-gaussian-value-projection) and the old parameter names (v_proj,
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


def test_parameters_stored_in_fairseqs_layernorm_embedding_slot_load_into_position_encoding():
    """Checkpoints stored a side's position encoding and embedding LayerNorm under fairseq's
    ``layernorm_embedding.`` slot (the LayerNorm's own ``weight``/``bias``, or ``encoding.`` and
    ``layer_norm.`` of the stage): loading moves them to the ``position_encoding`` submodule."""
    flags = ["--arch", "lstmpe_iwslt_de_en", "--layernorm-embedding"]
    trained, _ = build_model(flags, seed=1)
    stored = {re.sub(r"\.position_encoding\.(layer_norm\.)?", ".layernorm_embedding.", key)
              if key.startswith("encoder.") else key.replace(".position_encoding.", ".layernorm_embedding."): value
              for key, value in trained.state_dict().items()}
    assert {"encoder.layernorm_embedding.weight", "decoder.layernorm_embedding.layer_norm.weight",
            "encoder.layernorm_embedding.encoding.lstm.weight_hh_l0"} <= set(stored)
    model, _ = build_model(flags, seed=2)
    model.load_state_dict(stored)  # fairseq's load_state_dict runs the model's upgrades first
    for key, value in trained.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key


@pytest.mark.parametrize("name,pinned", [
    ("linearnet_p256", {"encoder_self_linear_max_positions": 256, "decoder_self_linear_max_positions": 256,
                        "encoder_position_encoding": "none"}),
    ("posnet_embed_gelu", {"encoder_posnet_embed_activation": "gelu", "decoder_posnet_embed_activation": "gelu"}),
    ("at5_cumulative", {"posmix_legacy_readings": {"encoder_self": {"t5-adaptive": "cumulative"},
                                                   "decoder_self": {"t5-adaptive": "cumulative"}}}),
])
def test_checkpoint_without_the_readings_marker_keeps_its_defaults_and_translates_as_it_did(name, pinned):
    """Made by the code that stored no defaults version (gLinearNet with P = 256 and no token positions, PosNet-Embed
    with GeLU, the cumulative AT5 under --<sublayer>-t5-adaptive on): stored without posmix_paper_readings,
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


def stored_args(flags, version, **unset_then):
    """Arguments as a checkpoint stored them: parsed from ``flags``, with the defaults version
    ``version`` (None: absent) and the given attributes as stored (None: unset)."""
    args = stored_arguments(flags, defaults_version=version)
    for key, value in unset_then.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize("version, activation", [(None, "gelu"), (11, "gelu"), (12, "relu")])
def test_posnet_attn_activation_follows_the_stored_defaults_version(version, activation):
    """PosNet-Attn's act is ReLU for new models; stored arguments without a defaults version, or with a
    defaults version below 12, keep the GeLU they were trained with."""
    args = stored_args(["--arch", "posnet_attn_iwslt_de_en"], version,
                       encoder_self_posnet_activation=None, decoder_self_posnet_activation=None)
    model, _ = build_model_from_args(args)
    for layer in (model.encoder.layers[0], model.decoder.layers[1]):
        act = layer.self_attn.values.activation_fn(torch.tensor([-1.0]))
        assert torch.allclose(act, F.gelu(torch.tensor([-1.0])) if activation == "gelu" else torch.zeros(1))
    assert args.encoder_self_posnet_activation == activation  # stored with the value it was trained with
    assert args.posmix_paper_readings == DEFAULTS_VERSION


def test_posnet_embed_options_stored_under_their_old_names_are_renamed():
    new = {f"{side}_posnet_embed_{o}": None for side in ("encoder", "decoder") for o in ("dim", "activation")}
    args = stored_args(["--arch", "posnet_embed_iwslt_de_en"], 12, **new, encoder_posnet_dim=24,
                       decoder_posnet_activation="tanh", encoder_posnet_max_positions=None)
    model, _ = build_model_from_args(args)
    assert not any(hasattr(args, f"{side}_posnet_{o}") for side in ("encoder", "decoder")
                   for o in ("dim", "activation", "max_positions", "dropout"))
    assert (args.encoder_posnet_embed_dim, args.decoder_posnet_embed_activation) == (24, "tanh")
    assert model.encoder.position_encoding.encoding.w1.weight.shape == (24, 32)
    assert torch.equal(model.decoder.position_encoding.encoding.activation_fn(torch.tensor([-1.0])),
                       torch.tanh(torch.tensor([-1.0])))


@pytest.mark.parametrize("version, d_p", [(None, 128), (14, 128), (DEFAULTS_VERSION, 8)])
def test_posnet_embed_d_p_follows_the_stored_defaults_version(version, d_p):
    """PosNet-Embed's d_p defaults to D/4 (8 at the tiny D = 32); arguments stored before version 15 with d_p unset
    keep the 128 they were built with (256 from D = 1024)."""
    unset = {f"{side}_posnet_embed_dim": None for side in ("encoder", "decoder")}
    model, _ = build_model_from_args(stored_args(["--arch", "posnet_embed_iwslt_de_en"], version, **unset))
    for side in (model.encoder, model.decoder):
        assert side.position_encoding.encoding.kernels.shape[-2:] == (d_p, d_p)
    big = stored_args(["--arch", "posnet_embed_iwslt_de_en", "--encoder-embed-dim", "1024", "--decoder-embed-dim",
                       "1024"], 14, **unset)
    upgrade_stored_args(big)
    assert (big.encoder_posnet_embed_dim, big.decoder_posnet_embed_dim) == (256, 256)


def test_upgrade_steps_are_named_by_what_changed_and_arguments_of_this_code_need_none():
    from posmix_fairseq.models.upgrades import ARGS_UPGRADES, upgrade_stored_args
    assert len({step.name for step in ARGS_UPGRADES}) == len(ARGS_UPGRADES)
    assert not any("issue" in step.name.lower() or "before" in step.name.lower() for step in ARGS_UPGRADES)
    assert upgrade_stored_args(parse_model_args(["--arch", "posnet_attn_wmt_en_de"])) == []
    ran = upgrade_stored_args(stored_args(["--arch", "posnet_attn_wmt_en_de"], None))
    assert any("PosNet-Attn's activation" in name for name in ran) and any("kernel" in name for name in ran)
    # a model whose sublayers read none of the changed options reports no upgrade of them
    ran = upgrade_stored_args(stored_args(["--arch", "posmix_transformer_wmt_en_de"], None))
    assert not any("PosNet" in name or "LinearNet" in name for name in ran), ran


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


# ---- the layout: the core floor, the mixers' machinery, variants found by file ------------------------
PACKAGE = os.path.dirname(posmix_fairseq.__file__)


def imports_of(package):
    """Absolute names of the modules imported by every file under posmix_fairseq/<package> -> by file."""
    found = {}
    for folder, _, names in os.walk(os.path.join(PACKAGE, package)):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            parts = ["posmix_fairseq"] + os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
            here = parts[:-1] if name != "__init__.py" else parts[:-1]
            modules = set()
            for node in ast.walk(ast.parse(open(path).read())):
                if isinstance(node, ast.ImportFrom):
                    base = here[:len(here) - node.level + 1] if node.level else []
                    module = ".".join(base + ([node.module] if node.module else []))
                    modules.add(module)
                    modules.update(f"{module}.{alias.name}" for alias in node.names)
                elif isinstance(node, ast.Import):
                    modules.update(alias.name for alias in node.names)
            found[os.path.relpath(path, PACKAGE)] = modules
    return found


def imported(package):
    return set().union(*imports_of(package).values())


def test_mixers_and_position_encodings_do_not_import_each_other():
    assert not any("position_encodings" in m for m in imported("mixers"))
    assert not any(".mixers" in m for m in imported("position_encodings"))
    assert not any(".mixers" in m or ".position_encodings" in m or ".models" in m for m in imported("core"))


def test_the_mixers_machinery_imports_no_variant():
    from posmix_fairseq.mixers import VARIANT_MODULES
    variants = {f"posmix_fairseq.mixers.{name}" for name in VARIANT_MODULES}
    for package in ("mixers/engine", "mixers/paths"):
        for path, modules in imports_of(package).items():
            assert not modules & variants, f"{path} imports {modules & variants}"


def test_every_module_beside_the_machinery_is_a_variant_or_a_part_of_one():
    """mixers/<name>.py registers the mixer <name>, or is named <variant>_<part>.py."""
    from posmix_fairseq.mixers import MIXER_REGISTRY, VARIANT_MODULES
    registered_by = {entry.builder.__module__.rsplit(".", 1)[-1] for _, entry in MIXER_REGISTRY.items()}
    assert registered_by <= set(VARIANT_MODULES)
    for name in VARIANT_MODULES:
        assert name in registered_by or name.split("_")[0] in registered_by, name


NEW_MIXER = '''"""``copy_previous``: every token mixes the value of the key just before it (a test mixer)."""
import torch

from ..core.placement import PLACEMENTS
from .engine import DirectWeights, EnergyMixingAttention, register_mixer


class PreviousToken(DirectWeights):
    def direct_weights(self, query, query_positions, keys, key_positions, key_padding_mask):
        return (key_positions[:, None, None, :] == query_positions[:, None, :, None] - 1).to(query.dtype)


@register_mixer("copy_previous", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="a test mixer")
def build(spec, resources):
    return EnergyMixingAttention(spec, resources, PreviousToken())
'''
CHILD = """
import sys
sys.path.insert(0, {tests!r})
from helpers import build_model, random_batch
model, d = build_model(["--arch", "posmix_transformer", "--encoder-self-mixer", "copy_previous"])
src, src_len = random_batch(d, [5, 3])
print("OK", type(model.encoder.layers[0].self_attn.energy).__name__, model(src, src_len, src)[0].shape)
from posmix_fairseq.core.placement import DECODER_CROSS
from posmix_fairseq.harness import docs
from posmix_fairseq.mixers import MIXER_REGISTRY
print("offered", "copy_previous" in MIXER_REGISTRY.names_at(DECODER_CROSS),
      "tabulated", "| `copy_previous` |" in docs.render_mixers())
"""


def test_a_new_mixer_is_one_file(tmp_path):
    """A copy of the package with one more file under mixers/ has the mixer (flag, build, forward), offered in
    the sublayers its placements name and tabulated by the docs' generator."""
    import shutil
    import subprocess
    import sys
    shutil.copytree(PACKAGE, tmp_path / "posmix_fairseq", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "posmix_fairseq" / "mixers" / "copy_previous.py").write_text(NEW_MIXER)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", CHILD.format(tests=os.path.dirname(__file__))], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK PreviousToken torch.Size([2, 5, 44])" in result.stdout, result.stdout
    assert "offered True tabulated True" in result.stdout, result.stdout  # its placements, the docs' table


def test_package_and_scripts_do_not_reach_into_tests():
    """Code shared by tests and benchmarks lives in posmix_fairseq.harness.testing: nothing in the package or
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
        energy = standalone_mixer(mixer_spec(name)).energy
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
    (["--arch", "hc_sa_iwslt_de_en", "--encoder-self-max-relative-position", "4"],
     r"--encoder-self-max-relative-position is read by the gaussian mixer only with --encoder-self-gaussian-impl "
     r"window, but --encoder-self-gaussian-impl is full"),
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


def test_gaussian_k_is_taken_with_the_window_form_and_dropped_from_older_stored_arguments():
    model, _ = build_model(["--arch", "hc_sa_iwslt_de_en", "--encoder-self-gaussian-impl", "window",
                            "--encoder-self-max-relative-position", "4"])
    assert model.encoder.layers[0].self_attn.energy.half_width == 4
    stored = stored_arguments(["--arch", "hc_sa_iwslt_de_en"], defaults_version=12)
    stored.encoder_self_max_relative_position = 16  # what the arch function wrote for every implementation
    build_model_from_args(stored)
    assert stored.encoder_self_max_relative_position is None


def test_position_blind_sides_are_allowed_when_asked_for():
    build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-self-mixer", "mha", "--position-blind", "decoder"])
    build_model(["--arch", "nope_iwslt_de_en"])  # the no-PE baseline asks for it
