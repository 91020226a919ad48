"""The real CLI on tiny data: fairseq-preprocess, fairseq-train (a few updates), then
fairseq-generate with beam search in a FRESH process reloading the checkpoint.
Modelled on fairseq's tests/test_binaries.py (in-process train, like upstream)."""
import os
import shutil

import pytest
import torch

from helpers import binarize, binarized_toy_corpus, run_train
from helpers import run_generate as run_generate_raw
from posmix_fairseq.harness.toy_corpus import write_corpus

# One case per feature family: each family through the real CLI, reloaded by fairseq-generate in a fresh
# process. (Every registered arch and configuration is built, trained a step and decoded incrementally,
# batch- and padding-invariantly, in test_decoding_exactness.py and test_fairseq_machinery.py.)
CASES = {
    "transformer": ["--arch", "posmix_transformer_iwslt_de_en"],  # content attention
    "shaw": ["--arch", "shaw_iwslt_de_en"],  # relative attention (Shaw et al.)
    "relattn": ["--arch", "relattn_iwslt_de_en"],  # token-position relative attention
    "aposnet": ["--arch", "aposnet_iwslt_de_en"],  # absolute position-only energies
    "rposnet_cross": ["--arch", "rposnet_iwslt_de_en", "--decoder-cross-mixer", "rposnet"],  # relative, gamma
    "hc_all": ["--arch", "hc_all_iwslt_de_en"],  # hard-coded cross-attention, gamma from the data
    "sh_x": ["--arch", "sh_x_iwslt_de_en"],  # one learned cross head, last layer (alignment from it)
    "fouriernet": ["--arch", "fouriernet_iwslt_de_en"],  # parameter-free token mixing
    "glinearnet": ["--arch", "glinearnet_iwslt_de_en"],  # learned position-to-position matrices, gated
    "lightconvnet_gating_global": ["--arch", "lightconvnet_iwslt_de_en", "--encoder-self-lightconv-glu", "off",
                                   "--decoder-self-lightconv-glu", "off", "--encoder-self-gating", "on",
                                   "--decoder-self-gating", "on", "--encoder-self-lightconv-global-context", "on",
                                   "--decoder-self-lightconv-global-context", "on"],  # convolution
    # the positional-encoding family: one case per kind of position module
    **{variant: ["--arch", f"{variant}_iwslt_de_en"]
       for variant in ("learnedpe", "lstmpe", "mprhead", "posnet_embed", "posnet_attn", "at5bias")},
}


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("toy"), sizes={"train": 400, "valid": 40, "test": 25})


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_then_generate_in_fresh_process(toy_data, tmp_path, case):
    run_train(toy_data, str(tmp_path), CASES[case])
    checkpoint = str(tmp_path / "checkpoint_last.pt")
    assert os.path.exists(checkpoint)
    stdout, _ = run_generate(toy_data, checkpoint, "--print-alignment")
    hyps = [line for line in stdout.splitlines() if line.startswith("H-")]
    aligns = [line for line in stdout.splitlines() if line.startswith("A-")]
    assert len(hyps) == 25 and len(aligns) == 25, stdout[-2000:]
    assert "BLEU4" in stdout
    # reload in this process too and check the stored architecture
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert state["cfg"]["model"].arch == CASES[case][1]


@pytest.fixture(scope="module")
def long_target_data(tmp_path_factory):
    """Every target word doubled: gamma = mean src / mean tgt length = 0.5 exactly."""
    root = tmp_path_factory.mktemp("ratio")
    raw = root / "raw"
    write_corpus(str(raw), sizes={"train": 300, "valid": 20, "test": 10})
    for split in ("train", "valid", "test"):
        lines = (raw / f"{split}.tgt").read_text().splitlines()
        (raw / f"{split}.tgt").write_text("".join(" ".join(w + " " + w for w in ln.split()) + "\n" for ln in lines))
    binarize(str(raw), str(root / "bin"))
    return root


def test_length_ratio_computed_from_data_stored_and_reused_at_generation(long_target_data, tmp_path):
    data = str(long_target_data / "bin")
    run_train(data, str(tmp_path), CASES["rposnet_cross"], updates=3)
    checkpoint = str(tmp_path / "checkpoint_last.pt")
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert state["cfg"]["model"].length_ratio == pytest.approx(0.5, abs=1e-12)
    # generation from a directory WITHOUT the training split: gamma must come from the checkpoint
    gen_only = tmp_path / "gen_only"
    gen_only.mkdir()
    for name in os.listdir(data):
        if name.startswith(("dict.", "test.")):
            shutil.copy(os.path.join(data, name), gen_only / name)
    stdout, stderr = run_generate(str(gen_only), checkpoint)
    assert sum(line.startswith("H-") for line in stdout.splitlines()) == 10
    assert "length ratio gamma" not in stderr  # not recomputed
    # an explicit --length-ratio wins over the data
    run_train(data, str(tmp_path / "explicit"), CASES["rposnet_cross"] + ["--length-ratio", "0.75"], updates=1)
    state = torch.load(str(tmp_path / "explicit" / "checkpoint_last.pt"), map_location="cpu", weights_only=False)
    assert state["cfg"]["model"].length_ratio == 0.75


def generate_raw(data, checkpoint, *extra):
    return run_generate_raw(data, checkpoint, *extra, beam=2)


def run_generate(data, checkpoint, *extra):
    proc = run_generate_raw(data, checkpoint, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("arch,extrapolates", [("shaw_sin_iwslt_de_en", True), ("lstmpe_iwslt_de_en", True),
                                               ("learnedpe_iwslt_de_en", False)])
def test_fairseq_generate_beyond_the_trained_length(toy_data, tmp_path, arch, extrapolates):
    """Trained with 14 positions; the test split has longer sentences. Raising fairseq's limits at
    generation lets the extrapolating methods translate them; a learned table names its limit."""
    limits = ["--max-source-positions", "14", "--max-target-positions", "14"]
    run_train(toy_data, str(tmp_path), ["--arch", arch, *limits, "--skip-invalid-size-inputs-valid-test"], updates=2)
    checkpoint = str(tmp_path / "checkpoint_last.pt")
    refused = generate_raw(toy_data, checkpoint)
    assert refused.returncode != 0 and "is invalid" in refused.stderr  # fairseq's own length filter
    raised = generate_raw(toy_data, checkpoint, "--model-overrides",
                          "{'max_source_positions': 1024, 'max_target_positions': 1024}")
    if extrapolates:
        assert raised.returncode == 0, raised.stderr[-2000:]
        assert sum(line.startswith("H-") for line in raised.stdout.splitlines()) == 25
    else:  # a learned table cannot grow: the checkpoint's 14-row table does not load into 1024 rows
        assert raised.returncode != 0
        assert "size mismatch for encoder.embed_positions.weight" in raised.stderr, raised.stderr[-2000:]
