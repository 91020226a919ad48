"""``posmix-reproduce --table NAME``: train a paper table's grid of systems, evaluate them, and print
the table beside the numbers the paper reports.

    posmix-reproduce --list                       # the tables
    posmix-reproduce --table gpa-6 --data-dir DIR # tiny scale: a raw corpus (e.g. Multi30k en->de), CPU,
                                                  # 300 updates per system
    posmix-reproduce --table gpa-6 --scale paper  # print the full recipe commands (paper data and settings)
    posmix-reproduce --table gpa-6 --scale paper --plan   # every system's plan (PLAN=1): commands, batch,
                                                          # schedule, disk, test lengths, unstated settings
    posmix-reproduce --table gpa-6 --scale paper --run

Every system is one run of the table's recipe (examples/<task>/run.sh, shared stages in
examples/common/stages.sh): at paper scale with the paper's data, size and hyper-parameters; at tiny
scale with SIZE=mini (3+3 layers, D=128; --size tiny: 1+1 layers, D=32) on the raw corpus named by --data-dir (e.g.
Multi30k's raw release, en->de), the first --max-train
pairs, and --max-update updates. Tiny numbers show that the grid runs end to end, not the paper's
ranking. Progress lines give the system, the updates done and, once it means something, the time left.

Every path (--out, --data-dir) is the caller's, and the recipes run in the caller's directory: logs,
data, checkpoints and scores land under OUT/TABLE. After the grid, posmix-score scores all systems at
once against the table's baseline; the table shows each score with its 95% interval and the other
systems' paired p-values. --render-only with no results of ours is an error unless --paper-only; with a training
option of the tiny scale (--data-dir, --size, --max-update, ...) it is a usage error: it trains nothing.
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

from .. import pipeline
from ..pipeline import PACKAGE_ROOT
from ..recipes.grid_plan import grid_summary
from ..recipes.settings import resolve
from ..recipes.stages import Runner, Stages, run_recipe
from ..paper_tables import PAPER_NUMBERS, TABLE_ALIASES, TABLES, System, Table, paper_short_name, slug
from ..command import UsageError, add_language_options, build_parser as command_parser, console
from ..command import POSITIVE_FLOAT, POSITIVE_INT

ROOT = PACKAGE_ROOT  # the checkout: its examples/ hold the recipes
OUR_METRICS = ["BLEU", "chrF2++", "chrF2", "TER", "COMET", "BLEURT"]
DEFAULT_THROUGHPUT = 25000.0  # training tokens/s per GPU assumed by --plan's GPU-hours (--throughput)
TINY_LINGEVAL97 = os.path.join(ROOT, "tests", "data", "lingeval97_tiny.json")
#: the smallest invocations tests/test_entry_points.py starts from: a table (without one the command lists them);
#: --out is read by --render-only (a grid run would train)
EXAMPLE_ARGUMENTS = {None: ["--table", next(iter(TABLES))],
                     "--out": ["--table", next(iter(TABLES)), "--render-only"]}


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
        env.update({"RAW": opts.data_dir or "", "SRC": opts.src, "TGT": opts.tgt, "TOKENIZE": "13a",
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
            raise UsageError(f"--systems {opts.systems!r}: comma-separated indices in 0..{len(systems) - 1}") from None
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


#: the share of the updates that a training rate must be measured over before it predicts the grid's time
ETA_AFTER = 0.1


def time_left(spent: float, startup: float, measured: float, fraction: float, done_times: List[float],
              systems_left: int) -> Optional[float]:
    """Seconds left in the grid. ``spent``: this system's time so far; ``startup``: its time to its first logged
    update; ``measured`` seconds for ``fraction`` of its updates since then. The finished systems' mean time per
    system, else (once the rate is measured over ETA_AFTER of the updates) the start-up plus the training at that
    rate plus 60% for evaluation; None before that, when a rate would be mostly start-up and noise."""
    if done_times:
        per_system = sum(done_times) / len(done_times)
    elif fraction >= ETA_AFTER and measured > 0:
        per_system = startup + measured / fraction * 1.6
    else:
        return None
    return max(0.0, per_system - spent) + per_system * systems_left


def run_grid(table: Table, cmds, opts) -> None:
    os.makedirs(os.path.join(opts.out, table.name, "logs"), exist_ok=True)
    start = time.time()
    done_times: List[float] = []
    for i, cmd in enumerate(cmds):
        env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
                   **cmd["env"])
        logfile = os.path.join(opts.out, table.name, "logs", cmd["env"]["NAME"] + ".log")
        t0 = time.time()
        max_update = int(cmd["env"].get("MAX_UPDATE", "0") or 0)
        first = None
        print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: system {i + 1}/{len(cmds)} '{cmd['label']}' started",
              flush=True)
        with open(logfile, "w") as log:
            proc = subprocess.Popen(["bash", os.path.join(ROOT, cmd["recipe"])], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)  # in the caller's directory
            for line in proc.stdout:
                log.write(line)
                m = re.search(r"num_updates=(\d+)", line)
                if line.startswith("[recipe"):
                    print("  " + line.rstrip(), flush=True)
                elif m and "train_inner" in line or (m and "| INFO | train |" in line):
                    n = int(m.group(1))
                    now = time.time()
                    first = first or (now, n)  # the rate is measured from the first logged update on
                    frac = (n - first[1]) / max_update if max_update else 0
                    left = time_left(now - t0, first[0] - t0, now - first[0], frac, done_times, len(cmds) - i - 1)
                    print(f"[reproduce {time.strftime('%H:%M:%S')}] {table.name}: system {i + 1}/{len(cmds)} "
                          f"'{cmd['label']}': update {n}/{max_update or '?'}"
                          + (f", about {fmt_secs(left)} left" if left is not None else ""), flush=True)
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


COMPARISON = "scores.table.json"  # posmix-score over the grid's systems against the table's baseline


def system_stages(table: Table, cmd):
    """The recipe's stages of one system (paths, scoring settings), without running anything."""
    try:
        recipe = resolve(table.recipe, dict(os.environ, **cmd["env"]))
    except ValueError as e:
        raise SystemExit(f"posmix-reproduce: {cmd['label']}: {e}")
    return Stages(recipe, Runner(plan=True, stream=io.StringIO()))


