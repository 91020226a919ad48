"""Training, decoding and keeping one run (a system with one seed), and the queue of runs.

A run records the fingerprint of its model code (:mod:`.fingerprint`; a system's seeds share one), trains with
``fairseq-train``, averages the best checkpoint with the ones after it, decodes every test set with
``fairseq-generate``, once as it stops and once at each reference's length (``--match-target-len``, the
oracle-length control), freezes rPosNet with ``posmix-freeze``, and writes ``result.json``: what it measured,
what it cost, and where it ran (the commit, the fingerprint, the seed, the machine, the load during training).
Each step skips what an earlier run finished, so a stopped study continues where it stopped. ``--results``
keeps each finished run (its result and hypotheses, gzipped): small files a repository can commit, from
which the study continues on another machine and the page is written again.
"""
import gzip
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import threading
import time
from typing import Dict, List, Optional

from ... import pipeline
from .data import Layout, subset_index
from .fingerprint import TOLERANCE, difference, same_code
from .systems import OPTIMISATION, SYSTEMS, TEST_SETS, StudySystem


def log(msg: str) -> None:
    print(f"[claims {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- the commands -----------------------------------------------------------------------------------

def preprocess_cmds(opts, lay: Layout, keys: List[str]) -> List[List[str]]:
    """The capped split with its joined dictionary; the uncapped split with the same dictionary, when one of the
    systems ``keys`` trains on it."""
    tests = ",".join(os.path.join(lay.bpe, t) for t in TEST_SETS)
    capped = pipeline.preprocess_command(opts.src, opts.tgt, lay.data_bin, os.path.join(lay.bpe, "train.capped"),
                                         os.path.join(lay.bpe, "valid"), None, workers=1) + ["--testpref", tests]
    dictionary = os.path.join(lay.data_bin, f"dict.{opts.src}.txt")
    uncapped = pipeline.preprocess_command(opts.src, opts.tgt, lay.data_bin_uncapped, os.path.join(lay.bpe, "train"),
                                           os.path.join(lay.bpe, "valid"), None, srcdict=dictionary,
                                           tgtdict=dictionary, workers=1) + ["--testpref", tests]
    return [capped, uncapped] if any(SYSTEMS[k].uncapped for k in keys) else [capped]


def data_bin(lay: Layout, system: StudySystem) -> str:
    return lay.data_bin_uncapped if system.uncapped else lay.data_bin


def train_cmd(opts, lay: Layout, system: StudySystem, seed: int) -> List[str]:
    """fairseq-train for one run. Validation (and a checkpoint) every ``--validate-every`` updates, or at the end of
    every epoch when it is 0; ``--patience`` validations without a better validation loss stop the run."""
    optimisation, patience = shlex.split(OPTIMISATION), ["--patience", str(opts.patience)]
    if opts.validate_every:
        schedule = ["--validate-interval-updates", str(opts.validate_every),
                    "--save-interval-updates", str(opts.validate_every), "--keep-interval-updates",
                    str(opts.patience + 2), *patience, "--log-interval", str(opts.validate_every),
                    "--validate-interval", "1000000", "--save-interval", "1000000"]
    else:  # per epoch: fairseq's epoch checkpoints, the best one and those after it kept for the average
        optimisation.remove("--no-epoch-checkpoints")
        schedule = ["--validate-interval", "1", "--save-interval", "1", "--keep-last-epochs", str(opts.patience + 2),
                    *patience, "--log-interval", "100"]
    flags = [*system.train_flags(opts.size), *optimisation, "--seed", str(seed),
             "--max-tokens", str(opts.max_tokens), *schedule, *device_flags(opts)]
    if opts.max_update:  # 0: no cap, the patience rule alone stops training
        flags += ["--max-update", str(opts.max_update)]
    return pipeline.train_command(data_bin(lay, system), os.path.join(lay.run_dir(system.key, seed), "checkpoints"),
                                  flags)


def average_cmd(opts, lay: Layout, key: str, seed: int) -> List[str]:
    run_dir = lay.run_dir(key, seed)
    return pipeline.module_command("posmix_fairseq.harness.evaluation.average", "--dir",
                                   os.path.join(run_dir, "checkpoints"), "--kind", "updates" if opts.validate_every else "epochs",
                                   "--best-and-next", opts.average, "--output", os.path.join(run_dir, "averaged.pt"))


def generate_cmd(opts, lay: Layout, system: StudySystem, checkpoint: str, test: str, oracle: bool = False) -> List[str]:
    """fairseq-generate on ``test``; ``oracle``: every hypothesis as long as its reference in pieces (the plugin's
    ``--match-target-len``, which replaces ``--max-len-b``)."""
    at_length = ["--task", "posmix_translation", "--match-target-len"] if oracle else []
    return pipeline.generate_command(data_bin(lay, system), checkpoint,
                                     ["--beam", str(opts.beam), "--max-tokens", "4000", "--max-len-b",
                                      str(opts.max_len_b), *at_length, *device_flags(opts)], gen_subset=subset_index(test))


def device_flags(opts) -> List[str]:
    return ["--cpu"] if opts.cpu else []


# ---- what a run records -------------------------------------------------------------------------------

def training_summary(*train_logs: str) -> dict:
    """What the training logs say: every validation, the best one, whether patience stopped the run. A training
    interrupted and resumed (fairseq-train continues from its last epoch checkpoint) has one log per part, in
    order; ``resumed`` counts the resumptions."""
    text = "".join(open(p, encoding="utf-8", errors="replace").read() for p in train_logs)
    valid = sorted({int(u): float(loss) for loss, u in re.findall(
        r"valid on 'valid' subset \| loss ([\d.]+) \| .*?num_updates (\d+)", text)}.items())
    best = min(valid, key=lambda x: x[1]) if valid else (None, None)
    params = re.findall(r"num\. shared model params: ([\d,]+)", text)
    return {"validations": valid, "best_update": best[0], "best_valid_loss": best[1],
            "last_update": valid[-1][0] if valid else None,
            "stopped_by_patience": "early stop since valid performance hasn't improved" in text,
            "params": int(params[-1].replace(",", "")) if params else None, "resumed": len(train_logs) - 1}


def set_aside_interrupted_log(train_log: str) -> List[str]:
    """The logs of a training's earlier, interrupted parts, in order: an existing ``train.log`` (its part was
    stopped before the run finished) moves to ``train.log.N``."""
    parts = sorted((p for p in (f"{train_log}.{i}" for i in range(1, 100)) if os.path.isfile(p)),
                   key=lambda p: int(p.rsplit(".", 1)[1]))
    if os.path.isfile(train_log):
        parts.append(f"{train_log}.{len(parts) + 1}")
        os.replace(train_log, parts[-1])
    return parts


def logged_seconds(train_log: str) -> float:
    """The seconds from a training log's first timestamp to its last (an interrupted part's training time)."""
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|", open(train_log, encoding="utf-8",
                                                                          errors="replace").read(), re.M)
    if len(stamps) < 2:
        return 0.0
    first, last = (time.mktime(time.strptime(s, "%Y-%m-%d %H:%M:%S")) for s in (stamps[0], stamps[-1]))
    return last - first


