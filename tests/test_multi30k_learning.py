"""Slow: on the real Multi30k corpus, a small rPosNet learns: validation cross-entropy falls well below
the unigram baseline. (The Transformer of the same size, which shares every part but the mixers, is
left out to keep the suite short; every arch's forward and decoding are checked in the other suites.)

The corpus path comes from $POSMIX_MULTI30K (.ci/run sets it to ../shared/data/multi30k)."""
import os

import numpy as np
import pytest
import torch
from fairseq.data import data_utils

from posmix_fairseq.harness.raw_text import prepare_bpe
from helpers import binarize, run_train

MULTI30K = os.environ.get("POSMIX_MULTI30K", "")
pytestmark = pytest.mark.skipif(
    not os.path.isfile(os.path.join(MULTI30K, "train.en.gz")),
    reason=f"Multi30k not found: set POSMIX_MULTI30K to the folder with train.en.gz (got {MULTI30K!r})")

SMALL = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "256",
         "--decoder-ffn-embed-dim", "256", "--dropout", "0.1", "--criterion", "cross_entropy",
         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50", "--max-tokens", "3000",
         "--max-source-positions", "256", "--max-target-positions", "256",
         # validated and saved once, at the last update (what the test reads), not at every epoch's end
         "--validate-interval", "1000", "--save-interval", "1000"]
UPDATES = 250


def unigram_bits_per_token(data_bin, lang, vocab):
    """Cross-entropy (bits/token, EOS included) of valid targets under add-one unigram counts of train."""
    train = data_utils.load_indexed_dataset(os.path.join(data_bin, f"train.en-de.{lang}"), None)
    valid = data_utils.load_indexed_dataset(os.path.join(data_bin, f"valid.en-de.{lang}"), None)
    counts = np.bincount(np.concatenate([train[i].numpy() for i in range(len(train))]), minlength=vocab) + 1.0
    logp = np.log2(counts / counts.sum())
    tokens = np.concatenate([valid[i].numpy() for i in range(len(valid))])
    return float(-logp[tokens].mean())


@pytest.fixture(scope="module")
def multi30k_bin(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi30k")
    prepare_bpe(MULTI30K, "en", "de", str(root / "raw"), vocab_size=4000, max_train=8000)
    binarize(str(root / "raw"), str(root / "bin"), src="en", tgt="de")
    return str(root / "bin")


@pytest.mark.parametrize("arch", ["rposnet_iwslt_de_en"])
def test_small_model_learns_well_below_unigram_baseline(multi30k_bin, tmp_path, arch):
    vocab = sum(1 for _ in open(os.path.join(multi30k_bin, "dict.de.txt"))) + 4
    baseline = unigram_bits_per_token(multi30k_bin, "de", vocab)
    run_train(multi30k_bin, str(tmp_path), ["--arch", arch, "--encoder-layers", "2", "--decoder-layers", "2",
                                             *SMALL], updates=UPDATES)
    state = torch.load(str(tmp_path / "checkpoint_last.pt"), map_location="cpu", weights_only=False)
    val_loss = state["extra_state"]["val_loss"]  # bits/token (cross_entropy criterion, base 2)
    print(f"{arch}: valid loss {val_loss:.3f} bits/token vs unigram {baseline:.3f} after {UPDATES} updates")
    assert val_loss < baseline - 1.5, f"{arch}: valid loss {val_loss:.3f} not well below unigram {baseline:.3f}"