def compare(table: Table, cmds, out_dir: str) -> Optional[str]:
    """posmix-score over every system's translations at once, the table's baseline as ``--baseline``: each
    score with its 95% interval (bootstrap) and every other system's paired p-value against the baseline.
    Writes ``out_dir/scores.table.json``; None when fewer than two systems have translations."""
    ran = [(cmd, system_stages(table, cmd)) for cmd in cmds]
    ran = [(cmd, st) for cmd, st in ran if os.path.isfile(st.gen_out)]
    base_label = table.baseline_of([cmd["label"] for cmd, _ in ran])
    if len(ran) < 2:
        return None
    base = next(st for cmd, st in ran if cmd["label"] == base_label)
    others = [(cmd, st) for cmd, st in ran if cmd["label"] != base_label]
    path = os.path.join(out_dir, COMPARISON)
    r = base.r
    flags = ["--spm-model", base.spm_model(), "--src", os.path.join(base.prep, "raw", f"test.{base.src}"),
             "--tokenize", r["TOKENIZE"], *base.detok_flags(), "--metrics", "bleu,chrf++,chrf,ter", "--json", path]
    pipeline.score([st.gen_out for _, st in others], [cmd["label"] for cmd, _ in others], base.reference(),
                   baseline=base.gen_out, baseline_name=base_label, flags=flags,
                   log=os.path.join(out_dir, "logs", "scores.table.log"))
    return path


def read_scores(path: str, ours: Dict[str, Dict[str, float]], stats: Dict[str, Dict[str, dict]]):
    """A posmix-score JSON's rows into ``ours`` (label -> metric -> score) and ``stats`` (label -> metric ->
    {"ci95", "p", "vs"}: the 95% half-width and the paired bootstrap p-value against ``vs``)."""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    for row in rows:
        label, metric = row["system"], row["metric"]
        ours.setdefault(label, {})[metric] = row["score"]
        cell = stats.setdefault(label, {}).setdefault(metric, {})
        if row.get("ci95") is not None:
            cell["ci95"] = row["ci95"]
        if row.get("baseline"):
            cell["baseline"] = True
        if row.get("vs") is not None and row.get("p_bootstrap") is not None:
            cell.update(p=row["p_bootstrap"], vs=row["vs"])


def collect(table: Table, cmds, out_dir: Optional[str] = None):
    """(ours, stats): label -> column -> our value, and label -> metric -> interval / significance. The
    grid's comparison (:func:`compare`) when it exists, else each system's own scores (intervals only)."""
    results: Dict[str, Dict[str, float]] = {}
    stats: Dict[str, Dict[str, dict]] = {}
    for cmd in cmds:
        env, ours = cmd["env"], {}
        name = env["NAME"]
        path = os.path.join(env["OUT"], f"scores.{name}.json")
        if os.path.isfile(path):
            own: Dict[str, Dict[str, float]] = {}
            read_scores(path, own, stats)
            ours.update(own.get(name, {}))
            if name in stats and name != cmd["label"]:
                stats[cmd["label"]] = stats.pop(name)
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
    comparison = os.path.join(out_dir, COMPARISON) if out_dir else None
    if comparison and os.path.isfile(comparison):
        labels = {cmd["label"] for cmd in cmds}
        grid: Dict[str, Dict[str, float]] = {}
        grid_stats: Dict[str, Dict[str, dict]] = {}
        read_scores(comparison, grid, grid_stats)
        for label in labels & set(grid):
            results.setdefault(label, {}).update(grid[label])
            stats[label] = grid_stats[label]
    return results, stats


