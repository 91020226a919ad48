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
import os

import torch

from posmix_fairseq.harness import checkpoint_files
from posmix_fairseq.harness.command import CommandError, UsageError, build_parser, check_output_dir, run

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
            raise UsageError(f"--only: unknown configuration(s) {', '.join(unknown)}; valid: {', '.join(names)}")
        names = list(only)
    check_output_dir(outdir, "OUTDIR")  # before the minutes of building every configuration
    torch.set_num_threads(1)  # one summation order everywhere
    outputs = {name: config_outputs(name) for name in names}
    os.makedirs(outdir, exist_ok=True)
    checkpoint_files.save_atomic(outputs, os.path.join(outdir, OUTPUTS), option="OUTDIR")
    print(f"{len(outputs)} configurations -> {os.path.join(outdir, OUTPUTS)}")


def compare(a_dir, b_dir, tolerance=0.0) -> int:
    for label, folder in (("A", a_dir), ("B", b_dir)):
        if not os.path.isdir(folder):
            raise CommandError(f"{label} {folder}: " + ("is a file; give a folder save wrote" if os.path.exists(folder)
                                                        else "no such directory"))
    a = checkpoint_files.load(os.path.join(a_dir, OUTPUTS), "A ")  # a dict of tensors: read weights-only
    b = checkpoint_files.load(os.path.join(b_dir, OUTPUTS), "B ")
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
    parser = build_parser("compare_outputs.py", __doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("save", help="save every configuration's outputs under OUTDIR")
    s.add_argument("outdir", metavar="OUTDIR", help="the folder to write outputs.pt in (created)")
    s.add_argument("--only", action="append", metavar="NAME", help="only this configuration (repeatable)")
    c = commands.add_parser("compare", help="max abs diff per configuration; exit 1 if any differs")
    c.add_argument("a", metavar="DIR", help="a folder save wrote (the reference)")
    c.add_argument("b", metavar="DIR", help="another folder save wrote")
    c.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                   help="the largest max abs diff that passes (default 0: bit-identical outputs)")
    args = parser.parse_args(argv)
    if args.command == "compare" and not args.tolerance >= 0.0:
        parser.error(f"--tolerance must be a number >= 0, got {args.tolerance}")
    if args.command == "save":
        save(args.outdir, args.only)
        return 0
    return compare(args.a, args.b, args.tolerance)


def exit_with_status(argv=None):
    """``main`` for the error handler: its result is the exit status (1: the outputs differ)."""
    raise SystemExit(main(argv))


if __name__ == "__main__":
    raise SystemExit(run(exit_with_status, "compare_outputs.py"))