def decoding_rate(gen_log: str) -> Optional[float]:
    m = re.search(r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)", open(gen_log, encoding="utf-8").read())
    return float(m.group(2)) if m else None


def model_parameters(checkpoint: str, data: str) -> dict:
    """The parameters of the model a checkpoint builds: all of them, its self-attention sublayers', and its
    position modules' outside the layers (learned absolute tables, rPosNet's n~ tables, RecPE's recurrences,
    PosNet's kernels); and the positions each side covers (its tables' rows, or a frozen model's energy
    tables)."""
    # torch and fairseq load in seconds: only the steps that read checkpoints need them (not --help, --plan)
    import logging
    import posmix_fairseq
    from fairseq import checkpoint_utils

    posmix_fairseq.register()
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    models, cfg = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={"data": data})
    named = list(models[0].named_parameters())
    args = cfg.model
    covered = {"source": getattr(args, "encoder_frozen_energy_positions", None) or args.max_source_positions,
               "target": getattr(args, "decoder_frozen_energy_positions", None) or args.max_target_positions}
    return {"all": sum(p.numel() for _, p in named),
            "self_attention": sum(p.numel() for n, p in named if ".self_attn." in n),
            "position_modules": sum(p.numel() for n, p in named if ".layers." not in n and "position" in n),
            "positions_covered": covered}


