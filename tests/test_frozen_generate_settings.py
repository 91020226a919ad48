"""A frozen (search-time) model translates exactly as the trained one under fairseq-generate's
settings (GPA Sections 4.1-4.2; posmix-freeze).

fairseq-generate decodes at most min(max_len_a * S + max_len_b, max decoder positions - 1) tokens
(defaults 0 and 200): the default tables cover that whatever the data's longest sentence, the
frozen model keeps the trained model's max positions, and an output that outgrows a smaller table
is a clear error, never a shorter hypothesis."""
import pytest
import torch
from fairseq.dataclass.configs import GenerationConfig
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from helpers import build_model_from_args, parse_model_args, random_batch, run_generate
from posmix_fairseq.harness.freeze import choose_table_sizes, freeze_model, round_up
from posmix_fairseq.mixers import frozen_mixers
from test_freeze import (assert_same_translations, freeze_cli, hypotheses, placement_flags, raw_longest,  # noqa: F401
                         trained_checkpoint)

DEFAULTS = GenerationConfig()  # fairseq-generate's --max-len-a 0 --max-len-b 200
LIMIT = 1024  # fairseq's default --max-source/target-positions
MIXERS = {mixer: placement_flags(mixer, True, True, True) for mixer in frozen_mixers()}


def looping_model(mixer):
    """A tiny random model at fairseq's default limits whose EOS logit is 0 (the median of a random
    row): beam search never picks EOS, so every hypothesis runs to fairseq-generate's max_len."""
    small = ["--encoder-layers", "1", "--decoder-layers", "1"]  # 200 decoding steps
    limits = ["--max-source-positions", str(LIMIT), "--max-target-positions", str(LIMIT)]
    args = parse_model_args(MIXERS[mixer] + small + limits)
    model, d = build_model_from_args(args)
    with torch.no_grad():
        model.decoder.output_projection.weight[d.eos()] = 0
    task = TranslationTask(TranslationConfig(data="unused-data-dir"), d, d)
    return args, model.eval(), d, task


def translate(model, d, src, src_len, beam=2, **settings):
    """fairseq-generate's search (SequenceGenerator, its default settings unless given)."""
    generator = SequenceGenerator([model], d, beam_size=beam, **settings)
    with torch.no_grad():
        found = generator.forward({"net_input": {"src_tokens": src, "src_lengths": src_len}})
    return [[h["tokens"].tolist() for h in hyps] for hyps in found]


@pytest.fixture(scope="module", params=sorted(MIXERS))
def looping(request):
    args, model, d, task = looping_model(request.param)
    src, src_len = random_batch(d, [9], seed=3)
    return args, model, d, task, src, src_len, translate(model, d, src, src_len)


def test_default_tables_give_the_trained_translations_past_the_datas_length(looping):
    """No data at hand (source N = 128) and a sentence of 9 tokens: the default target table still
    covers fairseq-generate's 200 outputs + EOS, and the frozen model gives the trained hypotheses,
    each 201 tokens long (a table sized from short data once cut them)."""
    args, model, d, task, src, src_len, trained = looping
    assert {len(h) for hyps in trained for h in hyps} == {DEFAULTS.max_len_b + 1}  # ran to max_len, then EOS
    sizes, lines = choose_table_sizes(args, None, None, None)
    assert sizes["target"] == round_up(DEFAULTS.max_len_b + 1) == 208, lines
    assert any("--max-len-a 0 --max-len-b 200 decode up to 200 tokens" in line for line in lines), lines
    frozen, _ = freeze_model(task, model, args, sizes)
    # the decoder keeps the trained limit (outputs bounded as the trained model's); the encoder reports its
    # table, so that fairseq's size filter refuses a longer source before decoding
    assert model.max_positions() == (LIMIT, LIMIT) and frozen.max_positions() == (sizes["source"], LIMIT)
    assert translate(frozen, d, src, src_len) == trained


