"""How long one update of the claims study takes when N of its runs share a device: the figure behind ``--plan``'s
time estimate for the uncapped grid (``GPU_STEP_SECONDS`` in ``systems.py``).

    python -m posmix_fairseq.harness.evaluation.claims.step_probe --data-dir $MULTI30K --device cuda \\
        --counts 1,4,8,16 --updates 300 --json step.json

It prepares the study's data as ``posmix-claims`` does (same options: ``--size``, ``--max-tokens``, ...), then for
each count N launches N trainings at once, Transformer, rPosNet, Shaw and aPosNet in turn, each with a seed no
other run of the probe used (so none resumes another's checkpoints), capped at ``--updates``. Per run it keeps
fairseq's updates/s of each log interval, the training time fairseq reports ("done training in"), the wall time
of the whole process and the validation losses; per count, one run's mean seconds per update (from the
updates/s, which leave out start-up and validation) and the updates/s of all N together.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import List, Optional

from . import build_parser, check_options, data, prepare_study, resolve_device, runner, selected_systems
from .systems import SYSTEMS

MIX = ("transformer", "rposnet", "shaw", "aposnet")


def parse_counts(text: str) -> List[int]:
    try:
        counts = [int(c) for c in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit(f"step_probe: --counts {text!r}: give runs at once as a comma list of integers >= 1, "
                         "e.g. 1,4,8,16")
    return counts


def read_log(path: str) -> dict:
    text = open(path, encoding="utf-8", errors="replace").read()
    done = re.search(r"done training in ([\d.]+) seconds", text)
    updates = [int(u) for u in re.findall(r"num_updates[= ](\d+)", text)]
    return {"updates_per_s": [float(u) for u in re.findall(r"ups=([\d.]+)", text)],
            "train_seconds": float(done.group(1)) if done else None,
            "updates": max(updates) if updates else 0,
            "valid_losses": [float(x) for x in re.findall(r"valid on 'valid' subset \| loss ([\d.]+)", text)]}


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    parser.prog = "python -m posmix_fairseq.harness.evaluation.claims.step_probe"
    parser.add_argument("--counts", default="1,4,8,16", help="runs at once, one measurement each (default 1,4,8,16)")
    parser.add_argument("--updates", type=int, default=300, help="updates of each run (default 300)")
    parser.add_argument("--json", required=True, help="write the measurements here")
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parser.parse_args(argv)
    counts = parse_counts(opts.counts)
    if opts.updates < opts.validate_every:
        raise SystemExit(f"step_probe: --updates {opts.updates} is less than --validate-every {opts.validate_every}: "
                         "no log interval would be measured")
    opts.max_update = opts.updates
    opts.systems = ",".join(MIX)
    check_options(opts)
    resolve_device(opts)
    lay = data.Layout(opts.out)
    started = time.time()
    prepare_study(opts, lay, selected_systems(opts))
    result = {"device": "cpu" if opts.cpu else "cuda", "size": opts.size, "max_tokens": opts.max_tokens,
              "updates": opts.updates, "prepare_seconds": round(time.time() - started, 1), "counts": {}, "runs": []}
    seed = 1
    logs = os.path.join(lay.out, "step-probe")
    os.makedirs(logs, exist_ok=True)
    for count in counts:
        launched = []
        for i in range(count):
            key, run_seed = MIX[i % len(MIX)], seed + i // len(MIX)
            log = os.path.join(logs, f"x{count}-{key}-seed{run_seed}.log")
            with open(log, "w") as handle:
                proc = subprocess.Popen(runner.train_cmd(opts, lay, SYSTEMS[key], run_seed), stdout=handle,
                                        stderr=subprocess.STDOUT)
            launched.append((key, run_seed, log, time.time(), proc))
        seed += -(-count // len(MIX))
        runs = []
        for key, run_seed, log, start, proc in launched:
            code = proc.wait()
            run = {"count": count, "system": key, "seed": run_seed, "exit": code,
                   "wall_seconds": round(time.time() - start, 1), **read_log(log)}
            if code != 0 or run["updates"] != opts.updates or not run["updates_per_s"]:
                raise SystemExit(f"step_probe: {key} seed {run_seed} ({count} at once) failed: exit {code}, "
                                 f"{run['updates']} of {opts.updates} updates; see {log}")
            runs.append(run)
        step = statistics.mean(statistics.mean(1 / u for u in r["updates_per_s"]) for r in runs)
        result["counts"][str(count)] = {"seconds_per_update": round(step, 4),
                                        "updates_per_s_together": round(count / step, 1)}
        result["runs"] += runs
        runner.log(f"{count} at once: {step:.4f} s per update each, {count / step:.1f} updates/s together")
        with open(opts.json, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