def commit() -> dict:
    """The checkout the run's code came from: its commit, and whether the library or harness differed from it."""
    def git(*args):
        return subprocess.run(["git", "-C", pipeline.PACKAGE_ROOT, *args], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "posmix_fairseq")
    return {"commit": head or "unknown (not a git checkout)", "code_differs_from_commit": bool(dirty)}


def machine() -> str:
    """The CPU model and its widest vector unit (floating-point sums differ between AVX2 and AVX-512 hosts),
    its cores, the GPU if any, Python and torch."""
    cpu, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        cpu = re.search(r"model name\s*:\s*(.+)", text).group(1).strip()
        flags = re.search(r"flags\s*:\s*(.+)", text).group(1).split()
    except (OSError, AttributeError):
        pass
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    try:
        import torch  # only to name its version and the GPU; the page can be written without torch
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
        versions = f"torch {torch.__version__}"
    except ImportError:
        gpu, versions = "GPU unknown", "torch not installed"
    return f"{cpu} ({vector}), {os.cpu_count()} vCPUs, {gpu}, Python {platform.python_version()}, {versions}"


class LoadMonitor:
    """The 1-minute load average, sampled every ``every`` seconds while a step runs (a run alone on one
    thread shows about 1.0)."""

    def __init__(self, every: float = 30.0):
        self.samples: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every,), daemon=True)

    def _sample(self, every):
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        if not self.samples:
            return {"load_1min_mean": None, "load_1min_max": None, "load_samples": 0}
        return {"load_1min_mean": round(sum(self.samples) / len(self.samples), 2),
                "load_1min_max": round(max(self.samples), 2), "load_samples": len(self.samples)}


# ---- one model code per system ----------------------------------------------------------------------

def code_fingerprint(lay: Layout, key: str, seed: int, run) -> dict:
    """The fingerprint of the model code that trains this run, computed as it trains (``run``: its launcher and
    threads): {"fingerprint", "fingerprint_outputs"}."""
    path = os.path.join(lay.run_dir(key, seed), "fingerprint.json")
    run(pipeline.module_command("posmix_fairseq.harness.evaluation.claims.fingerprint", "--system", key, "--json",
                                path), log=os.path.join(lay.run_dir(key, seed), "fingerprint.log"))
    with open(path) as f:
        return json.load(f)


def other_runs(opts, lay: Layout, key: str, seed: int) -> List[tuple]:
    """(seed, where, record) of the system's other runs: their result.json in --results, else in the study folder
    (or the train.json of one that is training)."""
    found: Dict[int, tuple] = {}
    folders = ([os.path.join(opts.results, key)] if opts.results else []) + [os.path.dirname(lay.run_dir(key, seed))]
    for folder in folders:
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if not re.fullmatch(r"seed\d+", name) or int(name[4:]) == seed or int(name[4:]) in found:
                continue
            for record in ("result.json", "train.json"):
                path = os.path.join(folder, name, record)
                if os.path.isfile(path):
                    with open(path) as f:
                        found[int(name[4:])] = (int(name[4:]), path, json.load(f))
                    break
    return [found[s] for s in sorted(found)]


