"""Helpers of the tests: the model builders of :mod:`posmix_fairseq.harness.testing` (shared with the
benchmarks, re-exported here) and the CLI steps (preprocess, train, generate) on a toy corpus."""
import os
import subprocess


import posmix_fairseq  # noqa: E402,F401
from posmix_fairseq.harness import pipeline  # noqa: E402
from posmix_fairseq.harness.testing import (TINY, TINY_POSNET_DIM, TINY_SIZES, build_model, build_model_from_args,  # noqa: E402,F401
                                    make_dictionary, meta_model, mix, mixer_spec, num_parameters, parse_model_args,
                                    random_batch, standalone_mixer, standalone_resources)


# ---- the CLI on tiny data: the pipeline's stages (posmix_fairseq.harness.pipeline) -----------------

def binarized_toy_corpus(root, sizes):
    """The toy corpus (posmix_fairseq.harness.toy_corpus) under root/raw, binarized into root/bin; returns root/bin."""
    from posmix_fairseq.harness.toy_corpus import write_corpus
    write_corpus(os.path.join(str(root), "raw"), sizes=sizes)
    binarize(os.path.join(str(root), "raw"), os.path.join(str(root), "bin"))
    return os.path.join(str(root), "bin")


def binarize(raw_prefix_dir, dest, src="src", tgt="tgt"):
    """fairseq-preprocess (in this process) of raw_prefix_dir/{train,valid,test}.{src,tgt}."""
    pipeline.preprocess(src, tgt, dest, *(f"{raw_prefix_dir}/{split}" for split in ("train", "valid", "test")),
                        in_process=True)


def run_train(data, save_dir, flags, updates=6):
    """fairseq-train (in this process) of a tiny model for a few updates."""
    pipeline.train(data, save_dir, [
        "--task", "translation", "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "1500",
        "--max-update", str(updates), "--no-progress-bar", "--num-workers", "0", "--seed", "1", "--cpu",
        *TINY_SIZES, *flags], in_process=True)


def run_generate(data, checkpoint, *extra, beam=4):
    """fairseq-generate in a fresh Python process, which reloads the checkpoint."""
    cmd = pipeline.generate_command(data, checkpoint, ["--beam", str(beam), "--max-tokens", "2000", "--cpu", *extra])
    return subprocess.run(cmd, capture_output=True, text=True, env=pipeline.environment(), timeout=300)


# The papers' texts on the development machine: ../shared/papers beside a checkout, or beside the
# directory of a worktree; tests that read them skip where they are absent.
PAPER_FILES = {"GPA": "000_56daf9cf6f59e3ab.txt", "HC": "001_564739f35493473d.txt", "PEA": "002_a771f701453efe8f.txt",
               "RecPE": "003_b81e1389b968ba82.txt", "PosNet": "004_4d10d0edac194ef1.txt"}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPERS_DIR = next((p for p in (os.path.join(_ROOT, "..", "shared", "papers"), os.path.join(_ROOT, "..", "..", "shared", "papers"))
                   if os.path.isdir(p)), os.path.join(_ROOT, "..", "shared", "papers"))


def paper_text(citation):
    """The text of the paper a citation such as ``paper_tables.GPA`` ("GPA: Schmidt and ...") names."""
    import pytest
    path = os.path.join(PAPERS_DIR, PAPER_FILES[citation.split(":")[0]])
    if not os.path.isfile(path):
        pytest.skip(f"the paper texts are not here ({PAPERS_DIR})")
    with open(path, encoding="utf-8") as f:
        return f.read()
