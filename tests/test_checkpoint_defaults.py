"""A trained model keeps its meaning when a default changes: its checkpoint stores the value of every option
its model reads (the arch function writes them, docs/choices.md "Old checkpoints"), and checkpoints made before
that read the defaults of their own version (models/upgrades.py). Each case changes a default of the
registry, as a later commit might, and loads a checkpoint made before the change: it computes what it did;
a model built anew under the changed default computes something else (the change matters)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import build_model_from_args, parse_model_args, random_batch
from posmix_fairseq.harness.testing import (build_stored_model, load_checkpoint, save_checkpoint, stored_arguments,
                                            write_dictionaries)
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.models.upgrades import EVERY_VALUE_STORED
from posmix_fairseq.position_encodings.base import POSITION_ENCODING_REGISTRY

# (arch flags, registry, entry, option, the changed default; None: the mixer's gating default is flipped)
CHANGES = {
    "gaussian_sigma": (["--arch", "hc_sa_iwslt_de_en"], MIXER_REGISTRY, "gaussian", "gaussian-sigma", 2.5),
    "shaw_value_term": (["--arch", "shaw_abs_iwslt_de_en"], MIXER_REGISTRY, "shaw", "shaw-value-term", "off"),
    "rpe_sinusoids": (["--arch", "mprhead_iwslt_de_en"], POSITION_ENCODING_REGISTRY, "mprhead", "rpe-sinusoids",
                      "off"),
    "rposnet_gating": (["--arch", "rposnet_iwslt_de_en"], MIXER_REGISTRY, "rposnet", None, None),
}


def change_default(monkeypatch, registry, name, option, value):
    entry = registry.get(name, "--test")
    if option is None:
        monkeypatch.setattr(entry, "gated_by_default", not entry.gated_by_default)
    else:
        monkeypatch.setitem(entry.options, option, dict(entry.options[option], default=value))


def log_probs(model, d):
    src, src_len = random_batch(d, [7, 5], seed=3)
    prev, _ = random_batch(d, [6, 6], seed=4, left_pad=False)
    with torch.no_grad():
        return F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)


def same_or_refused(build, reference):
    """True when ``build()`` computes ``reference``; False when it differs or cannot take the parameters."""
    try:
        model, d = build()
    except RuntimeError:  # another parameter set (gating on/off): the state dict does not load
        return False
    return torch.allclose(log_probs(model, d), reference, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_changed_default_does_not_change_a_saved_checkpoint(case, tmp_path, monkeypatch):
    flags, registry, name, option, value = CHANGES[case]
    args = parse_model_args(flags)
    model, d = build_model_from_args(args)
    model.eval()
    expected = log_probs(model, d)
    write_dictionaries(str(tmp_path), d)
    save_checkpoint(model, args, str(tmp_path / "checkpoint.pt"))
    change_default(monkeypatch, registry, name, option, value)

    loaded, _ = load_checkpoint(str(tmp_path / "checkpoint.pt"), str(tmp_path))
    torch.testing.assert_close(log_probs(loaded, d), expected, atol=1e-6, rtol=0)

    def anew():  # the same parameters where they fit, under the changed default
        fresh, _ = build_model_from_args(parse_model_args(flags))
        fresh.load_state_dict(model.state_dict())
        return fresh.eval(), d
    assert not same_or_refused(anew, expected), f"{case}: the changed default does not change a new model"


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_changed_default_does_not_change_arguments_stored_before_every_value_was(case, monkeypatch):
    """Arguments of defaults version 13 left unset options to the code's defaults: they read version 13's."""
    flags, registry, name, option, value = CHANGES[case]
    scopes = [f"{side}_{option.replace('-', '_')}" for side in
              (("encoder_self", "decoder_self", "decoder_cross") if registry is MIXER_REGISTRY
               else ("encoder", "decoder"))] if option else [f"{p}_gating" for p in ("encoder_self", "decoder_self")]
    stored = stored_arguments(flags, scopes, defaults_version=EVERY_VALUE_STORED - 1)
    before, d = build_stored_model(stored, seed=1)
    expected = log_probs(before, d)
    change_default(monkeypatch, registry, name, option, value)
    after, _ = build_stored_model(stored_arguments(flags, scopes, defaults_version=EVERY_VALUE_STORED - 1), seed=1)
    torch.testing.assert_close(log_probs(after, d), expected, atol=1e-6, rtol=0)

    def anew():
        fresh, _ = build_model_from_args(parse_model_args(flags), seed=1)
        fresh.load_state_dict(before.state_dict())
        return fresh.eval(), d
    assert not same_or_refused(anew, expected), f"{case}: the changed default does not change a new model"