def check_fingerprint(opts, lay: Layout, key: str, seed: int, code: dict) -> None:
    """Refuses to train a run whose model code differs from the code of the system's other runs (those that
    recorded a fingerprint): one system's seeds must measure one model."""
    for other, path, record in other_runs(opts, lay, key, seed):
        if record.get("fingerprint") and not same_code(code, record):
            commit_of = record.get("commit", "unknown")
            gap = difference(code, record)
            raise RuntimeError(
                f"{key} seed {seed}: this model code has fingerprint {code['fingerprint']}, but {key} seed {other} "
                f"({path}) was trained with fingerprint {record['fingerprint']} (commit {commit_of}); their "
                f"fixed-batch log-probabilities differ by "
                + (f"up to {gap:.3g}, more than {TOLERANCE:g}" if gap != float("inf") else "an unknown amount")
                + f". One system's seeds must come from one model code: train this seed with the code of commit "
                f"{commit_of} (git worktree add DIR {commit_of}; run posmix-claims from DIR), or keep this code's runs of "
                f"{key} in a results folder of their own (--results), or remove {key}'s runs from "
                f"{os.path.dirname(os.path.dirname(path))} to train every seed again with this code")


# ---- one run ----------------------------------------------------------------------------------------

def run_one(opts, lay: Layout, system: StudySystem, seed: int, core: Optional[int]) -> dict:
    """Train, average, decode (and freeze) one system with one seed; its result.json holds what it measured,
    what it cost and where it ran. The averaged model stays in the study folder (a test set added later is
    decoded from it); the other checkpoints are removed."""
    key = system.key
    run_dir = lay.run_dir(key, seed)
    os.makedirs(run_dir, exist_ok=True)
    env = {"OMP_NUM_THREADS": str(opts.threads)}
    launcher = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []

    def run(cmd, **kw):
        return pipeline.run(launcher + cmd, env=env, **kw)

    train_json = os.path.join(run_dir, "train.json")
    kept = {}  # what an earlier pass recorded (decoding rates, parameters, the frozen model): a test set added later
    if os.path.isfile(lay.result(key, seed)):  # or the oracle-length control decodes from the kept averaged model
        with open(lay.result(key, seed)) as f:
            kept = json.load(f)
    averaged = os.path.join(run_dir, "averaged.pt")
    if not os.path.isfile(train_json) and not (kept and os.path.isfile(averaged)):
        code = commit()  # before training: the checkout may move on while it runs
        code.update(code_fingerprint(lay, key, seed, run))
        check_fingerprint(opts, lay, key, seed, code)
        train_log = os.path.join(run_dir, "train.log")
        earlier = set_aside_interrupted_log(train_log)  # fairseq-train resumes from the part's last checkpoint
        t0 = time.time()
        with LoadMonitor() as load:
            run(train_cmd(opts, lay, system, seed), log=train_log)
        seconds = time.time() - t0 + sum(logged_seconds(p) for p in earlier)  # the load is the last part's
        trained = {"train_seconds": round(seconds, 1), **load.summary(), **code, "machine": machine(),
                   "threads": opts.threads, "core": core, "date": time.strftime("%Y-%m-%d"),
                   **training_summary(*earlier, train_log)}
        run(average_cmd(opts, lay, key, seed), log=os.path.join(run_dir, "average.log"))
        trained["averaged"] = open(os.path.join(run_dir, "average.log")).read().strip().splitlines()[-1].split(" -> ")[0]
        for name in os.listdir(os.path.join(run_dir, "checkpoints")):  # the averaged model is what is kept
            os.remove(os.path.join(run_dir, "checkpoints", name))
        with open(train_json, "w") as f:
            json.dump(trained, f, indent=2)
        log(f"{key} seed {seed}: trained in {trained['train_seconds']:.0f} s (load {trained['load_1min_mean']}), "
            f"best validation at update {trained['best_update']} of {trained['last_update']}")
    trained = {}
    if os.path.isfile(train_json):
        with open(train_json) as f:
            trained = json.load(f)
    result = {**kept, "system": key, "seed": seed, "label": system.label,
              "train_flags": shlex.join(train_cmd(opts, lay, system, seed)[
                  train_cmd(opts, lay, system, seed).index("--arch"):]), **trained}
    decode_missing(opts, lay, system, seed, result, run)
    decode_at_reference_length(opts, lay, system, seed, result, run)
    with open(lay.result(key, seed), "w") as f:
        json.dump(result, f, indent=2)
    if opts.results:
        export_run(opts, lay, key, seed)
    return result


