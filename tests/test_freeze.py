"""Search-time checkpoints (posmix-freeze; GPA Sections 4.1-4.2, Table 8).

The frozen model is checked against the trained model it came from (log-probs within 1e-5), against
the exactness suite of every arch, and its parameter counts against the paper's Table 8 formulas,
its 23% / 24% claim (Section 4.2) and the Params columns of Tables 2-3."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from fairseq.tasks.translation import TranslationConfig, TranslationTask

import test_decoding_exactness as exactness
from helpers import (binarized_toy_corpus, build_model_from_args, meta_model, num_parameters, parse_model_args,
                     random_batch, run_generate, run_train)
from posmix_fairseq.harness.freeze import choose_table_sizes, freeze_model, larger_model_warning
from posmix_fairseq.mixers.engine import FrozenAbsoluteEnergy, FrozenRelativeEnergy, frozen_mixers

TOL = 1e-5
N = 64  # tiny models: --max-source/target-positions 64

# Table 5: (enc-self, dec-self, dec-cross) rPosNet (True) or multi-head attention; the all-MHA row
# has nothing to freeze (test_nothing_to_freeze_is_a_clear_error)
TABLE5 = [(e, d, c) for e in (False, True) for d in (False, True) for c in (False, True) if e or d or c]


def placement_flags(mixer, enc, dec, cross, gamma="1.3"):
    flags = ["--arch", "posmix_transformer"]
    for on, placement in ((enc, "encoder-self"), (dec, "decoder-self"), (cross, "decoder-cross")):
        if on:
            flags += [f"--{placement}-mixer", mixer]
    return flags + (["--length-ratio", gamma] if cross else [])


CONFIGS = {f"rposnet_table5_{''.join('x' if on else '-' for on in row)}": placement_flags("rposnet", *row)
           for row in TABLE5}
CONFIGS.update({
    "aposnet_all_three_gamma0.8": placement_flags("aposnet", True, True, True, gamma="0.8"),
    "aposnet_cross_only_learned": placement_flags("aposnet", False, False, True) + ["--decoder-cross-position-table",
                                                                                     "learned"],
    "rposnet_ungated_sinusoidal_cross": ["--arch", "rposnet_wmt_en_de", "--encoder-self-gating", "off",
                                         "--decoder-self-gating", "off", "--decoder-cross-mixer", "rposnet",
                                         "--decoder-cross-gating", "off", "--length-ratio", "0.7",
                                         "--encoder-self-position-table", "sinusoidal"],
    "aposnet_ungated_mha_cross": ["--arch", "aposnet_iwslt_de_en", "--encoder-self-gating", "off",
                                  "--decoder-self-gating", "off"],
    "rposnet_big_k2_cross_gamma2.5": ["--arch", "rposnet_wmt_en_de_big", "--encoder-self-max-relative-position", "2",
                                      "--decoder-cross-mixer", "rposnet", "--length-ratio", "2.5"],
})


def trained_and_frozen(flags, seed=0, num_positions=N):
    args = parse_model_args(flags)
    model, d = build_model_from_args(args, seed=seed)
    model.eval()
    task = TranslationTask(TranslationConfig(data="unused-data-dir"), d, d)
    frozen, _ = freeze_model(task, model, args, num_positions)
    return model, frozen, d


def log_probs(model, src, src_len, prev):
    with torch.no_grad():
        return F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_frozen_log_probs_equal_the_trained_model(name):
    model, frozen, d = trained_and_frozen(CONFIGS[name])
    energies = [m for m in frozen.modules() if isinstance(m, (FrozenRelativeEnergy, FrozenAbsoluteEnergy))]
    assert energies, name
    names = [n for n, _ in frozen.named_parameters()]
    assert not any("q_proj" in n or "k_proj" in n or "relative_embeddings" in n or "mixer_position_tables" in n
                   for n in names if ".energy." in n or "mixer_position_tables" in n), names
    for left_pad in (True, False):
        src, src_len = random_batch(d, [7, 20, 3], seed=1, left_pad=left_pad)
        tgt, _ = random_batch(d, [11, 25, 4], seed=2, left_pad=False)
        prev = torch.cat([torch.full((3, 1), d.eos()), tgt[:, :-1]], dim=1)
        diff = (log_probs(model, src, src_len, prev) - log_probs(frozen, src, src_len, prev)).abs().max().item()
        assert diff <= TOL, f"{name}: frozen differs from trained by {diff:.2e}"


# the every-arch exactness suite (tests/test_decoding_exactness.py) run on frozen models
EXACTNESS = ["rposnet_table5_xxx", "aposnet_all_three_gamma0.8", "rposnet_ungated_sinusoidal_cross"]


def frozen_build_model(flags, tiny=True, seed=0, **_):
    return trained_and_frozen(flags, seed=seed)[1:]


@pytest.mark.parametrize("check", [exactness.test_incremental_equals_full_forward_with_beam_reordering,
                                   exactness.test_sentence_alone_equals_sentence_in_padded_batch,
                                   exactness.test_beam_search_translation_alone_equals_padded_batch],
                         ids=["incremental", "padding", "beam_batch"])
@pytest.mark.parametrize("name", EXACTNESS)
def test_frozen_models_pass_the_exactness_suite(name, check, monkeypatch):
    monkeypatch.setattr(exactness, "build_model", frozen_build_model)
    check((f"frozen {name}", CONFIGS[name]))


@pytest.mark.parametrize("frozen", [True, False], ids=["frozen", "trained"])
def test_an_aposnet_decoding_step_reads_one_table_row_and_gives_dense_mixings_numbers(frozen, monkeypatch):
    """aPosNet decoder self-attention in fairseq's beam search (one token per call from the first): each step reads
    one row of its energy table (mixers/paths/absolute_table_decoding.py), and the translations, scores and
    positional scores are dense mixing's: to the bit from a frozen table, within 1e-6 from a trained model's table
    (W^Q n~ once per position, not once per token). A decode whose first call starts past position 0 (its keys are
    not the positions 0..t) mixes densely."""
    from fairseq.sequence_generator import SequenceGenerator
    from posmix_fairseq.mixers.paths import absolute_table_decoding as path
    trained, search, d = trained_and_frozen(CONFIGS["aposnet_ungated_mha_cross"])
    model = search if frozen else trained
    served, serves = [], path.AbsoluteTableDecoding.serves

    def recorded(self, mixer, call):  # whether the path serves each decoding step
        answer = serves(self, mixer, call)
        if call.decoding_step:
            served.append(answer)
        return answer

    monkeypatch.setattr(path.AbsoluteTableDecoding, "serves", recorded)
    src, src_len = random_batch(d, [5, 12, 8], seed=6)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_len}}
    generator = SequenceGenerator([model], d, beam_size=3, max_len_b=12)
    with torch.no_grad():
        by_table = generator.forward(sample)
        assert served and all(served)
        monkeypatch.setattr(path.AbsoluteTableDecoding, "serves", lambda self, mixer, call: False)
        by_dense = generator.forward(sample)
    for table_hypotheses, dense_hypotheses in zip(by_table, by_dense):
        for a, b in zip(table_hypotheses, dense_hypotheses):
            assert torch.equal(a["tokens"], b["tokens"])
            for key in ("score", "positional_scores"):
                assert torch.equal(a[key], b[key]) if frozen else torch.allclose(a[key], b[key], rtol=1e-6, atol=1e-6)

    def steps_from_position_2(state):
        with torch.no_grad():
            encoder_out = model.encoder(src, src_len)
            return [model.decoder(prev[:, :t + 1], encoder_out=encoder_out, incremental_state=state)[0]
                    for t in range(2, prev.size(1))]

    tgt, _ = random_batch(d, [6, 6, 6], seed=2)
    prev = torch.cat([torch.full((3, 1), d.eos()), tgt[:, :-1]], dim=1)
    dense_steps = steps_from_position_2({})
    monkeypatch.setattr(path.AbsoluteTableDecoding, "serves", serves)
    state = {}
    assert all(torch.equal(a, b) for a, b in zip(steps_from_position_2(state), dense_steps))
    constants = model.decoder.layers[0].self_attn._get_decode_constants(state)
    assert constants[path.FORM_KEY] is False and path.TABLE_KEY not in constants


@pytest.mark.parametrize("flags, original", [
    (placement_flags("aposnet", True, False, False), "would have extrapolated: its position table is sinusoidal"),
    (placement_flags("rposnet", False, True, False), "would have handled it: its learned position table has 64"),
])
def test_position_beyond_the_frozen_table_is_a_clear_error(flags, original):
    model, frozen, d = trained_and_frozen(flags, num_positions=8)
    src, src_len = random_batch(d, [12], seed=1)
    tgt, _ = random_batch(d, [12], seed=2)
    log_probs(model, src, src_len, tgt)  # the trained model takes it
    with pytest.raises(ValueError) as raised:
        log_probs(frozen, src, src_len, tgt)
    message = str(raised.value)
    assert "position 11 is beyond the frozen" in message and "-frozen-energy-positions 8" in message
    assert "posmix-freeze --max-positions" in message and original in message, message
    # the decoder keeps the trained limit (no silent stop at 8); the encoder reports its table of 8, which
    # fairseq's size filter applies before decoding
    assert model.max_positions() == (64, 64) and frozen.max_positions()[1] == 64
    assert frozen.max_positions()[0] in (8, 64)  # 8 where the encoder has a frozen table


# ---- table sizes per side -------------------------------------------------------------------------

def learned_tables(mixer):
    return [flag for p in ("encoder-self", "decoder-self", "decoder-cross")
            for flag in (f"--{p}-position-table", "learned")] if mixer == "aposnet" else []


@pytest.mark.parametrize("source, target", [(20, 30), (30, 20)])
@pytest.mark.parametrize("mixer", frozen_mixers())
def test_each_side_gets_a_table_within_its_own_limit(mixer, source, target):
    """Different source and target limits with learned position tables (rPosNet's default) in all
    three placements: the default sizes (no data at hand: 128, capped per side) stay within each
    side's learned table, and the frozen model equals the trained one up to both limits."""
    flags = placement_flags(mixer, True, True, True) + learned_tables(mixer) + [
        "--max-source-positions", str(source), "--max-target-positions", str(target)]
    args = parse_model_args(flags)
    model, d = build_model_from_args(args)
    sizes, lines = choose_table_sizes(args, None, None, None)
    assert sizes == {"source": source, "target": target}, lines
    assert any("no binarized data at hand" in line for line in lines)
    task = TranslationTask(TranslationConfig(data="unused-data-dir"), d, d)
    frozen, _ = freeze_model(task, model.eval(), args, sizes)
    tables = {name: p.shape for name, p in frozen.named_parameters() if name.endswith("energy.table")}
    h = 4
    if mixer == "rposnet":
        k_hat = 2 * 16 + 1
        assert tables["encoder.layers.0.self_attn.energy.table"] == (h, source, k_hat)
        assert tables["decoder.layers.0.self_attn.energy.table"] == (h, target, k_hat)
        assert tables["decoder.layers.0.encoder_attn.energy.table"] == (h, target, k_hat)
    else:
        assert tables["encoder.layers.0.self_attn.energy.table"] == (h, source, source)
        assert tables["decoder.layers.0.encoder_attn.energy.table"] == (h, target, source)
    assert frozen.max_positions() == (source, target)
    src, src_len = random_batch(d, [source, 5], seed=1)
    tgt, _ = random_batch(d, [target, 7], seed=2, left_pad=False)
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], dim=1)
    diff = (log_probs(model, src, src_len, prev) - log_probs(frozen, src, src_len, prev)).abs().max().item()
    assert diff <= TOL


