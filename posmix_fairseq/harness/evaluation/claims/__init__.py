"""``posmix-claims``: the five papers' headline claims, measured on one real corpus over several training
seeds, and the page that gives each claim its verdict (``docs/reproduction.md``).

    posmix-claims --data-dir DIR --plan                      # every command and the budget; runs nothing
    posmix-claims --data-dir DIR --out claims --results R    # prepare, train, decode, score, write the page
    posmix-claims --data-dir DIR --rows gpa-1,pea-2          # only the systems those rows compare
    posmix-claims --results R --render-only --page P         # the page from the results folder alone
    posmix-claims --results R --converged-results C --render-only --page P   # and the converged study's column
    posmix-claims --data-dir DIR --device cuda --jobs 16 --max-update 0 --results R-gpu   # the uncapped grid: patience stops each run

DIR holds raw parallel text ``{train, val|valid|dev, test*}.{src,tgt}[.gz]`` (Multi30k's raw release; de->en
by default). The study, the same steps for every system and seed:

1. a joint SentencePiece BPE model on the training split; training pairs longer than ``--max-train-len``
   pieces on either side are left out (one cap for every system; PEA's length analysis), and the test
   sets of :mod:`.data`;
2. ``fairseq-train`` per system and seed until validation stops improving (``--patience`` validations
   without a better validation loss, checked every ``--validate-every`` updates) or ``--max-update``
   updates (0: no cap); the model decoded averages the best checkpoint and the ones after it;
3. ``fairseq-generate`` with beam search on every test set, as the model stops and at each reference's
   length (``--match-target-len``: the oracle-length control); rPosNet is also frozen (``posmix-freeze``) and
   its translations compared with the trained model's;
4. the scores (sacreBLEU's BLEU with its brevity penalty, length ratio and n-gram precisions, chrF++, and
   the truncation rate) of every run, and the verdicts: t intervals over seeds with the test set's shared
   sentence variance, equivalence tests for equality, Holm's correction over the directional rows
   (:mod:`.statistics`);
5. the page: one row per claim (:mod:`.catalogue`), the paper's figure beside ours (:mod:`.page`).

The modules: :mod:`.systems` (what trains), :mod:`.catalogue` (the claims), :mod:`.data` (splits and test
sets), :mod:`.runner` (train, decode, keep), :mod:`.statistics` (scores and verdicts), :mod:`.page`.
"""
import json
import os
import shlex
import time
from typing import Dict, List, Optional

from ... import pipeline
from ...command import NON_NEGATIVE_INT, POSITIVE_INT, Number, UsageError, add_language_options, build_parser as \
    command_parser, console, replace_file
from . import data, runner
from .catalogue import CLAIM_BY_KEY
from .systems import SECONDS_PER_UPDATE, SIZES, gpu_seconds_per_update, SYSTEMS, TEST_SETS, OPTIMISATION, study_order


def settings(opts) -> dict:
    """What makes two runs comparable: a results folder holds one study's settings (the seed is not one)."""
    return {"src": opts.src, "tgt": opts.tgt, "vocab_size": opts.vocab_size, "max_train_len": opts.max_train_len,
            "max_tokens": opts.max_tokens, "max_update": opts.max_update, "validate_every": opts.validate_every,
            "patience": opts.patience, "average": opts.average, "beam": opts.beam, "max_len_b": opts.max_len_b,
            "size": SIZES[opts.size], "optimisation": OPTIMISATION}


def check_results_folder(opts) -> None:
    path = os.path.join(opts.results, "study.json")
    if not os.path.isfile(path):
        return
    with open(path) as f:
        stored = json.load(f)["settings"]
    differ = {k: (stored.get(k), v) for k, v in settings(opts).items() if stored.get(k) != v}
    if differ:
        raise UsageError(f"--results {opts.results} holds a study with other settings ("
                         + "; ".join(f"{k}: {a!r} there, {b!r} here" for k, (a, b) in differ.items())
                         + "): give the same options, or another --results folder")