def _cell(value: float, stat: Optional[dict]) -> str:
    text = f"{value:.2f}"
    if stat and stat.get("ci95") is not None:
        text += f" ± {stat['ci95']:.2f}"
    if stat and stat.get("p") is not None:
        text += f" (p={stat['p']:.3f})"
    return text


def render(table: Table, labels: List[str], ours: Dict[str, Dict[str, float]], scale: str,
           stats: Optional[Dict[str, Dict[str, dict]]] = None) -> str:
    """Our columns beside the paper's; a score with its 95% interval (± half-width) and, for every system
    but the table's baseline, the paired bootstrap p-value against it."""
    stats = stats or {}
    our_cols = [m for m in OUR_METRICS if any(m in ours.get(lbl, {}) for lbl in labels)]
    for lbl in labels:  # the measured columns (speed, memory, accuracies), in the order they come
        our_cols += [c for c in ours.get(lbl, {}) if c not in our_cols and c not in OUR_METRICS]
    paper_cols = []
    for lbl in labels:
        for c in table.reported.get(lbl, {}):
            if c not in paper_cols:
                paper_cols.append(c)
    baselines = {lbl for lbl in labels if any(s.get("baseline") for s in stats.get(lbl, {}).values())}
    head = ["system"] + [f"ours ({scale}) {c}" for c in our_cols] + [f"paper {c}" for c in paper_cols]
    lines = [f"### {table.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lbl in labels:
        cells = [lbl + (" (baseline)" if lbl in baselines else "")]
        cells += [_cell(ours[lbl][c], stats.get(lbl, {}).get(c)) if c in ours.get(lbl, {}) else "-" for c in our_cols]
        cells += [f"{table.reported[lbl][c]:g}" if c in table.reported.get(lbl, {}) else "-" for c in paper_cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if any(s.get("ci95") is not None for by in stats.values() for s in by.values()):
        lines.append("Ours: score ± the half-width of its 95% confidence interval (bootstrap resampling of the test "
                     "set)" + (f"; p: paired bootstrap against {', '.join(sorted(baselines))} (posmix-score)."
                               if baselines else "."))
    lines.append(f"Paper: {table.paper}." + (f" {table.note}" if table.note else ""))
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


def print_plans(table: Table, cmds, throughput: float = 0.0) -> List[str]:
    """Each system's recipe plan, in-process (the meta-device models and the test-length estimate are
    shared across systems), then one summary of the grid (:mod:`..recipes.grid_plan`)."""
    print(f"# {table.title}\n# paper: {table.paper}\n# {len(cmds)} systems; the plan of each:")
    plans, systems = [], []
    for cmd in cmds:
        print(f"\n# --- {cmd['label']}: {shell_line(cmd)}")
        env = dict(os.environ, **cmd["env"])
        try:
            recipe = resolve(table.recipe, env)
        except ValueError as e:
            raise SystemExit(f"posmix-reproduce: {cmd['label']}: {e}")
        stream = io.StringIO()
        stages = run_recipe(recipe, plan=True, stream=stream)
        print(stream.getvalue())
        plans.append(stream.getvalue())
        systems.append(dict(label=cmd["label"], recipe=recipe, stages=stages, plan=stream.getvalue()))
    summary = grid_summary(table, systems, throughput or DEFAULT_THROUGHPUT)
    print(summary)
    return plans + [summary]


def table_listing(tables) -> str:
    """``--list``: one row per table in the given order (TABLES: the papers' order, then each paper's table
    numbers), columns aligned to their longest entry; the title last, without the paper and number that
    the row's own columns give."""
    header = ("paper", "number", "--table", "systems", "recipe", "title")
    rows = []
    for t in tables:
        short, number = paper_short_name(t), PAPER_NUMBERS[t.name]
        title = t.title
        for prefix in (f"{short} {number}: ", f"{short} "):
            if title.startswith(prefix):
                title = title[len(prefix):]
                break
        rows.append((short, number, t.name, str(len(t.systems)), f"examples/{t.recipe}/run.sh", title))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]
    lines = []
    for r in [header] + rows:
        cells = [c.rjust(w) if i == 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells + [r[-1]]))
    return "\n".join(lines)


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
    p.add_argument("--out", default=os.path.join("runs", "reproduce"), metavar="DIR",
                   help="the runs' folder, relative to the current directory (default: runs/reproduce)")
    p.add_argument("--data-dir", metavar="DIR", help="tiny scale (required there): the raw parallel corpus, a folder of "
                                      "{train,valid,test}.{SRC,TGT}[.gz], e.g. Multi30k's raw release")
    p.add_argument("--throughput", type=POSITIVE_FLOAT, default=DEFAULT_THROUGHPUT,
                   help="--plan: the training tokens per second per GPU that its GPU-hours assume "
                        f"(default: {DEFAULT_THROUGHPUT:,.0f}, an assumption, not a measurement)")
    add_language_options(p, source_default="en", target_default="de", dests=("src", "tgt"),
                         what=" (tiny scale: the suffix of --data-dir's files)")
    p.add_argument("--size", choices=["mini", "tiny"], default="mini",
                   help="tiny scale: recipe SIZE (mini: 3+3 layers, D=128; tiny: 1+1 layers, D=32, for tests)")
    p.add_argument("--max-update", type=POSITIVE_INT, default=300, help="tiny scale: updates per system")
    p.add_argument("--max-train", type=POSITIVE_INT, default=30000, help="tiny scale: training pairs (Multi30k has 29k)")
    p.add_argument("--max-eval", type=POSITIVE_INT, default=1000, help="tiny scale: valid/test pairs")
    p.add_argument("--vocab", type=POSITIVE_INT, default=8000, help="tiny scale: BPE vocabulary")
    p.add_argument("--render-only", action="store_true", help="print the table from the scores already in --out")
    p.add_argument("--paper-only", action="store_true",
                   help="with --render-only: print the paper's numbers even when --out holds no results of ours")
    a = p.parse_args(argv)
    if a.render_only:  # it trains nothing: the tiny scale's training options would be ignored without a word
        unused = [flag for flag, dest in (("--data-dir", "data_dir"), ("--size", "size"), ("--max-update", "max_update"),
                                          ("--max-train", "max_train"), ("--max-eval", "max_eval"), ("--vocab", "vocab"),
                                          ("--run", "run")) if getattr(a, dest) != p.get_default(dest)]
        if unused:
            raise UsageError(f"--render-only prints the table from the scores in --out and trains nothing: "
                             f"{', '.join(unused)} would be ignored; drop {'it' if len(unused) == 1 else 'them'}")
    # every path is the caller's: the recipes run with the checkout as their working directory
    a.out = os.path.abspath(a.out)
    a.data_dir = a.data_dir and os.path.abspath(a.data_dir)
    if a.list or not a.table:
        print(table_listing(TABLES.values()))
        if not a.table:
            return None
    if a.table in TABLE_ALIASES:
        print(f"posmix-reproduce: --table {a.table} is now named {TABLE_ALIASES[a.table]}", file=sys.stderr)
        a.table = TABLE_ALIASES[a.table]
    if a.table not in TABLES:
        raise UsageError(f"--table {a.table!r}: valid tables are {', '.join(TABLES)}")
    if a.paper_only and not a.render_only:
        raise UsageError("--paper-only: only with --render-only")
    if a.scale == "tiny" and not a.render_only and not a.data_dir:
        p.error("--data-dir DIR is required at the tiny scale: the raw parallel corpus to train on, a folder of "
                f"{{train,valid,test}}.{{{a.src},{a.tgt}}}[.gz] (e.g. Multi30k's raw release); --scale paper "
                "prints or runs the paper's recipes on their own data")
    table = TABLES[a.table]
    cmds = commands(table, a.scale, a)
    if a.plan:
        return print_plans(table, cmds, a.throughput)
    if a.scale == "paper" and not a.run and not a.render_only:
        print(f"# {table.title}\n# paper: {table.paper}\n# {len(cmds)} systems, one after the other:")
        for c in cmds:
            print(shell_line(c))
        print(f"# then: posmix-reproduce --table {table.name} --scale paper --render-only --out {a.out}")
        return cmds
    if a.scale == "tiny" and not a.render_only and not os.path.isdir(a.data_dir):
        raise SystemExit(f"--data-dir {a.data_dir}: not found (a folder of raw parallel text)")
    out_dir = os.path.join(a.out, table.name)
    if not a.render_only:
        run_grid(table, cmds, a)
        compare(table, cmds, out_dir)
    ours, stats = collect(table, cmds, out_dir)
    if not ours and not a.paper_only:
        raise SystemExit(f"posmix-reproduce: no results of ours for {table.name} in {out_dir} (no scores.<system>.json "
                         "there): run the grid first, point --out at its folder, or add --paper-only to print the "
                         "paper's numbers alone")
    print(render(table, [c["label"] for c in cmds], ours, a.scale, stats))
    extra = extra_tables(table, cmds)
    if extra:
        print(extra)
    return ours


cli = console(main, "posmix-reproduce")


if __name__ == "__main__":
    raise SystemExit(cli())
