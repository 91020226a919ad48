"""fairseq's own transformer options, per side, against every token mixer and every position encoding.

fairseq's transformer builds an encoder and a decoder of different widths, heads and depths, pre- or post-LayerNorm
on either side, with shared embeddings or not, a projected decoder output, learned, sinusoidal or no token positions,
with or without cross-attention; so do the posmix models. Each option set below meets every mixer (in every
sublayer the mixer is defined for) and every position encoding (on both sides): pairwise, not their full product.
Each combination is built through fairseq's parser, as ``fairseq-train --arch posmix_transformer ...`` builds it,
trains a step (forward and backward) and decodes step by step, with a beam reordering, exactly as its full forward
computes; or it is refused at build time by an error naming the options. What is refused and why: docs/choices.md,
"fairseq's transformer options".
"""
import argparse

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding

from helpers import binarized_toy_corpus, build_model, build_model_from_args, parse_model_args, random_batch
from posmix_fairseq.core.placement import PLACEMENTS, SELF_ATTENTION
from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.testing import ParseRefusal, side_sizes
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.mixers.engine import reads_absolute_table
from posmix_fairseq.models.options import add_posmix_args
from posmix_fairseq.position_encodings.base import POSITION_ENCODING_REGISTRY

TOL = 1e-5
# (embed dim, heads, FFN dim, layers) of the encoder and of the decoder
SIZES = {"same": ((32, 4, 64, 2), (32, 4, 64, 2)),
         "wider_encoder": ((48, 6, 96, 1), (32, 4, 40, 2)),
         "wider_decoder": ((24, 2, 32, 2), (48, 4, 80, 1))}
# name -> (sizes, fairseq's flags): each option meets an encoder wider or narrower than the decoder where it allows it
OPTION_SETS = {
    "encoder_pre_norm_checkpointed": ("wider_encoder", ["--encoder-normalize-before", "--checkpoint-activations"]),
    "decoder_pre_norm_layerdrop": ("wider_decoder", ["--decoder-normalize-before", "--no-decoder-final-norm",
                                                     "--encoder-layerdrop", "0.5", "--decoder-layerdrop", "0.5"]),
    "share_all_embeddings": ("same", ["--share-all-embeddings"]),
    "share_decoder_input_output": ("wider_decoder", ["--share-decoder-input-output-embed"]),
    "encoder_learned_positions_output_dim": ("wider_encoder", ["--encoder-learned-pos", "--decoder-output-dim", "24"]),
    "decoder_learned_positions_layernorm_embedding": (
        "wider_decoder", ["--decoder-learned-pos", "--layernorm-embedding", "--no-scale-embedding"]),
    "no_token_positions": ("wider_encoder", ["--no-token-positional-embeddings"]),
    "cross_heads_per_layer": ("wider_encoder", ["--decoder-attention-heads", "8", "--decoder-cross-heads", "4,8"]),
    "no_cross_attention": ("wider_decoder", ["--no-cross-attention"]),
    "cross_self_attention": ("same", ["--cross-self-attention"]),
}
# the mixers whose absolute position table n~ --<side>-position-encoding mixer-table adds to the embeddings: the
# first in the encoder, the last in the decoder
TABLE_MIXERS = [name for name, entry in MIXER_REGISTRY.items() if reads_absolute_table(entry)]
MIXER_TABLE_MIXERS = {"encoder_self": TABLE_MIXERS[0], "decoder_self": TABLE_MIXERS[-1]}


def position_blind(mixer: str) -> bool:
    return not MIXER_REGISTRY.get(mixer, "--mixer").uses_positions


def side_sizes_of(option_set):
    """{side: (embed dim, heads, FFN dim, layers)} of an option set, its own size flags applied."""
    sizes, flags = OPTION_SETS[option_set]
    out = {}
    for side, values in zip(("encoder", "decoder"), SIZES[sizes]):
        names = ("embed-dim", "attention-heads", "ffn-embed-dim", "layers")
        out[side] = tuple(int(flags[flags.index(f"--{side}-{n}") + 1]) if f"--{side}-{n}" in flags else value
                          for n, value in zip(names, values))
    return out


