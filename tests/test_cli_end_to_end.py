"""The real CLI on tiny data: fairseq-preprocess, fairseq-train (a few updates), then fairseq-generate with beam
search and alignments in a FRESH process reloading each checkpoint (one process for every job of the module:
fairseq imported once). One module fixture trains the models of the tests the session runs, and only those (a
``-k`` or ``--mixer`` selection trains its own cases alone). Modelled on fairseq's tests/test_binaries.py
(in-process train, like upstream).

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
from typing import NamedTuple

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
import json, logging, sys, traceback
import fairseq  # noqa: F401  (before the package, so that importing it registers the plugin)
from posmix_fairseq.harness import pipeline
for job in json.loads(sys.argv[1]):
    logging.getLogger().handlers.clear()  # fairseq-generate logs to its output file: each job to its own
    error = ""
    try:
        pipeline.run(job["command"], in_process=True)
        status = 0
    except pipeline.StepFailed as failed:
        status, error = failed.returncode, str(failed)
    except Exception:  # a refusal fairseq raises (a sentence past the limits, a table that does not load)
        status, error = 1, traceback.format_exc()
    open(job["status"], "w").write(str(status))
    open(job["error"], "w").write(error)
"""
TASK = ["--task", "posmix_translation"]  # fairseq's translation, with the sources the *_released archs read
RPOSNET_CROSS = ["--arch", f"rposnet_{SIZE}", "--decoder-cross-mixer", "rposnet"]
LIMITS = ["--max-source-positions", "14", "--max-target-positions", "14"]
RAISED = ["--model-overrides", "{'max_source_positions': 1024, 'max_target_positions': 1024}"]


class Generated(NamedTuple):
    """What one fairseq-generate job left: its output (hypotheses, alignments, its log), exit status and error."""
    checkpoint: str
    output: str
    status: int
    error: str


def selected(request, test: str):
    """The parameters of each run of ``test`` (a function of this module) that this session holds: only their models
    are trained (``-k``, ``--mixer``)."""
    return [item.callspec.params if hasattr(item, "callspec") else {} for item in request.session.items
            if item.module is request.module and item.originalname == test]


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return binarized_toy_corpus(tmp_path_factory.mktemp("toy"), sizes={"train": 400, "valid": 40, "test": 25})


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