def decode_missing(opts, lay: Layout, system: StudySystem, seed: int, result: dict, run) -> None:
    """Decodes the test sets this run has no hypotheses of yet (all of them after training)."""
    averaged = os.path.join(lay.run_dir(system.key, seed), "averaged.pt")
    rates = result.setdefault("decode_tokens_per_second", {})
    missing = [t for t in TEST_SETS if not os.path.isfile(lay.gen(system.key, seed, t))]
    if not missing:
        return
    t1 = time.time()
    for test in missing:
        gen_log = os.path.join(lay.run_dir(system.key, seed), f"generate.{test}.log")
        out = lay.gen(system.key, seed, test)
        run(generate_cmd(opts, lay, system, averaged, test), stdout=out + ".part", log=gen_log)
        os.replace(out + ".part", out)
        rates[test] = decoding_rate(gen_log)
    result["decode_seconds"] = round(result.get("decode_seconds", 0) + time.time() - t1, 1)
    result["parameters"] = model_parameters(averaged, data_bin(lay, system))
    if system.freeze and "frozen" not in result:
        frozen = os.path.join(lay.run_dir(system.key, seed), "search.pt")
        run(pipeline.freeze_command(averaged, frozen), log=os.path.join(lay.run_dir(system.key, seed), "freeze.log"))
        gen_log = os.path.join(lay.run_dir(system.key, seed), "generate.test.frozen.log")
        run(generate_cmd(opts, lay, system, frozen, "test"), stdout=lay.gen(system.key, seed, "test", True), log=gen_log)
        trained = pipeline.hypotheses(lay.gen(system.key, seed, "test"))
        searched = pipeline.hypotheses(lay.gen(system.key, seed, "test", True))
        result["frozen"] = {"same_translations": sum(trained[i] == searched.get(i) for i in trained),
                            "sentences": len(trained), "parameters": model_parameters(frozen, data_bin(lay, system)),
                            "decode_tokens_per_second": decoding_rate(gen_log)}


def decode_at_reference_length(opts, lay: Layout, system: StudySystem, seed: int, result: dict, run) -> None:
    """Decodes the test sets this run has no oracle-length hypotheses of yet: every hypothesis as long as its
    reference in pieces (``--match-target-len``), so that two systems compare at equal length."""
    averaged = os.path.join(lay.run_dir(system.key, seed), "averaged.pt")
    missing = [t for t in TEST_SETS if not os.path.isfile(lay.gen(system.key, seed, t, oracle=True))]
    if not missing:
        return
    t0 = time.time()
    for test in missing:
        out = lay.gen(system.key, seed, test, oracle=True)
        run(generate_cmd(opts, lay, system, averaged, test, oracle=True), stdout=out + ".part",
            log=os.path.join(lay.run_dir(system.key, seed), f"generate.{test}.oracle.log"))
        os.replace(out + ".part", out)
    result["oracle_decode_seconds"] = round(result.get("oracle_decode_seconds", 0) + time.time() - t0, 1)