def sublayer_mixers(kind, name):
    """{placement: mixer} of one sweep entry: a swept mixer in every sublayer it is defined for (the registry's
    placements), mha in the others."""
    mixers = {placement.name: "mha" for placement in PLACEMENTS}
    if kind == "encoding":
        return dict(mixers, **MIXER_TABLE_MIXERS) if name == "mixer-table" else mixers
    return dict(mixers, **{placement.name: name for placement in MIXER_REGISTRY.get(name, "--mixer").placements})


def entry_flags(option_set, kind, name):
    sizes, flags = OPTION_SETS[option_set]
    flags = ["--arch", "posmix_transformer", *side_sizes(*SIZES[sizes]), *flags]
    for placement, mixer in sublayer_mixers(kind, name).items():
        flags += [f"--{placement.replace('_', '-')}-mixer", mixer]
    if kind == "encoding":
        flags += ["--encoder-position-encoding", name, "--decoder-position-encoding", name]
    return flags


def side_encodings(option_set, kind, name):
    """{side: position encoding}: the swept one, or what fairseq's own flags say."""
    flags = OPTION_SETS[option_set][1]
    if kind == "encoding":
        return {"encoder": name, "decoder": name}
    if "--no-token-positional-embeddings" in flags:
        return {"encoder": "none", "decoder": "none"}
    return {side: "learned" if f"--{side}-learned-pos" in flags else "sinusoidal" for side in ("encoder", "decoder")}


def expected_refusal(option_set, kind, name):
    """The flags the build-time error of this combination names, in the order the checks run; None: it builds."""
    flags = OPTION_SETS[option_set][1]
    mixers, encodings = sublayer_mixers(kind, name), side_encodings(option_set, kind, name)
    for side in ("encoder", "decoder"):
        own = [mixer for placement, mixer in mixers.items() if placement.startswith(side)]
        if encodings[side] == "none" and all(position_blind(mixer) for mixer in own):
            return [f"--{side}-position-encoding"] + [f for f in flags if f == "--no-token-positional-embeddings"]
    if "--cross-self-attention" in flags and mixers["decoder_self"] != "mha":
        return ["--cross-self-attention", "--decoder-self-mixer"]
    if "--no-cross-attention" in flags and mixers["decoder_cross"] != "mha":
        return ["--no-cross-attention", "--decoder-cross-mixer"]
    if "--decoder-cross-heads" in flags and mixers["decoder_cross"] == "posnet":  # one Phi of d_k x d_k per position
        return ["--decoder-cross-posnet-share-kernels", "--decoder-cross-heads"]
    for side, (dim, heads, _, _) in side_sizes_of(option_set).items():
        recurrent = dim // heads  # d_r = t D / H with t = 1 (RecPE Eq. 5 splits P and R over the heads)
        if encodings[side] == "mprhead" and ((dim - recurrent) % heads or recurrent % heads):
            return [f"--{side}-rpe-heads", f"--{side}-embed-dim"]
    return None


SWEEP = [(option_set, kind, name) for option_set in OPTION_SETS
         for kind, registry in (("mixer", MIXER_REGISTRY), ("encoding", POSITION_ENCODING_REGISTRY))
         for name in registry.names()]


def check_sizes_and_positions(model, option_set, kind, name):
    """Each side has its own sizes and the token positions of its encoding."""
    positions = {"sinusoidal": SinusoidalPositionalEmbedding, "learned": LearnedPositionalEmbedding}
    encodings = side_encodings(option_set, kind, name)
    for side, (dim, heads, ffn, layers) in side_sizes_of(option_set).items():
        module = getattr(model, side)
        assert module.embed_tokens.embedding_dim == dim and len(module.layers) == layers
        assert module.layers[0].fc1.out_features == ffn and module.layers[0].self_attn.num_heads == heads
        expected = positions.get(encodings[side])
        assert (module.embed_positions is None) if expected is None else isinstance(module.embed_positions, expected)
    if option_set == "cross_heads_per_layer":
        assert [layer.encoder_attn.num_heads for layer in model.decoder.layers] == [4, 8]
    if option_set == "no_cross_attention":
        assert all(layer.encoder_attn is None for layer in model.decoder.layers)