def selected_systems(opts) -> List[str]:
    if opts.rows and opts.systems:
        raise UsageError("--rows and --systems both choose the systems: give one")
    if opts.rows:
        keys = []
        for k in opts.rows.split(","):
            if k not in CLAIM_BY_KEY:
                raise UsageError(f"--rows: no row {k!r}; rows: {', '.join(CLAIM_BY_KEY)}")
            if CLAIM_BY_KEY[k].kind == "not_measured":
                raise UsageError(f"--rows {k}: {CLAIM_BY_KEY[k].why_not.split(' (')[0]} is needed; "
                                 f"run {CLAIM_BY_KEY[k].why_not.split('(')[-1].rstrip(')')}")
            keys += CLAIM_BY_KEY[k].systems()
        wanted = set(keys)
        return [k for k in SYSTEMS if k in wanted]
    if opts.systems:
        keys = opts.systems.split(",")
        for k in keys:
            if k not in SYSTEMS:
                raise UsageError(f"--systems: no system {k!r}; systems: {', '.join(SYSTEMS)}")
        return keys
    return list(SYSTEMS)


def seeds_of(opts, keys: List[str]) -> Dict[str, List[int]]:
    """Each system's seeds: 1..--seeds, or 1..its own count (5 for the Transformer, 3 for the others)."""
    return {k: list(range(1, (opts.seeds or SYSTEMS[k].seeds) + 1)) for k in keys}


def plan(opts, lay: data.Layout, runs: List[tuple], todo: List[tuple]) -> str:
    device = "cpu" if opts.cpu else "cuda"
    lines = [f"# posmix-claims plan: {len(runs)} runs ({len(todo)} still to train), {opts.jobs} at a time "
             f"on the {device.upper()}, in {lay.out}",
             f"# 1. BPE, length cap and test sets (python): {opts.data_dir} -> {lay.bpe}, {lay.raw}"]
    lines += ["# 2. " + shlex.join(cmd) for cmd in runner.preprocess_cmds(opts, lay, sorted({k for k, _ in runs}))]
    for key, seed in runs:
        s = SYSTEMS[key]
        averaged = os.path.join(lay.run_dir(key, seed), "averaged.pt")
        lines += [f"# run {key} seed {seed}: {s.label}" + ("" if (key, seed) in todo else " (kept: done)"),
                  shlex.join(runner.train_cmd(opts, lay, s, seed)), shlex.join(runner.average_cmd(opts, lay, key, seed))]
        lines += [shlex.join(runner.generate_cmd(opts, lay, s, averaged, t, oracle)) + f" > {lay.gen(key, seed, t, oracle=oracle)}"
                  for oracle in (False, True) for t in TEST_SETS]
        if s.freeze:
            lines.append(shlex.join(pipeline.freeze_command(averaged, os.path.join(lay.run_dir(key, seed), "search.pt"))))
    lines.append("# then the scores of every run, the verdicts and the page")
    measured = measured_run_seconds(opts.results) if opts.results else {}
    if measured:
        lines.append(measured_time_line(todo, measured, opts.jobs))
        return "\n".join(lines)
    if opts.seconds_per_update:
        per_update, source = opts.seconds_per_update, "--seconds-per-update"
    elif device == "cpu":
        per_update, source = SECONDS_PER_UPDATE["cpu"][opts.size], "measured on a 2-core CPU, one thread"
    else:
        per_update = gpu_seconds_per_update(opts.jobs)
        source = f"each of {opts.jobs} runs sharing one H200, measured at --size small"
    capped = bool(opts.max_update) and opts.max_update <= opts.expected_updates  # the cap, not patience, stops each
    updates = opts.max_update if capped else opts.expected_updates
    hours = len(todo) * updates * per_update / max(opts.jobs, 1) / 3600
    stops = ("--max-update" if capped else "--expected-updates, the patience rule stops each" +
             (f" before the --max-update {opts.max_update} cap" if opts.max_update else "; no cap"))
    lines.append(f"# time: {len(todo)} runs x {'at most ' if capped else 'about '}{updates} updates ({stops})"
                 f" x {per_update:.3g} s per update ({source}) / {opts.jobs} at once = "
                 f"{hours:.1f} h of training, plus each run's decodes (every test set twice: as it stops and at "
                 "the references' lengths)")
    return "\n".join(lines)


