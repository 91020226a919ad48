"""The fingerprint of the model code a run trains with: its system's arch and flags built at a tiny size with a
fixed seed (``harness/testing.py``, as ``scripts/compare_outputs.py`` builds every arch), the teacher-forced
forward and the incremental decode of one fixed batch on one thread, in float64, and of their outputs the
log-probability of each reference token (2 sentences x 9 steps, both ways: 36 values), hashed.

The hash names the code; two runs compare as one model code when their stored values agree within
:data:`TOLERANCE` (the hash alone where a record has no values): a value that sits on a rounding boundary of the
hash may round either way on another CPU (docs/choices.md, The fingerprint of the model code).

    python -m posmix_fairseq.harness.evaluation.claims.fingerprint --system rposnet [--json FILE]
"""
import argparse
import hashlib
import json
import shlex
import sys
from typing import Dict, List

from .systems import SYSTEMS

#: the hash's rounding of each log-probability: 1e-3, 5,000 times the largest difference between AVX2 and AVX-512
#: (1.8e-7, measured: docs/choices.md)
DECIMALS = 3
#: the embedding dim of the tests' tiny models, at which the fingerprint builds a system (harness/testing.py: TINY)
TINY_DIM = 32
#: stored values (rounded to 1e-8) that differ by at most this are the same model code: 55 times that difference
TOLERANCE = 1e-5


def system_flags(key: str) -> List[str]:
    """The model flags of a study system: its arch and its own flags (the sizes are the fingerprint's)."""
    system = SYSTEMS[key]
    return ["--arch", system.arch, *system.own_flags(TINY_DIM)]


def fingerprint(flags: List[str]) -> Dict[str, object]:
    """{"fingerprint": 16 hex digits, "fingerprint_outputs": the 36 values, rounded to 1e-8} of the model that
    ``flags`` build at the tests' tiny size (seed 0)."""
    # torch and fairseq: only a run's fingerprint needs them (the page, --plan and --help do not)
    import torch
    from ...testing import build_model, fixed_batch_log_probs

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order on a given CPU
    try:
        model, d = build_model(flags, tiny=True, seed=0)
        outputs = fixed_batch_log_probs(model.double(), d)
    finally:
        torch.set_num_threads(threads)
    target = outputs["target"].unsqueeze(-1)
    values = torch.stack([outputs[k].gather(-1, target).squeeze(-1) for k in ("full", "incremental")])
    if not bool(torch.isfinite(values).all()):
        raise ValueError(f"{shlex.join(flags)}: the fingerprint's log-probabilities are not finite")
    rounded = torch.round(values * 10 ** DECIMALS).to(torch.int64)
    digest = hashlib.sha256(repr(tuple(rounded.shape)).encode() + rounded.numpy().tobytes()).hexdigest()[:16]
    return {"fingerprint": digest, "fingerprint_outputs": [round(v, 8) for v in values.flatten().tolist()]}


def difference(a: dict, b: dict) -> float:
    """The largest difference between two runs' stored fingerprint values (inf when either has none)."""
    x, y = a.get("fingerprint_outputs"), b.get("fingerprint_outputs")
    if not x or not y or len(x) != len(y):
        return float("inf")
    return max(abs(p - q) for p, q in zip(x, y))


def same_code(a: dict, b: dict) -> bool:
    """Whether two runs' records (result.json) hold one model code's fingerprint: their values within
    :data:`TOLERANCE`, or, where either has none, equal hashes."""
    if a.get("fingerprint_outputs") and b.get("fingerprint_outputs"):
        return difference(a, b) <= TOLERANCE
    return a.get("fingerprint") == b.get("fingerprint")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", required=True, choices=sorted(SYSTEMS), help="a study system")
    parser.add_argument("--json", metavar="FILE", help="write the fingerprint here (default: print it)")
    args = parser.parse_args(argv)
    text = json.dumps(fingerprint(system_flags(args.system)))
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