def train_step(model, d, option_set):
    """One forward and backward: finite gradients that reach the target embeddings, and the source
    embeddings through cross-attention (unless there is none, or LayerDrop skipped the decoder's one layer)."""
    model.train()
    src, src_len = random_batch(d, [7, 5], seed=1)
    tgt, _ = random_batch(d, [6, 6], seed=2, left_pad=False)
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)
    logits, _ = model(src, src_len, prev)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    flags = OPTION_SETS[option_set][1]
    sides = [model.decoder] + ([] if {"--no-cross-attention", "--decoder-layerdrop"} & set(flags) else [model.encoder])
    for side in sides:
        assert side.embed_tokens.weight.grad is not None and side.embed_tokens.weight.grad.abs().sum() > 0


def check_incremental_decoding(model, d, label):
    """Step-by-step decoding with a beam reordering equals the full teacher-forced forward."""
    model.eval()
    src, src_len = random_batch(d, [6, 9], seed=3)
    src, src_len = src.repeat_interleave(2, dim=0), src_len.repeat_interleave(2)  # 2 sentences x beam 2
    tgt, _ = random_batch(d, [6, 6, 6, 6], seed=4)
    prev = torch.cat([torch.full((4, 1), d.eos()), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        full = F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)
        encoder_out, state, rows = model.encoder(src, src_len), {}, torch.arange(4)
        for t in range(prev.size(1)):
            if t == 3:
                new_order = torch.tensor([1, 1, 3, 2])
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows = rows[new_order]
            logits, _ = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)
            diff = (F.log_softmax(logits[:, -1].double(), dim=-1) - full[rows, t]).abs().max().item()
            assert diff <= TOL, f"{label}: decoding step {t} differs from the full forward by {diff:.2e}"


@pytest.mark.parametrize("option_set,kind,name", SWEEP, ids=[f"{o}-{k}-{n}" for o, k, n in SWEEP])
def test_each_combination_trains_and_decodes_or_is_refused_naming_the_options(option_set, kind, name):
    flags, refusal = entry_flags(option_set, kind, name), expected_refusal(option_set, kind, name)
    if refusal is not None:
        with pytest.raises(ValueError) as error:
            build_model(flags)
        missing = [flag for flag in refusal if flag not in str(error.value)]
        assert not missing, f"the refusal does not name {missing}: {error.value}"
        return
    model, d = build_model(flags)
    check_sizes_and_positions(model, option_set, kind, name)
    train_step(model, d, option_set)
    check_incremental_decoding(model, d, f"{option_set} {kind} {name}")


def test_the_sweep_builds_most_combinations():
    """The refusals are the exceptions: every mixer and encoding builds with every option set that allows it."""
    refused = [entry for entry in SWEEP if expected_refusal(*entry)]
    assert len(refused) < len(SWEEP) // 5, refused


