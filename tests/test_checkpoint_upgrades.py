"""Checkpoints are upgraded once, at load: a model built from today's options runs no upgrade code,
the arch function runs once per build, a stored checkpoint's arguments are upgraded exactly once,
and the computations only older checkpoints use are no command-line flag, value or mixer."""
import os

import pytest
import torch
from fairseq import checkpoint_utils, models, options
from fairseq.models import ARCH_CONFIG_REGISTRY

from helpers import make_dictionary, parse_model_args
from posmix_fairseq import USER_DIR
from posmix_fairseq.harness.testing import ParseRefusal, build_stored_model, stored_arguments
from posmix_fairseq.models import upgrades
from posmix_fairseq.models.architectures import ARCHITECTURES
from posmix_fairseq.models.options import LEGACY_READINGS, DEFAULTS_VERSION_KEY, DEFAULTS_VERSION
from posmix_fairseq.tasks.translation import PosMixTranslationConfig, PosMixTranslationTask

LEGACY = os.path.join(os.path.dirname(__file__), "data", "legacy_checkpoints")
LEGACY_ONLY_FLAGS = ("-rpe-reading", "-relative-sinusoids", "-posnet-kernel", "--posmix-paper-readings")
LEGACY_ONLY_VALUES = ("sliced_mha", "sliced-legacy", "cumulative")


def training_parser(arch):
    """fairseq-train's parser with the options it registers for ``--arch arch``."""
    parser = options.get_training_parser()
    args, _ = options.parse_args_and_arch(parser, ["data-bin", "--user-dir", USER_DIR, "--arch", arch],
                                          parse_known=True)
    return parser, args


@pytest.mark.parametrize("arch", ["rposnet_iwslt_de_en", "rpehead_iwslt_de_en", "posnet_attn_iwslt_de_en",
                                  "at5bias_wmt_en_de", "shaw_sin_iwslt_de_en"])
def test_fairseq_train_registers_no_legacy_only_flag_or_value(arch):
    parser, args = training_parser(arch)
    flags = [flag for action in parser._actions for flag in action.option_strings]
    assert any(flag == "--encoder-self-mixer" for flag in flags)  # the model's options are there
    assert not [f for f in flags if f.endswith(LEGACY_ONLY_FLAGS)]
    offered = {str(v) for action in parser._actions for v in (action.choices or ())}
    assert not offered & set(LEGACY_ONLY_VALUES)
    assert not [a.dest for a in parser._actions if a.dest in (DEFAULTS_VERSION_KEY, LEGACY_READINGS)]
    # the marker is a parser default: every command line of this code carries the current version
    assert getattr(args, DEFAULTS_VERSION_KEY) == DEFAULTS_VERSION and not hasattr(args, LEGACY_READINGS)


@pytest.mark.parametrize("flags", [["--encoder-self-mixer", "sliced_mha"],
                                   ["--encoder-self-t5-adaptive", "cumulative"]])
def test_legacy_only_values_are_refused_on_the_command_line(flags):
    with pytest.raises(ParseRefusal, match="invalid choice"):
        parse_model_args(["--arch", "at5bias_iwslt_de_en"] + flags)


def test_a_build_from_current_options_runs_no_upgrade_code(monkeypatch):
    def refuse(args):
        raise AssertionError("upgrade code ran for arguments of this code")
    monkeypatch.setattr(upgrades, "upgrade_stored_args", refuse)
    with torch.device("meta"):
        for arch in ["posmix_transformer", *ARCHITECTURES]:
            d = make_dictionary()
            task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
            args = parse_model_args(["--arch", arch, "--length-ratio", "1.25"])
            models.build_model(args, task)  # as fairseq-train builds: the arch function, then build_model


def test_the_arch_function_runs_once_per_build(monkeypatch):
    calls = []
    arch = "rposnet_iwslt_de_en"
    original = ARCH_CONFIG_REGISTRY[arch]
    args = parse_model_args(["--arch", arch])
    monkeypatch.setitem(ARCH_CONFIG_REGISTRY, arch, lambda a: (calls.append(arch), original(a)))
    d = make_dictionary()
    models.build_model(args, PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d))
    assert calls == [arch]


def counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: (calls.append(name), original(*a))[1])
    return calls