def measured_run_seconds(results: str) -> Dict[str, List[float]]:
    """system -> the measured wall seconds (training, averaging excluded, plus decoding) of each of its finished
    runs in the results folder; runs trained beside other work (1-minute load above 1.5) are left out."""
    measured: Dict[str, List[float]] = {}
    for key, seeds in runner.finished_runs(results).items():
        for seed in seeds:
            with open(os.path.join(runner.results_run_dir(results, key, seed), "result.json")) as f:
                r = json.load(f)
            if r.get("train_seconds") and (r.get("load_1min_mean") or 0) <= 1.5:
                measured.setdefault(key, []).append(r["train_seconds"] + (r.get("decode_seconds") or 0))
    return measured


def measured_time_line(todo: List[tuple], measured: Dict[str, List[float]], jobs: int) -> str:
    """The time of the runs still to train, from the results folder's measured runs: a system's own mean where
    it has runs, the mean over every measured run where it has none (each system stops where patience stops it,
    so a system's own runs are the better estimate)."""
    every = [s for runs in measured.values() for s in runs]
    overall = sum(every) / len(every)
    own = [k for k, _ in todo if k in measured]
    seconds = sum(sum(measured[k]) / len(measured[k]) if k in measured else overall for k, _ in todo)
    return (f"# time from measured runs: {len(todo)} runs still to train ({len(own)} of them of systems with measured "
            f"runs, each at its system's mean; the other {len(todo) - len(own)} at the mean of all {len(every)} "
            f"measured runs, {overall / 60:.0f} min) / {jobs} at once = {seconds / max(jobs, 1) / 3600:.1f} h of "
            f"training and decoding")


def build_parser():
    p = command_parser("posmix-claims", __doc__)
    p.add_argument("--data-dir", metavar="DIR", help="raw parallel text: {train,val|valid|dev,test*}.{SRC,TGT}[.gz]")
    p.add_argument("--data-name", default="Multi30k (task 1)", help="the data's name on the page")
    add_language_options(p, source_default="de", target_default="en", dests=("src", "tgt"),
                         what=" (the suffix of --data-dir's files)")
    p.add_argument("--out", default="claims", metavar="DIR", help="the study's folder (relative to the current "
                   "directory)")
    p.add_argument("--rows", help="comma list of rows (e.g. gpa-1,hc-2): only the systems they compare")
    p.add_argument("--systems", help=f"comma list of systems: {', '.join(SYSTEMS)}")
    p.add_argument("--seeds", type=NON_NEGATIVE_INT, default=0,
                   help="train seeds 1..N of each system (0: each system's own count, 5 for the Transformer, the "
                        "baseline of most rows, 3 for the others)")
    p.add_argument("--plan", action="store_true", help="print every command and the time it needs; run nothing")
    p.add_argument("--render-only", action="store_true",
                   help="write the page from the results folder (--results) alone: nothing is trained or decoded")
    p.add_argument("--page", metavar="FILE", help="write the page here (default: OUT/reproduction.md)")
    p.add_argument("--results", metavar="DIR",
                   help="keep each finished run's result and hypotheses here (small files a repository can "
                        "commit); runs found here are not trained again, and a study continued on another "
                        "machine encodes with the spm.model kept here")
    p.add_argument("--vocab-size", type=POSITIVE_INT, default=4000, help="joint SentencePiece BPE vocabulary")
    p.add_argument("--max-train-len", type=NON_NEGATIVE_INT, default=0,
                   help="length cap of the training pairs in pieces (0: the 90th percentile of the longer side)")
    p.add_argument("--max-tokens", type=POSITIVE_INT, default=4096, help="tokens per batch")
    p.add_argument("--max-update", type=NON_NEGATIVE_INT, default=2500,
                   help="the most updates a run trains (0: no cap; the patience rule alone stops training)")
    p.add_argument("--validate-every", type=NON_NEGATIVE_INT, default=100,
                   help="updates between validations / checkpoints (0: at the end of every epoch)")
    p.add_argument("--patience", type=POSITIVE_INT, default=3,
                   help="stop after this many validations without a better validation loss")
    p.add_argument("--average", type=POSITIVE_INT, default=4, help="average the best checkpoint and the N-1 after it")
    p.add_argument("--beam", type=POSITIVE_INT, default=5, help="beam size of fairseq-generate")
    p.add_argument("--max-len-b", type=POSITIVE_INT, default=200, help="fairseq-generate's --max-len-b (its default: 200)")
    p.add_argument("--size", choices=sorted(SIZES), default="small",
                   help="small: 3+3 layers, D = 64 (the grid that fits a 2-core CPU); mini: 3+3, D = 128; "
                        "tiny: 1+1, D = 32 (checks that the steps run)")
    p.add_argument("--jobs", type=POSITIVE_INT, default=1,
                   help="runs at once: on the CPU each pinned to its own core (on a 2-vCPU machine whose vCPUs share "
                        "a core, two run no faster than one); on a GPU all share it")
    p.add_argument("--threads", type=NON_NEGATIVE_INT, default=0, help="torch threads per run (0: cores / jobs)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where the runs train and decode (auto: cuda when a GPU is visible)")
    p.add_argument("--seconds-per-update", type=Number(float, 0), default=0.0,
                   help="--plan's estimate of one update's time (0: the size's measured time on a 2-core CPU, one "
                        "thread, or one run's measured time on an H200 shared by --jobs runs)")
    p.add_argument("--expected-updates", type=POSITIVE_INT, default=8000,
                   help="--plan's estimate of the updates a run takes when --max-update is 0 (no cap)")
    p.add_argument("--converged-results", metavar="DIR",
                   help="the converged study's results folder (runs stopped by patience): every BLEU row shows its "
                        "column beside the 2,500-update one, and takes its verdict once the row's systems have their "
                        "seeds there (the page only)")
    return p


