"""The real CLI on tiny data: fairseq-preprocess, fairseq-train (a few updates), then fairseq-generate with beam
search and alignments in a FRESH process reloading each checkpoint (one process for all cases: fairseq imported
once). Modelled on fairseq's tests/test_binaries.py (in-process train, like upstream).

The cases come from the registries: one per token mixer and one per position encoding, each the first arch of
the table (models/architectures.py) that uses it in the most sublayers (or sides); a position-aware mixer that
cross-attention may use is put there too, so gamma is computed from the data. Two features no single mixer
names ride along: one learned cross-attention head in the last layer (SH-X), and the light convolution's gating
and global context. (Every registered arch is reloaded in a fresh process by tests/test_checkpoint_reload.py,
and built, decoded incrementally and batch- and padding-invariantly by test_decoding_exactness.py.)"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from helpers import binarize, binarized_toy_corpus, parse_model_args, run_train
from helpers import run_generate as run_generate_raw
from posmix_fairseq.core.placement import DECODER_CROSS, PLACEMENTS, SIDES
from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.toy_corpus import write_corpus
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.models.architectures import VARIANTS
from posmix_fairseq.position_encodings.base import POSITION_ENCODING_REGISTRY

SIZE = "iwslt_de_en"


def components(variant):
    """({placement: mixer}, {side: position encoding}) of ``variant`` as fairseq-train parses it."""
    args = parse_model_args(["--arch", f"{variant}_{SIZE}"])
    return {p: p.read(args, "mixer") for p in PLACEMENTS}, {s: s.read(args, "position-encoding") for s in SIDES}


def cases():
    """case -> fairseq-train flags: one per mixer and per position encoding of the registries (see above)."""
    uses = {variant: components(variant) for variant in VARIANTS}
    found = {}
    for registry, part in ((MIXER_REGISTRY, 0), (POSITION_ENCODING_REGISTRY, 1)):
        for name in registry.names():
            count = {variant: list(used[part].values()).count(name) for variant, used in uses.items()}
            if max(count.values()) == 0:
                continue  # no arch uses it (e.g. the mixer none, an ablation): the every-arch suites cover it
            variant = next(v for v in VARIANTS if count[v] == max(count.values()))
            flags = found.setdefault(variant, ["--arch", f"{variant}_{SIZE}"])
            entry = registry.get(name, "--test")
            if part == 0 and entry.uses_positions and entry.available_at(DECODER_CROSS) and \
                    uses[variant][0][DECODER_CROSS] != name:
                flags += [DECODER_CROSS.flag("mixer"), name]
    found["one_learned_cross_head"] = ["--arch", f"sh_x_{SIZE}"]
    found["lightconv_gating_global_context"] = [
        "--arch", f"lightconvnet_{SIZE}", *[flag for sub in ("encoder-self", "decoder-self") for flag in (
            f"--{sub}-lightconv-glu", "off", f"--{sub}-gating", "on", f"--{sub}-lightconv-global-context", "on")]]
    return found


CASES = cases()
GENERATE_ALL = r"""
import json, logging, sys
import fairseq  # noqa: F401  (before the package, so that importing it registers the plugin)
from posmix_fairseq.harness import pipeline
for job in json.loads(sys.argv[1]):
    logging.getLogger().handlers.clear()  # fairseq-generate logs to its output file: each job to its own
    try:
        pipeline.run(job["command"], in_process=True)
        status = 0
    except pipeline.StepFailed as failed:
        status = failed.returncode
    open(job["status"], "w").write(str(status))
"""


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("toy"), sizes={"train": 400, "valid": 40, "test": 25})


@pytest.fixture(scope="module")
def generated(toy_data, tmp_path_factory):
    """case -> (checkpoint, what fairseq-generate wrote, its exit status): every case trained here, then generated
    in one fresh process."""
    root, jobs, out = tmp_path_factory.mktemp("cases"), [], {}
    task = ["--task", "posmix_translation"]  # fairseq's translation, with the sources the *_released archs read
    for case, flags in CASES.items():
        run_train(toy_data, str(root / case), flags + task)
        checkpoint, results = str(root / case / "checkpoint_last.pt"), root / case / "generated"
        command = pipeline.generate_command(toy_data, checkpoint, task + ["--beam", "4", "--max-tokens", "2000", "--cpu",
                                                                          "--print-alignment", "--results-path",
                                                                          str(results)])
        jobs.append({"command": command, "status": str(root / case / "status")})
        out[case] = (checkpoint, results / "generate-test.txt", root / case / "status")
    proc = subprocess.run([sys.executable, "-c", GENERATE_ALL, json.dumps(jobs)], capture_output=True, text=True,
                          env=pipeline.environment(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {case: (checkpoint, text.read_text() if text.exists() else "", int(status.read_text()))
            for case, (checkpoint, text, status) in out.items()}


def test_every_mixer_and_position_encoding_an_arch_uses_has_a_case():
    def parts(args):
        return {("mixer", p.read(args, "mixer")) for p in PLACEMENTS} | \
            {("encoding", s.read(args, "position-encoding")) for s in SIDES}
    covered = set().union(*(parts(parse_model_args(flags)) for flags in CASES.values()))
    used = set().union(*(parts(parse_model_args(["--arch", f"{variant}_{SIZE}"])) for variant in VARIANTS))
    assert used <= covered, used - covered


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_then_generate_in_fresh_process(generated, case):
    checkpoint, stdout, status = generated[case]
    assert status == 0 and os.path.exists(checkpoint), stdout[-2000:]
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


RPOSNET_CROSS = ["--arch", f"rposnet_{SIZE}", "--decoder-cross-mixer", "rposnet"]


def test_length_ratio_computed_from_data_stored_and_reused_at_generation(long_target_data, tmp_path):
    data = str(long_target_data / "bin")
    run_train(data, str(tmp_path), RPOSNET_CROSS, updates=3)
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
    run_train(data, str(tmp_path / "explicit"), RPOSNET_CROSS + ["--length-ratio", "0.75"], updates=1)
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