def test_table_sizes_from_the_data_are_capped_at_each_sides_limit(trained_checkpoint):
    data, _, root = trained_checkpoint
    source, target = raw_longest(root)
    args = parse_model_args(placement_flags("rposnet", True, True, False) + ["--max-target-positions", "5"])
    sizes, lines = choose_table_sizes(args, data, "src", "tgt")
    assert sizes == {"source": -(-source // 16) * 16, "target": 5} and target + 1 > 5
    assert any("target: N = 5" in line and "capped at --max-target-positions 5" in line for line in lines), lines
    # N for both sides is at most each side's limit; SOURCE,TARGET above a limit is an error
    assert choose_table_sizes(args, data, "src", "tgt", "12")[0] == {"source": 12, "target": 5}
    with pytest.raises(ValueError, match=r"--max-positions: 12 target positions exceed the model's "
                                         r"--max-target-positions 5"):
        choose_table_sizes(args, data, "src", "tgt", "12,12")
    with pytest.raises(ValueError, match=r"--max-positions: give N or SOURCE,TARGET"):
        choose_table_sizes(args, data, "src", "tgt", "12,x")


def test_a_search_model_larger_than_the_trained_one_gets_a_warning():
    """Tiny aPosNet (D = 32, H = 4): a 64 x 64 table per head outweighs W^Q, W^K; 8 positions do not."""
    flags = placement_flags("aposnet", True, True, False)
    model, large, d = trained_and_frozen(flags, num_positions=64)
    warning = larger_model_warning(model, large, {"source": 64, "target": 64})
    assert warning and "more than the trained model's" in warning and "--max-positions" in warning
    model, small, d = trained_and_frozen(flags, num_positions=8)
    assert larger_model_warning(model, small, {"source": 8, "target": 8}) is None


def test_search_checkpoints_with_one_table_size_load_with_it_on_both_sides():
    """Stored arguments with --frozen-energy-positions N (one size for both sides) are upgraded."""
    args = parse_model_args(placement_flags("aposnet", False, False, True))
    for side in ("encoder", "decoder"):
        delattr(args, f"{side}_frozen_energy_positions")
    args.frozen_energy_positions = 12
    args.posmix_paper_readings = 12  # stored by the code of that option
    model, _ = build_model_from_args(args)
    assert model.decoder.layers[0].encoder_attn.energy.table.shape == (4, 12, 12)
    assert not hasattr(args, "frozen_energy_positions") and args.encoder_frozen_energy_positions == 12


# ---- parameter counts against the paper ----------------------------------------------------------

def paper_size_model(arch, frozen=None, vocab=1000):
    sides = ["--encoder-frozen-energy-positions", str(frozen), "--decoder-frozen-energy-positions", str(frozen)]
    return meta_model(["--arch", arch, "--share-all-embeddings"] + (sides if frozen else []), vocab)


def weights(module):
    """Parameters as Table 8 counts them: matrices and tables, no biases or LayerNorm."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


@pytest.mark.parametrize("mixer, size, d, h, k", [("rposnet", "wmt_en_de", 512, 8, 16),
                                                  ("rposnet", "wmt_en_de_big", 1024, 16, 8),
                                                  ("aposnet", "wmt_en_de", 512, 8, None)])
def test_search_time_layer_parameters_are_table_8s_search_column(mixer, size, d, h, k):
    """Table 8, search column per (gated) layer: rPosNet H K^ N + 3 D^2, aPosNet H N^2 + 3 D^2."""
    n = 128
    layer = paper_size_model(f"{mixer}_{size}", frozen=n).encoder.layers[0].self_attn
    expected = h * (2 * k + 1) * n + 3 * d * d if mixer == "rposnet" else h * n * n + 3 * d * d
    assert weights(layer) == expected
    assert layer.energy.table8_parameters(True, d, n, n)[1] == expected  # the formula the frozen energy carries


@pytest.mark.parametrize("size, claim", [
    pytest.param("wmt_en_de", 23, id="base"),
    pytest.param("wmt_en_de_big", 24, id="big")])
def test_search_time_attention_parameters_below_training_time_as_section_4_2_says(size, claim):
    """Section 4.2: precomputing rPosNet's energies saves 23% (Base) and 24% (Big) of the attention
    parameters (Table 8: K^ D + 4 D^2 -> H K^ N + 3 D^2, N = 128)."""
    trained = paper_size_model(f"rposnet_{size}").encoder.layers[0].self_attn
    frozen = paper_size_model(f"rposnet_{size}", frozen=128).encoder.layers[0].self_attn
    saving = 100.0 * (1 - weights(frozen) / weights(trained))
    assert round(saving) >= claim, f"{saving:.2f}%"


# (table, row, Transformer row, model row, rounding unit): the paper's Params columns
PAPER_PARAMS = [
    ("Table 2 (En-De Base)", "wmt_en_de", 66.5e6, {"rposnet": 63.9e6, "aposnet": 65.0e6}, 0.1e6),
    ("Table 3 (En-De Big)", "wmt_en_de_big", 221e6, {"rposnet": 210e6, "aposnet": 212e6}, 1e6),
    ("Table 3 (De-En Small)", "iwslt_de_en", 36.8e6, {"rposnet": 34.1e6, "aposnet": 35.2e6}, 0.1e6),
]


@pytest.mark.parametrize("table, size, transformer, rows, unit", PAPER_PARAMS, ids=[p[0] for p in PAPER_PARAMS])
@pytest.mark.parametrize("mixer", frozen_mixers())
def test_frozen_totals_reproduce_the_params_columns_of_tables_2_and_3(table, size, transformer, rows, unit, mixer):
    """The vocabulary is not given exactly (Table 1: ~44k, ~10k), so we compare the difference to
    the Transformer row of the same table (the vocabulary cancels), with N = 128. The paper's
    rPosNet rows include its learned n~ tables (128 x D per side, Section 5.2: rPosNet uses learned
    embeddings), which the frozen checkpoint drops: they are added back here (README, Choices)."""
    d = 1024 if size == "wmt_en_de_big" else 512
    ours = num_parameters(paper_size_model(f"{mixer}_{size}", frozen=128)) - \
        num_parameters(paper_size_model(f"posmix_transformer_{size}"))
    learned_n = 2 * 128 * d if mixer == "rposnet" else 0
    paper = rows[mixer] - transformer
    assert abs(ours + learned_n - paper) <= unit, \
        f"{table} {mixer}: ours {ours + learned_n:+,} vs paper {paper:+,.0f} (each row rounded to {unit:,.0f})"


# ---- the command, end to end ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("freeze")
    data = binarized_toy_corpus(root, sizes={"train": 200, "valid": 10, "test": 12})
    run_train(data, str(root / "ckpt"), ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"],
              updates=2)
    return data, str(root / "ckpt" / "checkpoint_last.pt"), root


def freeze_cli(*argv):
    return subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.freeze", *argv], capture_output=True, text=True,
                          timeout=300)


def hypotheses(stdout):
    """{sentence id: (tokens, [sentence score, positional scores...])} from fairseq-generate's output."""
    out = {}
    for line in stdout.splitlines():
        if line[:2] == "H-":
            key, score, tokens = line.split("\t")
            out.setdefault(key[2:], [None, []])[0] = tokens
            out[key[2:]][1].insert(0, float(score))
        elif line[:2] == "P-":
            key, scores = line.split("\t")
            out.setdefault(key[2:], [None, []])[1].extend(float(x) for x in scores.split())
    return out


def assert_same_translations(searched, original):
    """Identical tokens; scores equal up to float rounding (the frozen table and W^Q n~ Emb_rel^T
    round differently in the last bits)."""
    assert searched.keys() == original.keys()
    for key, (tokens, scores) in original.items():
        assert searched[key][0] == tokens, key
        assert searched[key][1] == pytest.approx(scores, abs=2e-4), key


def raw_longest(root):
    """(source, target): the longest sentence of the raw toy corpus (train, valid, test) in tokens with
    the EOS that fairseq-preprocess appends."""
    return tuple(max(len(line.split()) + 1 for split in ("train", "valid", "test")
                     for line in open(os.path.join(root, "raw", f"{split}.{lang}")))
                 for lang in ("src", "tgt"))


def test_freeze_then_fairseq_generate_gives_the_same_translations(trained_checkpoint):
    """Tables as large as generation can reach (fairseq-generate's default --max-len-b 200): the same
    hypotheses and scores as the trained checkpoint (a 2-update model emits long outputs)."""
    data, checkpoint, root = trained_checkpoint
    frozen = str(root / "search.pt")
    result = freeze_cli(checkpoint, frozen, "--max-positions", "256")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| decoder cross | rposnet (gated) | 2 |" in result.stdout and "**total**" in result.stdout
    original, searched = run_generate(data, checkpoint), run_generate(data, frozen)
    assert original.returncode == 0 and searched.returncode == 0, searched.stderr[-3000:]
    assert len(hypotheses(original.stdout)) == 12
    assert_same_translations(hypotheses(searched.stdout), hypotheses(original.stdout))
    state = torch.load(frozen, map_location="cpu", weights_only=False)
    assert not any("q_proj" in k or "relative_embeddings" in k or "mixer_position_tables" in k for k in state["model"])

    short = str(root / "short.pt")
    assert freeze_cli(checkpoint, short, "--max-positions", "3").returncode == 0
    too_long = run_generate(data, short)  # longer sources: fairseq's size check on the encoder's table, before decoding
    assert too_long.returncode != 0 and "max_positions=(3, " in too_long.stderr, too_long.stderr[-3000:]
    limited = str(root / "limited.pt")  # asked for: the tables are the max positions, fairseq's size check
    assert freeze_cli(checkpoint, limited, "--max-positions", "3", "--tables-as-max-positions").returncode == 0
    too_long = run_generate(data, limited)
    assert too_long.returncode != 0 and "max_positions=(3, 3)" in too_long.stderr, too_long.stderr[-3000:]


def test_nothing_to_freeze_is_a_clear_error(trained_checkpoint):
    data, checkpoint, root = trained_checkpoint
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    for placement in ("encoder_self", "decoder_self", "decoder_cross"):  # Table 5's all-MHA row
        setattr(state["cfg"]["model"], f"{placement}_mixer", "mha")
    transformer = str(root / "transformer.pt")
    torch.save(state, transformer)
    result = freeze_cli(transformer, str(root / "never.pt"))
    assert result.returncode == 3 and not os.path.exists(root / "never.pt")  # neither a failure (1) nor usage (2)
    assert "nothing to freeze" in result.stderr and "--encoder-self-mixer mha" in result.stderr, result.stderr
    for bad in ("16,0", "8,8,8"):  # malformed: a usage error before the checkpoint is read
        result = freeze_cli(transformer, str(root / "never.pt"), "--max-positions", bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert "argument --max-positions: give N or SOURCE,TARGET as integers >= 1" in result.stderr