def run_queue(opts, lay: Layout, runs: List[tuple]) -> None:
    """(system, seed) runs in order, ``opts.jobs`` at a time; on a CPU job k runs on core k, on a GPU all
    jobs share it."""
    queue, lock, failures = list(runs), threading.Lock(), []

    def worker(core):
        while True:
            with lock:
                if not queue or failures:
                    return
                key, seed = queue.pop(0)
            log(f"{key} seed {seed}: training ({SYSTEMS[key].label})" + (f" on core {core}" if core is not None else ""))
            try:
                run_one(opts, lay, SYSTEMS[key], seed, core)
            except BaseException as e:  # the other workers stop taking runs; the error is raised below
                with lock:
                    failures.append((key, seed, e))

    cores = list(range(opts.jobs)) if opts.jobs > 1 and opts.cpu else [None] * opts.jobs
    threads = [threading.Thread(target=worker, args=(c,)) for c in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        key, seed, e = failures[0]
        raise SystemExit(f"posmix-claims: {key} seed {seed} failed: {e}")


# ---- the results folder -------------------------------------------------------------------------------

def results_run_dir(results: str, key: str, seed: int) -> str:
    return os.path.join(results, key, f"seed{seed}")


def finished_runs(results: str) -> Dict[str, List[int]]:
    """system -> the seeds with a result in the results folder."""
    found: Dict[str, List[int]] = {}
    for key in SYSTEMS:
        folder = os.path.join(results, key)
        if not os.path.isdir(folder):
            continue
        seeds = sorted(int(d[4:]) for d in os.listdir(folder)
                       if d.startswith("seed") and os.path.isfile(os.path.join(folder, d, "result.json")))
        if seeds:
            found[key] = seeds
    return found


def hyp_lines(gen_out: str) -> List[str]:
    return [f"H-{i}\t0\t{h}\n" for i, h in sorted(pipeline.hypotheses(gen_out).items())]


def export_run(opts, lay: Layout, key: str, seed: int) -> None:
    """The run's result.json and its hypotheses (fairseq-generate's H- lines, gzipped) in --results:
    ``hyp.<set>.txt.gz``, ``hyp.<set>.frozen.txt.gz`` and ``hyp.<set>.oracle.txt.gz`` (at the references'
    lengths)."""
    target = results_run_dir(opts.results, key, seed)
    os.makedirs(target, exist_ok=True)
    shutil.copyfile(lay.result(key, seed), os.path.join(target, "result.json"))
    for test in TEST_SETS:
        for gen in (lay.gen(key, seed, test), lay.gen(key, seed, test, frozen=True), lay.gen(key, seed, test, oracle=True)):
            if os.path.isfile(gen):
                name = os.path.basename(gen).replace("generate.", "hyp.") + ".gz"
                with gzip.GzipFile(os.path.join(target, name), "wb", compresslevel=9, mtime=0) as f:
                    f.write("".join(hyp_lines(gen)).encode("utf-8"))  # mtime 0: the same bytes for the same lines


def import_run(opts, lay: Layout, key: str, seed: int) -> bool:
    """A run finished earlier (its --results entry) restored into the study folder; False if none."""
    source = results_run_dir(opts.results, key, seed)
    if not os.path.isfile(os.path.join(source, "result.json")):
        return False
    os.makedirs(lay.run_dir(key, seed), exist_ok=True)
    for name in os.listdir(source):
        if name.startswith("hyp.") and name.endswith(".gz"):
            with gzip.open(os.path.join(source, name), "rt", encoding="utf-8") as f, open(
                    os.path.join(lay.run_dir(key, seed), name[:-3].replace("hyp.", "generate.")), "w",
                    encoding="utf-8") as out:
                out.write(f.read())
    if not os.path.isfile(lay.result(key, seed)):
        shutil.copyfile(os.path.join(source, "result.json"), lay.result(key, seed))
    return True


def pending(opts, lay: Layout, runs: List[tuple]) -> List[tuple]:
    """The runs still to train or decode: a run kept in --results (or this study folder) counts as done
    unless this folder still has its averaged model and a test set is missing, as decoded or at the references'
    lengths (then it decodes it). A run kept without its averaged model stays as it is."""
    todo = []
    for key, seed in runs:
        kept = opts.results and os.path.isfile(os.path.join(results_run_dir(opts.results, key, seed), "result.json"))
        if kept:
            import_run(opts, lay, key, seed)
        done = os.path.isfile(lay.result(key, seed))
        averaged = os.path.isfile(os.path.join(lay.run_dir(key, seed), "averaged.pt"))
        complete = all(os.path.isfile(lay.gen(key, seed, t, oracle=oracle)) for t in TEST_SETS for oracle in (False, True))
        if not done or (averaged and not complete):
            todo.append((key, seed))
    return todo