def test_an_output_beyond_the_target_table_is_a_clear_error(looping):
    """A target table of 16 positions under the default settings: generation stops with the error
    naming the option and the fix, not with 15-token hypotheses; under the fix (--max-len-b 15) the
    frozen model gives the trained model's translations."""
    args, model, d, task, src, src_len, _ = looping
    frozen, _ = freeze_model(task, model, args, {"source": 16, "target": 16})
    with pytest.raises(ValueError) as raised:
        translate(frozen, d, src, src_len)
    message = str(raised.value)
    assert "target position 16 is beyond the frozen" in message, message
    assert "(--decoder-frozen-energy-positions 16, set by posmix-freeze --max-positions)" in message, message
    assert "fairseq-generate --max-len-a 0 --max-len-b 15" in message, message
    assert translate(frozen, d, src, src_len, max_len_b=15) == translate(model, d, src, src_len, max_len_b=15)


def test_tables_as_max_positions_bound_the_outputs_as_asked(looping):
    """Frozen with --tables-as-max-positions, the model reports its tables as its limits, and fairseq
    stops the outputs within the target table (what that option asks for)."""
    args, model, d, task, src, src_len, _ = looping
    frozen, frozen_args = freeze_model(task, model, args, {"source": 16, "target": 24}, tables_as_max_positions=True)
    assert frozen.max_positions() == (16, 24) and frozen_args.frozen_tables_as_max_positions
    assert {len(h) for hyps in translate(frozen, d, src, src_len) for h in hyps} == {24}  # 23 tokens + EOS


def test_tables_as_max_positions_without_tables_is_a_clear_error():
    args = parse_model_args(MIXERS["rposnet"] + ["--frozen-tables-as-max-positions"])
    with pytest.raises(ValueError, match=r"--frozen-tables-as-max-positions applies to a search-time model only"):
        build_model_from_args(args)


def test_posmix_freeze_default_gives_the_trained_translations_under_default_generate(trained_checkpoint):
    """The real commands: posmix-freeze with its default N, then fairseq-generate with its default
    output length. The toy data's sentences are short (the data-derived N would stop outputs within
    48 positions), the 2-update model's outputs run longer, and the hypotheses and scores are the
    trained checkpoint's."""
    data, checkpoint, root = trained_checkpoint
    frozen = str(root / "search_default_generate.pt")
    result = freeze_cli(checkpoint, frozen)
    assert result.returncode == 0, result.stderr[-3000:]
    source, target = raw_longest(root)
    args = torch.load(frozen, map_location="cpu", weights_only=False)["cfg"]["model"]
    assert (args.encoder_frozen_energy_positions, args.decoder_frozen_energy_positions) == (round_up(source), 208)
    assert not args.frozen_tables_as_max_positions
    assert f"source: N = {round_up(source)} (the longest source sentence of train, valid, test has {source} " \
           "tokens with EOS, rounded up to a multiple of 16" in result.stdout, result.stdout
    assert "target: N = 208 (fairseq-generate's defaults --max-len-a 0 --max-len-b 200 decode up to 200 tokens" \
        in result.stdout, result.stdout
    original, searched = run_generate(data, checkpoint), run_generate(data, frozen)
    assert original.returncode == 0 and searched.returncode == 0, searched.stderr[-3000:]
    trained = hypotheses(original.stdout)
    assert len(trained) == 12
    longest_output = max(len(tokens.split()) + 1 for tokens, _ in trained.values())  # with EOS
    assert longest_output > round_up(target), (longest_output, target)  # outputs outgrow the data's length
    assert_same_translations(hypotheses(searched.stdout), trained)


def test_fairseq_generate_past_the_target_table_exits_with_the_error(trained_checkpoint):
    """posmix-freeze --max-positions SOURCE,16 and fairseq-generate's defaults: a non-zero exit with
    the error naming --decoder-frozen-energy-positions and the fix, no shorter hypotheses."""
    data, checkpoint, root = trained_checkpoint
    source, _ = raw_longest(root)
    short = str(root / "short_target.pt")
    result = freeze_cli(checkpoint, short, "--max-positions", f"{round_up(source)},16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note: fairseq-generate's defaults (--max-len-a 0 --max-len-b 200) decode up to target position 200" \
        in result.stdout, result.stdout
    searched = run_generate(data, short)
    assert searched.returncode != 0
    assert "(--decoder-frozen-energy-positions 16, set by posmix-freeze --max-positions)" in searched.stderr, \
        searched.stderr[-3000:]
    assert "--max-len-b 15" in searched.stderr