def check_options(opts) -> None:
    """What the parser's ranges cannot say: options that bound each other, and options a mode does not use."""
    if opts.render_only and not opts.results:
        raise UsageError("--render-only writes the page from a results folder: give --results")
    if opts.render_only:
        defaults = build_parser()
        unused = [flag for flag, dest in RENDER_UNUSED if getattr(opts, dest) != defaults.get_default(dest)]
        if unused:
            raise UsageError(f"--render-only writes the page from the results folders alone: {', '.join(unused)} "
                             "would not be used (the settings are the results folder's own); leave "
                             f"{'it' if len(unused) == 1 else 'them'} out")
    if opts.average > opts.patience + 1:
        raise UsageError(f"--average must be in 1..--patience + 1 = {opts.patience + 1}: the best checkpoint and "
                         f"the ones after it that training keeps (got {opts.average})")
    if opts.max_update and opts.validate_every > opts.max_update:
        raise UsageError(f"--validate-every {opts.validate_every} is more than --max-update {opts.max_update}")
    for flag, folder in (("--converged-results", opts.converged_results), ("--results", opts.render_only and opts.results)):
        if folder and not os.path.isdir(folder):  # folders the page only reads
            raise UsageError(f"{flag} {folder}: " + ("is a file, not a results folder" if os.path.exists(folder)
                                                      else "no such directory"))
    if opts.converged_results and not opts.results:
        raise UsageError("--converged-results is a second column beside --results: give --results too")


#: the options a page written from the results folders does not use: (flag, dest)
RENDER_UNUSED = (("--data-dir", "data_dir"), ("--data-name", "data_name"), ("--rows", "rows"),
                 ("--systems", "systems"), ("--seeds", "seeds"), ("--plan", "plan"), ("--vocab-size", "vocab_size"),
                 ("--max-train-len", "max_train_len"), ("--max-tokens", "max_tokens"), ("--max-update", "max_update"),
                 ("--validate-every", "validate_every"), ("--patience", "patience"), ("--average", "average"),
                 ("--beam", "beam"), ("--max-len-b", "max_len_b"), ("--size", "size"), ("--jobs", "jobs"),
                 ("--threads", "threads"), ("--device", "device"), ("--seconds-per-update", "seconds_per_update"),
                 ("--expected-updates", "expected_updates"), ("-s", "src"), ("-t", "tgt"))


