"""Writes archs_without_readings_marker.pt: small models of the archs whose defaults readings version 11
set, as the code that stored no readings marker built them (commit bf005a5: `git archive bf005a5 | tar -x
-C OLD`, then `PYTHONPATH=OLD python make_archs_without_readings_marker.py OLD out.pt`). Per arch: the model arguments as a
checkpoint stores them, the weights, a batch and its log-probs. Read by
tests/test_paper_counts_relative_and_recurrent.py."""
import sys

import torch

sys.path.insert(0, sys.argv[1] + "/tests")
from helpers import build_model_from_args, parse_model_args, random_batch  # noqa: E402

SMALL = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
         "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32"]
out = {}
for name in ("shaw", "shaw_sin", "relattn", "rposnet", "rpehead", "mprhead", "lstmpe"):
    args = parse_model_args(["--arch", f"{name}_iwslt_de_en"] + SMALL)
    model, d = build_model_from_args(args)
    model.eval()
    src, src_len = random_batch(d, [5, 3], seed=1)
    prev, _ = random_batch(d, [4, 4], seed=2, left_pad=False)
    with torch.no_grad():
        lp = torch.log_softmax(model(src, src_len, prev)[0].double(), -1)
    out[name] = dict(args=vars(args), state=model.state_dict(), src=src, src_len=src_len, prev=prev, lp=lp)
torch.save(out, sys.argv[2])
