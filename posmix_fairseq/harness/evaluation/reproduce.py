"""``posmix-reproduce --table NAME``: train a paper table's grid of systems, evaluate them, and print
the table beside the numbers the paper reports.

    posmix-reproduce --list                       # the tables
    posmix-reproduce --table gpa-6                # tiny scale: Multi30k en->de, CPU, 300 updates per system
    posmix-reproduce --table gpa-6 --scale paper  # print the full recipe commands (paper data and settings)
    posmix-reproduce --table gpa-6 --scale paper --plan   # every system's plan (PLAN=1): commands, batch,
                                                          # schedule, disk, test lengths, unstated settings
    posmix-reproduce --table gpa-6 --scale paper --run

Every system is one run of the table's recipe (examples/<task>/run.sh, shared stages in
examples/common/stages.sh): at paper scale with the paper's data, size and hyper-parameters; at tiny
scale with SIZE=mini (3+3 layers, D=128; --size tiny: 1+1 layers, D=32) on a local raw corpus (default: the shared Multi30k, en->de), the first --max-train
pairs, and --max-update updates. Tiny numbers show that the grid runs end to end, not the paper's
ranking. Progress lines give the system, the updates done and an estimate of the time left.
"""
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from typing import Dict, List, Optional

from .paper_tables import TABLES, System, Table
from ...command import build_parser as command_parser, console

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.environ.get("POSMIX_MULTI30K", os.path.join(ROOT, "..", "shared", "data", "multi30k"))
OUR_METRICS = ["BLEU", "chrF2++", "chrF2", "TER", "COMET", "BLEURT"]
TINY_LINGEVAL97 = os.path.join(ROOT, "tests", "data", "lingeval97_tiny.json")


def slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower()