def resolve_device(opts) -> None:
    """--device auto -> cpu or cuda; --threads 0 -> the cores per job on the CPU, 1 on a GPU."""
    if opts.device == "auto":
        opts.device = "cuda" if _has_gpu() else "cpu"
    elif opts.device == "cuda" and not (opts.plan or opts.render_only) and not _has_gpu():
        raise UsageError("--device cuda: torch sees no GPU here (torch.cuda.is_available() is False)")
    opts.cpu = opts.device == "cpu"
    if opts.threads == 0:
        opts.threads = max(1, (os.cpu_count() or 1) // opts.jobs) if opts.cpu else 1


def main(argv: Optional[List[str]] = None):
    opts = build_parser().parse_args(argv)
    check_options(opts)
    if opts.render_only:  # the settings are the results folder's own; torch is never imported
        return write_page(opts)
    keys = selected_systems(opts)
    resolve_device(opts)
    lay = data.Layout(opts.out)
    if opts.results:
        check_results_folder(opts)
    if not opts.data_dir:
        raise UsageError("--data-dir is required: a folder of raw parallel text (e.g. Multi30k's data/task1/raw)")
    if not os.path.isdir(opts.data_dir):
        raise UsageError(f"--data-dir {opts.data_dir}: no such directory")
    runs = study_order(keys, seeds_of(opts, keys))
    if opts.plan:
        todo = [r for r in runs if not (opts.results and os.path.isfile(
            os.path.join(runner.results_run_dir(opts.results, *r), "result.json")))]
        print(plan(opts, lay, runs, todo))
        return 0
    prepare_study(opts, lay, keys)
    todo = runner.pending(opts, lay, runs)
    runner.log(f"{len(runs)} runs, {len(todo)} to train or decode")
    runner.run_queue(opts, lay, todo)
    if not opts.results:
        return 0
    return write_page(opts)


def prepare_study(opts, lay: data.Layout, keys: List[str]) -> dict:
    """The data, both binarized splits, and (with --results) the references and the study's settings."""
    runner.log(f"prepare: {opts.data_dir} ({opts.src}->{opts.tgt})")
    info = data.prepare(opts, lay)
    runner.log(f"  length cap {info['max_train_len']} pieces: {info['train_pairs_kept']:,} of {info['train_pairs']:,} "
               f"training pairs; test sets {info['test_sizes']}")
    last_test = f"test{len(TEST_SETS) - 1}.{opts.src}-{opts.tgt}.{opts.src}.idx"
    for cmd in runner.preprocess_cmds(opts, lay, keys):
        if not os.path.isfile(os.path.join(cmd[cmd.index("--destdir") + 1], last_test)):
            pipeline.run(cmd, log=os.path.join(lay.out, "preprocess.log"))
    if opts.results:
        os.makedirs(opts.results, exist_ok=True)
        data.store_references(opts, lay, info)
        write_study(opts, info)
    return info


def write_study(opts, info: dict) -> None:
    path = os.path.join(opts.results, "study.json")
    stored = json.load(open(path)) if os.path.isfile(path) else {}
    prepare = {k: v for k, v in info.items() if k != "source_lengths"}
    replace_file(path, json.dumps({"settings": settings(opts), "prepare": prepare, "data_name": opts.data_name,
                                   "first_run": stored.get("first_run", time.strftime("%Y-%m-%d"))}, indent=2).encode())


def write_page(opts) -> int:
    # the page's module reads sacreBLEU and numpy: only when a page is written
    from . import page

    text = page.render_from_results(opts, store=not opts.render_only)
    target = opts.page or os.path.join(opts.out, "reproduction.md")
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    replace_file(target, text.encode("utf-8"))  # atomic: a killed render leaves the old page whole
    runner.log(f"page: {target}")
    return 0


def _has_gpu() -> bool:
    try:
        import torch  # only to ask for a GPU: --help starts without it
    except ImportError:
        return False
    return torch.cuda.is_available()


cli = console(main, "posmix-claims")
