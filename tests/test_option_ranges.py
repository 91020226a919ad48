"""The options of every mixer and position encoding, as the registries declare them: every number has a range,
one check refuses what lies outside it on the command line (fairseq's parser: a usage error naming the flag)
and in stored arguments (a build-time error naming the flag), and an option name means one thing.

The sweep feeds 0, -1, NaN and infinity to every numeric option, in every sublayer or side that offers it:
where the declared range refuses the value both routes refuse it naming the flag; where it accepts it the
model builds and its outputs are finite (a range declared too wide fails here, e.g. a Gaussian sigma of 0)."""
import math
import re

import pytest
import torch

from helpers import build_model, build_model_from_args, parse_model_args, random_batch
from posmix_fairseq.core.number_ranges import Number
from posmix_fairseq.core.placement import PLACEMENTS, SIDES
from posmix_fairseq.core.registry import Entry, Registry
from posmix_fairseq.harness.testing import ParseRefusal
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.position_encodings.base import POSITION_ENCODING_REGISTRY

PROBES = ("0", "-1", "nan", "inf")


def numeric_options():
    """(registry, scope, entry name, option, its Number) of every numeric option in every scope that offers it;
    the entry is the first that reads it there."""
    found = []
    for registry, scopes in ((MIXER_REGISTRY, PLACEMENTS), (POSITION_ENCODING_REGISTRY, SIDES)):
        for scope in scopes:
            for option, kwargs in registry.declared_options(scope).items():
                if isinstance(kwargs.get("type"), Number):
                    found.append((registry, scope, registry.readers(option, scope)[0], option, kwargs["type"]))
    return found


NUMERIC = numeric_options()


def choosing(registry, scope, name):
    """The flags that put the entry ``name`` in ``scope``, with the values its options' conditions need."""
    if registry is POSITION_ENCODING_REGISTRY:
        return [scope.flag("position-encoding"), name]
    entry = MIXER_REGISTRY.get(name, "--mixer")
    flags = [scope.flag("mixer"), name]
    for other, value in entry.read_when.values():
        flags += [scope.flag(other), value]
    return flags


def accepted(number: Number, text: str) -> bool:
    try:
        number(text)
    except Exception:
        return False
    return True


def test_every_numeric_option_is_swept():
    options = {option for _, _, _, option, _ in NUMERIC}
    assert {"gaussian-sigma", "max-relative-position", "rpe-heads", "posnet-embed-dropout"} <= options
    declared = {option for registry in (MIXER_REGISTRY, POSITION_ENCODING_REGISTRY)
                for option, kwargs in registry.declared_options().items() if kwargs.get("type") not in (None, str)}
    assert declared == options


@pytest.mark.parametrize("registry,scope,name,option,number", NUMERIC,
                         ids=[scope.flag(option)[2:] for _, scope, _, option, _ in NUMERIC])
def test_the_command_line_refuses_what_the_declared_range_refuses(registry, scope, name, option, number):
    base = ["--arch", "posmix_transformer", *choosing(registry, scope, name)]
    for probe in PROBES:
        if accepted(number, probe):
            assert float(getattr(parse_model_args(base + [f"{scope.flag(option)}={probe}"]), scope.attr(option))) \
                == float(probe)
            continue
        with pytest.raises(ParseRefusal, match=f"argument {scope.flag(option)}: '?{probe}'? .*{re.escape(number.describe())}"):
            parse_model_args(base + [f"{scope.flag(option)}={probe}"])


STORED = [case for case in NUMERIC if case[1] in (PLACEMENTS[0], SIDES[1])]  # one scope per option: the same check


@pytest.mark.parametrize("registry,scope,name,option,number", STORED,
                         ids=[scope.flag(option)[2:] for _, scope, _, option, _ in STORED])
def test_stored_arguments_outside_the_range_are_refused_and_inside_it_build_finite_models(
        registry, scope, name, option, number):
    """Stored arguments bypass the parser (a checkpoint's, or arguments built in Python): the build refuses the
    same values, naming the flag; a value the range accepts builds a model whose outputs are finite."""
    for probe in PROBES:
        args = parse_model_args(["--arch", "posmix_transformer", *choosing(registry, scope, name)])
        scope.write(args, option, number.kind(float(probe)) if math.isfinite(float(probe)) else float(probe))
        if not accepted(number, probe):
            with pytest.raises(ValueError, match=f"{scope.flag(option)}: {probe}"):
                build_model_from_args(args)
            continue
        model, d = build_model_from_args(args)
        model.eval()
        src, src_len = random_batch(d, [6, 4])
        with torch.no_grad():
            assert torch.isfinite(model(src, src_len, src)[0]).all(), f"{scope.flag(option)} {probe}"


def test_an_infinite_gaussian_sigma_is_refused():
    with pytest.raises(ParseRefusal, match="argument --encoder-self-gaussian-sigma: inf is not finite"):
        build_model(["--arch", "hc_sa_iwslt_de_en", "--encoder-self-gaussian-sigma", "inf"])


@pytest.mark.parametrize("offsets", ["nan", "-1,inf"])
def test_gaussian_offsets_must_be_finite(offsets):
    with pytest.raises(ValueError, match="--encoder-self-gaussian-offsets: .* finite"):
        build_model(["--arch", "hc_sa_iwslt_de_en", f"--encoder-self-gaussian-offsets={offsets}"])


def test_a_choice_outside_its_choices_in_stored_arguments_is_refused_naming_the_flag():
    args = parse_model_args(["--arch", "hc_sa_iwslt_de_en"])
    args.decoder_self_gaussian_impl = "fast"
    with pytest.raises(ValueError, match="--decoder-self-gaussian-impl: 'fast' is not one of its values; valid values: "
                                         "full, window, conv, index"):
        build_model_from_args(args)


def entry(**options):
    return Entry(lambda spec: None, "a test entry", options)


def test_a_number_without_a_range_or_a_default_outside_it_is_refused_at_registration():
    registry = Registry("test part")
    with pytest.raises(ValueError, match="option 'width': declare its range"):
        registry.register("a", entry(width=dict(type=int, default=4)))
    with pytest.raises(ValueError, match="option 'width': its default 0 is out of its range"):
        registry.register("b", entry(width=dict(type=Number(int, 1), default=0)))
    with pytest.raises(ValueError, match="option 'kind': its default 'c' is not one of its choices"):
        registry.register("c", entry(kind=dict(choices=("a", "b"), default="c")))


def test_an_option_name_means_one_thing_across_entries():
    """Two entries may declare the same option with their own defaults; anything else is refused at registration."""
    registry = Registry("test part")
    registry.register("a", entry(width=dict(type=Number(int, 1), default=4, help="the width")))
    registry.register("b", entry(width=dict(type=Number(int, 1), default=8, help="the width")))
    assert registry.readers("width") == ["a", "b"]
    with pytest.raises(ValueError, match="'c' declares option 'width' unlike 'a' does: an option name has one meaning"):
        registry.register("c", entry(width=dict(type=Number(int, 2), default=8, help="the width")))
    with pytest.raises(ValueError, match="unlike 'a' does"):
        registry.register("d", entry(width=dict(type=Number(int, 1), default=8, help="another width")))


def test_the_registered_options_with_one_name_share_one_meaning():
    for registry in (MIXER_REGISTRY, POSITION_ENCODING_REGISTRY):
        for option in registry.declared_options():
            meanings = {repr({k: v for k, v in entry.options[option].items() if k != "default"})
                        for name, entry in registry.items() if option in entry.options}
            assert len(meanings) == 1, (option, meanings)