def system_env(table: Table, system: System, scale: str, opts) -> Dict[str, str]:
    env = dict(table.env) if scale == "paper" else {"PAPER": table.env.get("PAPER", "gpa"), "SIZE": opts.size}
    env["NAME"] = slug(system.label)
    if scale == "paper" and system.arch:
        env["ARCH"] = system.arch
    else:
        env["VARIANT"] = system.variant
    flags = system.flags if scale == "paper" or system.tiny_flags is None else system.tiny_flags
    if scale == "paper" and system.paper_flags:
        flags = f"{system.paper_flags} {flags}".strip()
    if flags:
        env["TRAIN_FLAGS"] = flags
    if "SPEED_SETTING" in table.env:
        env["SPEED_SETTING"] = table.env["SPEED_SETTING"]
    env["OUT"] = os.path.join(opts.out, table.name)
    if scale == "tiny":
        env.update({"RAW": opts.data_dir, "SRC": opts.src, "TGT": opts.tgt, "TOKENIZE": "13a",
                    "MAX_TRAIN": str(opts.max_train), "MAX_EVAL": str(opts.max_eval), "VOCAB": str(opts.vocab),
                    "MAX_UPDATE": str(opts.max_update), "SAVE_INTERVAL_UPDATES": str(max(1, opts.max_update // 8)),
                    "DEVICE_FLAGS": "--cpu", "LOG_INTERVAL": str(max(1, opts.max_update // 10)),
                    "LENGTH_BINS": "10,20,30", "CONCAT_BINS": "20,40,60", "SPEED_FLAGS": "--runs 2 --max-sentences 50"})
        if os.path.isfile(TINY_LINGEVAL97):  # a 5-variant example in lingeval97.json's format (a checkout's tests)
            env["LINGEVAL97"] = TINY_LINGEVAL97
    return env


def commands(table: Table, scale: str, opts) -> List[Dict[str, str]]:
    systems = table.systems
    if scale == "tiny":
        systems = [s for s in systems if s.tiny_flags is not None] if table.name == "hc-fig7" else systems
    if opts.systems:
        try:
            systems = [systems[int(i)] for i in opts.systems.split(",")]
        except (ValueError, IndexError):
            raise SystemExit(f"--systems {opts.systems!r}: comma-separated indices in 0..{len(systems) - 1}")
    out = []
    for i, s in enumerate(systems):
        env = system_env(table, s, scale, opts)
        env["STAGES"] = ("download prepare preprocess " if i == 0 else "") + table.stages
        out.append({"label": s.label, "env": env, "recipe": os.path.join("examples", table.recipe, "run.sh")})
    return out


def shell_line(cmd) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in cmd["env"].items())
    return f"{env} bash {cmd['recipe']}"


def fmt_secs(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{(s % 3600) // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_grid(table: Table, cmds, opts) -> None:
    os.makedirs(os.path.join(opts.out, table.name, "logs"), exist_ok=True)
    start = time.time()
    done_times: List[float] = []
    for i, cmd in enumerate(cmds):
        env = dict(os.environ, PY=sys.executable, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
                   **cmd["env"])
        logfile = os.path.join(opts.out, table.name, "logs", cmd["env"]["NAME"] + ".log")
        t0 = time.time()
        max_update = int(cmd["env"].get("MAX_UPDATE", "0") or 0)
        print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: system {i + 1}/{len(cmds)} '{cmd['label']}' started",
              flush=True)
        with open(logfile, "w") as log:
            proc = subprocess.Popen(["bash", os.path.join(ROOT, cmd["recipe"])], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, cwd=ROOT)
            for line in proc.stdout:
                log.write(line)
                m = re.search(r"num_updates=(\d+)", line)
                if line.startswith("[recipe"):
                    print("  " + line.rstrip(), flush=True)
                elif m and "train_inner" in line or (m and "| INFO | train |" in line):
                    n = int(m.group(1))
                    elapsed = time.time() - t0
                    frac = n / max_update if max_update else 0
                    # the finished systems' mean time, else this one's training rate (+60% for evaluation)
                    per_system = (sum(done_times) / len(done_times)) if done_times else (elapsed / max(frac, 1e-3) * 1.6)
                    left = per_system * (1 - frac) + per_system * (len(cmds) - i - 1)
                    print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: system {i + 1}/{len(cmds)} "
                          f"'{cmd['label']}': update {n}/{max_update or '?'}, about {fmt_secs(left)} left", flush=True)
            rc = proc.wait()
        if rc != 0:
            tail = open(logfile).read()[-3000:]
            raise SystemExit(f"posmix-reproduce: system '{cmd['label']}' failed (exit {rc}); log {logfile}:\n{tail}")
        done_times.append(time.time() - t0)
        left = sum(done_times) / len(done_times) * (len(cmds) - i - 1)
        print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: system {i + 1}/{len(cmds)} '{cmd['label']}' done "
              f"in {fmt_secs(done_times[-1])}; about {fmt_secs(left)} left", flush=True)
    print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: grid done in {fmt_secs(time.time() - start)}", flush=True)


def training_log_stats(path: str) -> Dict[str, float]:
    """From fairseq-train's log: the peak GPU memory (the device's total memory, which fairseq logs at the
    start, minus the smallest gb_free of the train_inner lines) and the mean training words per second
    (wps; the first line, which holds the start-up, left out)."""
    total, free, wps = None, [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"total memory = ([\d.]+) GB", line)
            if m:
                total = float(m.group(1))
            if "train_inner" in line:
                free += [float(x) for x in re.findall(r"gb_free=([\d.]+)", line)]
                wps += [float(x) for x in re.findall(r"\bwps=([\d.]+)", line)]
    out = {}
    if total is not None and free:
        out["train peak GB"] = total - min(free)
    if wps:
        out["train wps"] = sum(wps[1:] or wps) / len(wps[1:] or wps)
    return out


def collect(table: Table, cmds) -> Dict[str, Dict[str, float]]:
    results = {}
    for cmd in cmds:
        env, ours = cmd["env"], {}
        name = env["NAME"]
        path = os.path.join(env["OUT"], f"scores.{name}.json")
        if os.path.isfile(path):
            rows = json.load(open(path))["rows"]
            ours.update({r["metric"]: r["score"] for r in rows})
        speed = os.path.join(env["OUT"], f"speed.{name}.json")
        if "speed" in table.measures and os.path.isfile(speed):
            r = json.load(open(speed))
            ours.update({"tokens/s": r["mean_tokens_per_s"], "tokens/s std": r["std_tokens_per_s"],
                         "sent/sec": r["mean_sentences_per_s"], "decode peak GB": r["peak_memory_gb"]})
        log = os.path.join(env["OUT"], "logs", name + ".log")  # run_grid's log of the system
        if {"train_memory", "train_speed"} & set(table.measures) and os.path.isfile(log):
            ours.update(training_log_stats(log))
        contrastive = os.path.join(env["OUT"], f"contrastive.{name}.json")
        if "contrastive" in table.measures and os.path.isfile(contrastive):
            by_cat = json.load(open(contrastive))["by_category"]
            ours.update({k.replace("_", "-"): 100.0 * v["correct"] / v["total"] for k, v in by_cat.items() if v["total"]})
        if ours:
            results[cmd["label"]] = ours
    return results


def render(table: Table, labels: List[str], ours: Dict[str, Dict[str, float]], scale: str) -> str:
    our_cols = [m for m in OUR_METRICS if any(m in ours.get(lbl, {}) for lbl in labels)]
    for lbl in labels:  # the measured columns (speed, memory, accuracies), in the order they come
        our_cols += [c for c in ours.get(lbl, {}) if c not in our_cols and c not in OUR_METRICS]
    paper_cols = []
    for lbl in labels:
        for c in table.reported.get(lbl, {}):
            if c not in paper_cols:
                paper_cols.append(c)
    head = ["system"] + [f"ours ({scale}) {c}" for c in our_cols] + [f"paper {c}" for c in paper_cols]
    lines = [f"### {table.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lbl in labels:
        cells = [lbl] + [f"{ours[lbl][c]:.2f}" if c in ours.get(lbl, {}) else "-" for c in our_cols]
        cells += [f"{table.reported[lbl][c]:g}" if c in table.reported.get(lbl, {}) else "-" for c in paper_cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Paper: {table.paper}." + (f" {table.note}" if table.note else "")]
    if not table.reported:
        lines.append("The paper's numbers for this table are not in the available text.")
    return "\n".join(lines) + "\n"


def extra_tables(table: Table, cmds) -> str:
    parts = []
    for kind in ("length-bins", "concat-bins"):
        for cmd in cmds:
            path = os.path.join(cmd["env"]["OUT"], f"{kind}.{cmd['env']['NAME']}.md")
            if os.path.isfile(path):
                parts.append(f"{kind} of '{cmd['label']}':\n\n" + open(path).read().split("\n- ")[0].strip())
    return "\n\n".join(parts)


def print_plans(table: Table, cmds) -> List[str]:
    """Each system's recipe plan, in-process (the meta-device models and the test-length estimate are
    shared across systems)."""
    from ..recipes.settings import resolve
    from ..recipes.stages import run_recipe

    print(f"# {table.title}\n# paper: {table.paper}\n# {len(cmds)} systems; the plan of each:")
    plans = []
    for cmd in cmds:
        print(f"\n# --- {cmd['label']}: {shell_line(cmd)}")
        env = dict(os.environ, **cmd["env"])
        try:
            recipe = resolve(table.recipe, env)
        except ValueError as e:
            raise SystemExit(f"posmix-reproduce: {cmd['label']}: {e}")
        stream = io.StringIO()
        run_recipe(recipe, plan=True, stream=stream)
        print(stream.getvalue())
        plans.append(stream.getvalue())
    return plans


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-reproduce", __doc__)
    p.add_argument("--table", help=f"one of {', '.join(TABLES)}")
    p.add_argument("--list", action="store_true", help="list the tables")
    p.add_argument("--scale", choices=["tiny", "paper"], default="tiny",
                   help="tiny: small models on a local corpus; paper: print (or --run) the paper's commands")
    p.add_argument("--run", action="store_true", help="with --scale paper: run the commands instead of printing them")
    p.add_argument("--plan", action="store_true", help="print every system's recipe plan (PLAN=1): its commands, "
                                                       "batch, schedule, disk, test lengths, unstated settings")
    p.add_argument("--systems", help="comma-separated indices of the grid's systems to run (default: all)")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "reproduce"),
                   help="output directory of the runs and the tables")
    p.add_argument("--data-dir", default=DEFAULT_DATA, help="tiny scale: raw corpus (default: the shared Multi30k)")
    p.add_argument("--src", default="en", help="source language of the raw corpus")
    p.add_argument("--tgt", default="de", help="target language of the raw corpus")
    p.add_argument("--size", choices=["mini", "tiny"], default="mini",
                   help="tiny scale: recipe SIZE (mini: 3+3 layers, D=128; tiny: 1+1 layers, D=32, for tests)")
    p.add_argument("--max-update", type=int, default=300, help="tiny scale: updates per system")
    p.add_argument("--max-train", type=int, default=30000, help="tiny scale: training pairs (Multi30k has 29k)")
    p.add_argument("--max-eval", type=int, default=1000, help="tiny scale: valid/test pairs")
    p.add_argument("--vocab", type=int, default=8000, help="tiny scale: BPE vocabulary")
    p.add_argument("--render-only", action="store_true", help="print the table from the scores already in --out")
    a = p.parse_args(argv)
    if a.list or not a.table:
        for t in TABLES.values():
            print(f"{t.name:9s} {t.title} ({len(t.systems)} systems; examples/{t.recipe}/run.sh)")
        if not a.table:
            return None
    if a.table not in TABLES:
        raise SystemExit(f"--table {a.table!r}: valid tables are {', '.join(TABLES)}")
    if a.max_update < 1 or a.max_train < 1 or a.max_eval < 1:
        raise SystemExit("--max-update, --max-train and --max-eval must be >= 1")
    table = TABLES[a.table]
    cmds = commands(table, a.scale, a)
    if a.plan:
        return print_plans(table, cmds)
    if a.scale == "paper" and not a.run and not a.render_only:
        print(f"# {table.title}\n# paper: {table.paper}\n# {len(cmds)} systems, one after the other:")
        for c in cmds:
            print(shell_line(c))
        print(f"# then: posmix-reproduce --table {table.name} --scale paper --render-only --out {a.out}")
        return cmds
    if a.scale == "tiny" and not os.path.isdir(a.data_dir):
        raise SystemExit(f"--data-dir {a.data_dir}: not found (the shared Multi30k, or any raw parallel corpus)")
    if not a.render_only:
        run_grid(table, cmds, a)
    ours = collect(table, cmds)
    print(render(table, [c["label"] for c in cmds], ours, a.scale))
    extra = extra_tables(table, cmds)
    if extra:
        print(extra)
    return ours


cli = console(main, "posmix-reproduce")


if __name__ == "__main__":
    raise SystemExit(cli())
