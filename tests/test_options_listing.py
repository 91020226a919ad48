"""posmix-options: the model options of a posmix arch from the command line (fairseq 0.12's
`fairseq-train --arch ARCH --help` lists none), with the values fairseq-train uses when they are not
given and their valid values; a clear usage error for an arch that is not a posmix arch."""
import os
import re
import subprocess
import sys

import pytest

from posmix_fairseq.core.placement import ENCODER_SELF
from posmix_fairseq.harness import options
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.harness.testing import parse_model_args

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def option_value(text, flag):
    m = re.search(rf"^  {re.escape(flag)} (.+)$", text, re.MULTILINE)
    return m.group(1) if m else None


def test_a_fresh_process_lists_an_archs_options_with_the_values_fairseq_train_uses():
    proc = subprocess.run([sys.executable, "-m", "posmix_fairseq.harness.options", "rposnet_wmt_en_de_big"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    args = parse_model_args(["--arch", "rposnet_wmt_en_de_big"], tiny=False)  # what fairseq-train builds
    assert option_value(text, "--encoder-self-mixer") == args.encoder_self_mixer == "rposnet"
    assert option_value(text, "--decoder-self-max-relative-position") == str(
        args.decoder_self_max_relative_position) == "8"  # K = 8 in the Big config (GPA)
    assert option_value(text, "--decoder-cross-mixer") == "mha"
    first = ", ".join(MIXER_REGISTRY.names_at(ENCODER_SELF)[:3])  # the valid mixers of the sublayer, in order
    assert f"valid: {first}," in text and "valid: sinusoidal, learned." in text
    assert option_value(text, "--encoder-self-gaussian-impl") is None  # a Gaussian-head option rPosNet never reads
    assert option_value(text, "--encoder-embed-dim") is None  # fairseq's own: with --all
    assert "INFO" not in proc.stderr


def test_all_adds_unused_and_fairseqs_options():
    text = options.main(["hc_sa_iwslt_de_en", "--all"])
    args = parse_model_args(["--arch", "hc_sa_iwslt_de_en"], tiny=False)
    assert option_value(text, "--encoder-embed-dim") == str(args.encoder_embed_dim)
    assert option_value(text, "--encoder-self-mixer") == args.encoder_self_mixer
    assert option_value(text, "--encoder-self-rposnet-impl") is not None  # listed, among the unused


@pytest.mark.parametrize("arch,listed", [("rposnet_tiny", "rposnet_iwslt_de_en"), ("transformer", "rposnet_iwslt_de_en")])
def test_an_unknown_or_fairseq_arch_is_a_usage_error_listing_posmix_archs(arch, listed, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["posmix-options", arch])
    status = options.cli()
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"ARCH {arch!r} is not a posmix arch; valid: " in err and listed in err


def test_without_arch_the_posmix_archs_are_listed():
    text = options.main([])
    assert "  rposnet_iwslt_de_en\n" in text and "  transformer\n" not in text