WE, SAME = side_sizes(*SIZES["wider_encoder"]), side_sizes(*SIZES["same"])
REFUSALS = {  # flags -> what the error names
    "share_all_embeddings_across_widths": (WE + ["--share-all-embeddings"],  # fairseq's own check
                                           ["--share-all-embeddings", "--encoder-embed-dim", "--decoder-embed-dim"]),
    "tied_output_of_another_width": (WE + ["--share-decoder-input-output-embed", "--decoder-output-dim", "24"],
                                     ["--share-decoder-input-output-embed", "--decoder-output-dim",
                                      "--decoder-embed-dim"]),
    "shared_embeddings_output_of_another_width": (SAME + ["--share-all-embeddings", "--decoder-output-dim", "16"],
                                                  ["--share-all-embeddings", "--decoder-output-dim"]),
    "cross_self_attention_across_widths": (WE + ["--cross-self-attention"],
                                           ["--cross-self-attention", "--encoder-embed-dim", "--decoder-embed-dim"]),
    "cross_self_attention_gated": (["--cross-self-attention", "--decoder-self-gating", "on"],
                                   ["--cross-self-attention", "--decoder-self-gating"]),
    "no_cross_attention_with_cross_heads": (["--no-cross-attention", "--decoder-cross-heads", "2,2"],
                                            ["--no-cross-attention", "--decoder-cross-heads"]),
    "no_cross_attention_with_cross_gating": (["--no-cross-attention", "--decoder-cross-gating", "on"],
                                             ["--no-cross-attention", "--decoder-cross-gating"]),
    "no_cross_attention_of_hc_all": (["--arch", "hc_all_iwslt_de_en", "--no-cross-attention"],
                                     ["--no-cross-attention", "--decoder-cross-mixer"]),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_combinations_fairseq_cannot_build_are_refused_naming_the_options(case):
    flags, named = REFUSALS[case]
    flags = flags if "--arch" in flags else ["--arch", "posmix_transformer", *flags]
    with pytest.raises(ValueError) as error:
        build_model(flags)
    assert all(flag in str(error.value) for flag in named), (named, str(error.value))


OUTSIDE = [(placement, name) for name, entry in MIXER_REGISTRY.items() for placement in PLACEMENTS
           if not entry.available_at(placement)]


@pytest.mark.parametrize("placement,mixer", OUTSIDE, ids=[f"{p.name}-{m}" for p, m in OUTSIDE])
def test_a_mixer_outside_its_placements_is_refused_naming_the_sublayer(placement, mixer):
    """The registry's placements decide: fairseq's parser offers the mixer only where it is defined (a usage error,
    exit status 2 on the command line), and its options get no flag there; stored arguments that name it there
    anyway are a build-time error naming the sublayer's flag and where the mixer is defined."""
    assert mixer not in MIXER_REGISTRY.names_at(placement)
    with pytest.raises(ParseRefusal, match=f"argument {placement.flag('mixer')}: invalid choice: '{mixer}'"):
        build_model(["--arch", "posmix_transformer", placement.flag("mixer"), mixer])
    stored = parse_model_args(["--arch", "posmix_transformer"])
    placement.write(stored, "mixer", mixer)
    allowed = ", ".join(p.flag("mixer") for p in MIXER_REGISTRY.get(mixer, "--mixer").placements)
    with pytest.raises(ValueError, match=f"{placement.flag('mixer')} {mixer}: the {mixer} token mixer is defined "
                                         f"for {allowed} only"):
        build_model_from_args(stored)


def test_a_mixer_that_self_attention_only_serves_gets_no_cross_attention_flags():
    """An option only mixers outside cross-attention declare has no --decoder-cross- flag."""
    parser = argparse.ArgumentParser()
    add_posmix_args(parser)
    parser_options = {action.dest for action in parser._actions}
    cross = PLACEMENTS[-1]
    for option in MIXER_REGISTRY.declared_options():
        offered = bool(MIXER_REGISTRY.readers(option, cross))
        assert (cross.attr(option) in parser_options) == offered, option
        for side in SELF_ATTENTION.values():
            assert side.attr(option) in parser_options, option


def test_fairseq_train_exits_nonzero_naming_the_options(tmp_path):
    """The console flow: fairseq-train (a child process) stops before training, with the refusal."""
    data = binarized_toy_corpus(tmp_path, sizes={"train": 20, "valid": 5, "test": 5})
    flags = ["--arch", "posmix_transformer", *WE, "--cross-self-attention", "--optimizer", "adam", "--lr", "0.001",
             "--max-tokens", "500", "--max-update", "1", "--no-save", "--cpu", "--no-progress-bar"]
    with pytest.raises(pipeline.StepFailed) as failed:
        pipeline.run(pipeline.train_command(data, None, flags))
    assert failed.value.returncode != 0
    assert "--cross-self-attention attends over [encoder states; target prefix]: --encoder-embed-dim (48)" \
        in str(failed.value)


def test_posnet_cross_attention_with_kernels_per_layer_serves_layers_of_different_heads():
    flags = entry_flags("cross_heads_per_layer", "mixer", "posnet") + ["--decoder-cross-posnet-share-kernels", "off"]
    model, d = build_model(flags)
    train_step(model, d, "cross_heads_per_layer")
    check_incremental_decoding(model, d, "posnet cross-attention, kernels per layer, heads 4,8")
