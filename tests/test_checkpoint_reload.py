"""Every registered arch reloads from a checkpoint in a fresh process: this process builds each (tiny sizes, as
fairseq-train parses them), saves it as fairseq-train does and records its log-probs; ONE child process (fairseq
imported once) loads every checkpoint as fairseq-generate does (fairseq's loader: the arch function, the
upgrades, the state dict) and computes the same log-probs, then decodes with fairseq's beam search."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from helpers import build_model_from_args, make_dictionary, parse_model_args, random_batch
from posmix_fairseq.harness.testing import checkpoint_config, registered_archs, save_checkpoint, write_dictionaries

TOL = 1e-6  # the same computation in another process (one thread in both)

CHILD = r"""
import json, sys
import torch
import torch.nn.functional as F
from fairseq.sequence_generator import SequenceGenerator
import posmix_fairseq  # noqa: F401
from posmix_fairseq.harness.testing import load_checkpoint, random_batch

torch.set_num_threads(1)
data, names = sys.argv[1], json.loads(sys.argv[2])
results = {}
for name in names:
    model, args = load_checkpoint(f"{data}/{name}.pt", data)
    d = model.encoder.dictionary
    batch = torch.load(f"{data}/batch.pt")
    with torch.no_grad():
        logits, _ = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
        generator = SequenceGenerator([model], d, beam_size=2, max_len_b=8)
        hyps = generator.forward({"net_input": {"src_tokens": batch["src_tokens"], "src_lengths": batch["src_lengths"]}})
    results[name] = {"log_probs": F.log_softmax(logits.double(), dim=-1), "arch": args.arch,
                     "scores": [float(h[0]["score"]) for h in hyps], "lengths": [len(h[0]["tokens"]) for h in hyps]}
torch.save(results, f"{data}/reloaded.pt")
"""


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory):
    """(expected log-probs by arch, what the child computed by arch)."""
    data = tmp_path_factory.mktemp("reload")
    d = make_dictionary()
    write_dictionaries(str(data), d)
    src, src_len = random_batch(d, [7, 4], seed=1)
    prev, _ = random_batch(d, [5, 5], seed=2, left_pad=False)
    torch.save({"src_tokens": src, "src_lengths": src_len, "prev_output_tokens": prev}, data / "batch.pt")
    expected, cfg = {}, None
    for name in registered_archs():
        args = parse_model_args(["--arch", name])
        cfg = cfg or checkpoint_config(args)  # the groups besides the model's are the same for every arch
        model, _ = build_model_from_args(args, dictionary=d)
        model.eval()
        with torch.no_grad():
            expected[name] = F.log_softmax(model(src, src_len, prev)[0].double(), dim=-1)
        save_checkpoint(model, args, str(data / f"{name}.pt"), cfg)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(data), json.dumps(sorted(expected))], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return expected, torch.load(data / "reloaded.pt", weights_only=False)


@pytest.mark.parametrize("name", registered_archs())
def test_every_registered_arch_reloads_in_a_fresh_process_and_computes_as_saved(reloaded, name):
    expected, child = reloaded
    assert child[name]["arch"] == name
    torch.testing.assert_close(child[name]["log_probs"], expected[name], atol=TOL, rtol=0)
    assert all(torch.isfinite(torch.tensor(child[name]["scores"]))) and min(child[name]["lengths"]) >= 1