@pytest.fixture(scope="module")
def generated(request, toy_data, tmp_path_factory):
    """job -> Generated: the models of this session's tests trained here (in-process fairseq-train), then every
    fairseq-generate job in ONE fresh process that reloads each checkpoint (fairseq imported once)."""
    root, jobs, out = tmp_path_factory.mktemp("cli"), [], {}

    def generate(name, data, checkpoint, flags):
        results = root / name / "generated"
        (root / name).mkdir(parents=True, exist_ok=True)
        command = pipeline.generate_command(data, checkpoint, flags + ["--max-tokens", "2000", "--cpu",
                                                                       "--results-path", str(results)])
        jobs.append({"command": command, "status": str(root / name / "status"), "error": str(root / name / "error")})
        out[name] = (checkpoint, results / "generate-test.txt", root / name / "status", root / name / "error")

    for params in selected(request, "test_train_then_generate_in_fresh_process"):
        case = params["case"]
        run_train(toy_data, str(root / case), params["flags"] + TASK)
        generate(case, toy_data, str(root / case / "checkpoint_last.pt"), TASK + ["--beam", "4", "--print-alignment"])
    for params in selected(request, "test_fairseq_generate_beyond_the_trained_length"):
        arch = params["arch"]
        run_train(toy_data, str(root / arch), ["--arch", arch, *LIMITS, "--skip-invalid-size-inputs-valid-test"],
                  updates=2)
        for name, extra in ((f"{arch}-refused", []), (f"{arch}-raised", RAISED)):
            generate(name, toy_data, str(root / arch / "checkpoint_last.pt"), ["--beam", "2", *extra])
    if selected(request, "test_length_ratio_computed_from_data_stored_and_reused_at_generation"):
        data = str(request.getfixturevalue("long_target_data") / "bin")
        run_train(data, str(root / "ratio"), RPOSNET_CROSS, updates=3)
        run_train(data, str(root / "ratio_explicit"), RPOSNET_CROSS + ["--length-ratio", "0.75"], updates=1)
        gen_only = root / "ratio" / "gen_only"  # a data directory WITHOUT the training split
        gen_only.mkdir()
        for name in os.listdir(data):
            if name.startswith(("dict.", "test.")):
                shutil.copy(os.path.join(data, name), gen_only / name)
        generate("ratio-generated", str(gen_only), str(root / "ratio" / "checkpoint_last.pt"), ["--beam", "4"])
        out["ratio-explicit"] = (str(root / "ratio_explicit" / "checkpoint_last.pt"), None, None, None)
    if jobs:
        proc = subprocess.run([sys.executable, "-c", GENERATE_ALL, json.dumps(jobs)], capture_output=True, text=True,
                              env=pipeline.environment(), timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return {name: Generated(checkpoint, text.read_text() if text and text.exists() else "",
                            int(status.read_text()) if status else 0, error.read_text() if error else "")
            for name, (checkpoint, text, status, error) in out.items()}


def run_generate(data, checkpoint, *extra):
    """fairseq-generate in a fresh process, exit status 0 checked: (stdout, stderr). (The evaluation and figure
    tests generate with it.)"""
    proc = run_generate_raw(data, checkpoint, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def stored_model(checkpoint):
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["cfg"]["model"]


def test_every_mixer_and_position_encoding_an_arch_uses_has_a_case():
    def parts(args):
        return {("mixer", p.read(args, "mixer")) for p in PLACEMENTS} | \
            {("encoding", s.read(args, "position-encoding")) for s in SIDES}
    covered = set().union(*(parts(parse_model_args(flags)) for flags in CASES.values()))
    used = set().union(*(parts(parse_model_args(["--arch", f"{variant}_{SIZE}"])) for variant in VARIANTS))
    assert used <= covered, used - covered


@pytest.mark.parametrize("case,flags", sorted(CASES.items()), ids=sorted(CASES))
def test_train_then_generate_in_fresh_process(generated, case, flags):
    run = generated[case]
    assert run.status == 0 and os.path.exists(run.checkpoint), run.error[-3000:] + run.output[-2000:]
    hyps = [line for line in run.output.splitlines() if line.startswith("H-")]
    aligns = [line for line in run.output.splitlines() if line.startswith("A-")]
    assert len(hyps) == 25 and len(aligns) == 25, run.output[-2000:]
    assert "BLEU4" in run.output
    # reload in this process too and check the stored architecture
    assert stored_model(run.checkpoint).arch == flags[1]


def test_length_ratio_computed_from_data_stored_and_reused_at_generation(generated):
    run = generated["ratio-generated"]
    assert stored_model(run.checkpoint).length_ratio == pytest.approx(0.5, abs=1e-12)
    # generated from a directory WITHOUT the training split: gamma must come from the checkpoint
    assert run.status == 0, run.error[-3000:]
    assert sum(line.startswith("H-") for line in run.output.splitlines()) == 10
    assert "length ratio gamma" not in run.output  # not recomputed (fairseq-generate logs to its output file)
    # an explicit --length-ratio wins over the data
    assert stored_model(generated["ratio-explicit"].checkpoint).length_ratio == 0.75


@pytest.mark.parametrize("arch,extrapolates", [("shaw_sin_iwslt_de_en", True), ("lstmpe_iwslt_de_en", True),
                                               ("learnedpe_iwslt_de_en", False)])
def test_fairseq_generate_beyond_the_trained_length(generated, arch, extrapolates):
    """Trained with 14 positions; the test split has longer sentences. Raising fairseq's limits at
    generation lets the extrapolating methods translate them; a learned table names its limit."""
    refused, raised = generated[f"{arch}-refused"], generated[f"{arch}-raised"]
    assert refused.status != 0 and "is invalid" in refused.error, refused.error[-2000:]  # fairseq's length filter
    if extrapolates:
        assert raised.status == 0, raised.error[-2000:]
        assert sum(line.startswith("H-") for line in raised.output.splitlines()) == 25
    else:  # a learned table cannot grow: the checkpoint's 14-row table does not load into 1024 rows
        assert raised.status != 0
        assert "size mismatch for encoder.embed_positions.weight" in raised.error, raised.error[-2000:]
