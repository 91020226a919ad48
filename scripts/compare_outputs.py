"""Outputs of every configuration at one commit against another's: the check of a reshaping that
must not change any model.

``save OUTDIR`` builds every registered arch, every configuration of the every-arch suite and the
stored arguments of older checkpoints (``posmix_fairseq.harness.testing``: ALL_CONFIGS,
STORED_CONFIGS) at tiny sizes with a fixed seed, runs the full teacher-forced forward (eval mode) and
an incremental decode of one fixed batch, and writes ``OUTDIR/outputs.pt`` (name -> {"full",
"incremental"} log-probs). ``compare A B`` prints the max abs difference per configuration and
exits 1 when any differs by more than ``--tolerance`` (default 0: bit-identical) or a configuration of A is
missing from B. A reshaping of the arithmetic (another summation order, one product in place of two) may
change the last bits: ``--tolerance 1e-6`` is then the check.

Run ``save`` from a checkout of each commit (``git worktree add /tmp/base COMMIT``, then
``PYTHONPATH=/tmp/base python scripts/compare_outputs.py save /tmp/out-base``); ``--only NAME``
(repeatable) restricts ``save`` to some configurations.
"""
import argparse
import os
import sys

import torch

OUTPUTS = "outputs.pt"


def config_outputs(name):
    """{"full": (B, T, V) log-probs of the teacher-forced forward, "incremental": the same, step by step}."""
    from posmix_fairseq.harness.testing import build_config, fixed_batch_log_probs

    model, d = build_config(name, seed=0)
    outputs = fixed_batch_log_probs(model, d)
    return {"full": outputs["full"], "incremental": outputs["incremental"]}


def save(outdir, only=None):
    from posmix_fairseq.harness.testing import ALL_CONFIGS, STORED_CONFIGS

    names = sorted(ALL_CONFIGS) + sorted(STORED_CONFIGS)
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise SystemExit(f"--only: unknown configuration(s) {', '.join(unknown)}; valid: {', '.join(names)}")
        names = list(only)
    torch.set_num_threads(1)  # one summation order everywhere
    outputs = {name: config_outputs(name) for name in names}
    os.makedirs(outdir, exist_ok=True)
    torch.save(outputs, os.path.join(outdir, OUTPUTS))
    print(f"{len(outputs)} configurations -> {os.path.join(outdir, OUTPUTS)}")


def compare(a_dir, b_dir, tolerance=0.0) -> int:
    a = torch.load(os.path.join(a_dir, OUTPUTS), weights_only=False)
    b = torch.load(os.path.join(b_dir, OUTPUTS), weights_only=False)
    worst, failed = 0.0, []
    for name in sorted(a):
        if name not in b:
            print(f"{name}: missing from {b_dir}")
            failed.append(name)
            continue
        diffs = []
        for key in a[name]:
            x, y = a[name][key], b[name].get(key)
            diffs.append(float("inf") if y is None or x.shape != y.shape else (x - y).abs().max().item())
        diff = max(diffs)
        worst = max(worst, diff)
        print(f"{name}: max abs diff {diff:.3g}")
        if not diff <= tolerance:
            failed.append(name)
    extra = sorted(set(b) - set(a))
    print(f"{len(a)} configurations compared, max abs diff {worst:.3g}" +
          (f"; only in {b_dir}: {', '.join(extra)}" if extra else ""))
    if failed:
        print(f"differ{f' by more than {tolerance:g}' if tolerance else ''}: {', '.join(failed)}")
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("save", help="save every configuration's outputs under OUTDIR")
    s.add_argument("outdir")
    s.add_argument("--only", action="append", metavar="NAME", help="only this configuration (repeatable)")
    c = commands.add_parser("compare", help="max abs diff per configuration; exit 1 if any differs")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                   help="the largest max abs diff that passes (default 0: bit-identical outputs)")
    args = parser.parse_args(argv)
    if args.command == "compare" and not args.tolerance >= 0.0:
        parser.error(f"--tolerance must be a number >= 0, got {args.tolerance}")
    if args.command == "save":
        save(args.outdir, args.only)
        return 0
    return compare(args.a, args.b, args.tolerance)


if __name__ == "__main__":
    sys.exit(main())