@pytest.mark.parametrize("name", ["posnet_attn", "at5_cumulative"])
def test_a_checkpoint_of_older_code_is_upgraded_exactly_once_per_load(name, monkeypatch):
    args_upgrades = counting(monkeypatch, upgrades, "upgrade_stored_args")
    parameter_upgrades = counting(monkeypatch, upgrades, "upgrade_stored_parameters")
    monkeypatch.setattr("posmix_fairseq.models.posmix_transformer.upgrade_stored_parameters",
                        upgrades.upgrade_stored_parameters)
    overrides = {"data": LEGACY, "source_lang": "src", "target_lang": "tgt"}
    _, cfg, _ = checkpoint_utils.load_model_ensemble_and_task([os.path.join(LEGACY, f"{name}.pt")],
                                                              arg_overrides=overrides)
    assert len(args_upgrades) == 1 and len(parameter_upgrades) == 1
    assert getattr(cfg.model, DEFAULTS_VERSION_KEY) == DEFAULTS_VERSION


def test_legacy_readings_are_stored_state_only_the_upgrade_writes():
    """Stored without a defaults version, a PosNet-Attn and an RPE model get their per-head kernels and
    head-sliced first layer as legacy readings; the same arch from a command line has neither."""
    flags = ["--arch", "mprhead_iwslt_de_en", "--decoder-self-mixer", "posnet", "--decoder-position-encoding",
             "sinusoidal", "--decoder-self-posnet-max-positions", "64"]
    args = stored_arguments(flags, ["encoder_rpe_reading", "encoder_rpe_heads", "decoder_self_posnet_kernel"])
    model, _ = build_stored_model(args)
    assert getattr(args, LEGACY_READINGS) == {"encoder": {"rpe-reading": "sliced-legacy"},
                                              "decoder_self": {"posnet-kernel": "head"}}
    assert model.encoder.layers[0].self_attn.energy.q_proj.weight.shape == (4, 8, 8)  # head h from slice h
    assert model.decoder.layers[0].self_attn.values.kernels.weight.shape[1:3] == (4, 8)  # one kernel per head
    current, _ = build_stored_model(parse_model_args(flags))
    assert type(current.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"
    assert current.decoder.layers[0].self_attn.values.kernels.weight.shape[1] == 1


def test_the_cumulative_t5_table_is_stored_apart_from_at5():
    """The legacy AT5 checkpoint stored its cumulative T5 table as ``t5bias_<sublayer>_at5``; loaded, it is
    ``..._t5cumulative`` (AT5's own table is ``..._at5soft``)."""
    models_, _, _ = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(LEGACY, "at5_cumulative.pt")], arg_overrides={"data": LEGACY, "source_lang": "src",
                                                                    "target_lang": "tgt"})
    keys = list(models_[0].state_dict())
    assert any("mixer_position_tables.t5bias_encoder_self_t5cumulative." in k for k in keys)
    assert not any(k.split(".")[2].endswith("_at5") for k in keys if ".mixer_position_tables." in k)


def test_build_model_refuses_stored_arguments_that_skipped_the_arch_function():
    """Arguments of older code reach the model only through fairseq's arch function (which upgrades them)."""
    from posmix_fairseq.models.posmix_transformer import PosMixTransformerModel
    d = make_dictionary()
    task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
    with pytest.raises(ValueError, match="without the current defaults version"):
        PosMixTransformerModel.build_model(stored_arguments(["--arch", "posnet_attn_iwslt_de_en"]), task)


@pytest.mark.parametrize("flags", [["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"],
                                   ["--arch", "at5bias_iwslt_de_en"], ["--arch", "posnet_embed_iwslt_de_en"],
                                   ["--arch", "aposnet_iwslt_de_en", "--encoder-self-position-table", "learned"]])
def test_a_checkpoint_of_this_code_runs_no_parameter_step(flags):
    from helpers import build_model

    model, _ = build_model(flags)
    stored = model.state_dict()
    before = dict(stored)
    assert upgrades.upgrade_stored_parameters(model, stored) == []
    assert list(stored) == list(before) and all(stored[k] is before[k] for k in before)


def test_only_an_unused_source_table_of_the_decoder_is_dropped_and_the_drop_is_logged(caplog):
    """The older decoders' unused source table goes, with a log line naming it; another table the model does
    not build stays in the state dict, and fairseq's strict loading refuses it by name."""
    from helpers import build_model

    model, _ = build_model(["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet",
                            "--decoder-cross-position-table", "learned"])
    stored = model.state_dict()
    unused = "decoder.mixer_position_tables.source_learned_32.weight"
    assert unused not in stored
    stored[unused] = torch.zeros(32, 32)
    with caplog.at_level("INFO", logger=upgrades.logger.name):
        model.load_state_dict(dict(stored))
    assert unused in caplog.text and "dropped" in caplog.text
    stranger = "decoder.mixer_position_tables.target_learned_99.weight"
    stored[stranger] = torch.zeros(99, 32)
    with pytest.raises(RuntimeError, match=stranger.replace(".", r"\.")):
        model.load_state_dict(stored)
