"""The stages of every recipe (examples/<task>/run.sh sources examples/common/stages.sh, which runs
``python -m posmix_fairseq.harness.recipes.stages``), and their commands.

Stages: download, prepare, preprocess, train, average, generate, score (the default ``STAGES``), and
the optional lengthbins, concat (PEA 4.2) and contrastive (HC Table 4). Each stage logs
"[recipe HH:MM:SS] <stage>: ..." and runs its commands one after the other; a failing command stops
the recipe with its exit status. With ``PLAN=1`` nothing runs: every command is printed, then the
plan (:mod:`.plan`): the effective batch, the learning-rate schedule, the checkpoints kept and their
disk, the test set's longest sentence against the model's limits, the settings the paper does not
state, and the data sources.
"""
import math
import os
import glob
import shlex
import shutil
import sys
import time
from typing import List, Optional

import posmix_fairseq

from .. import pipeline
from .epoch import estimate_updates_per_epoch, updates_per_epoch
from .plan import plan_report
from .settings import TEST_SIZES, Recipe, RecipeError, parse_average, resolve

DEFAULT_STAGES = ["download", "prepare", "preprocess", "train", "average", "generate", "score"]
ALL_STAGES = DEFAULT_STAGES + ["lengthbins", "concat", "contrastive", "speed"]
LINGEVAL97_URL = "https://raw.githubusercontent.com/rsennrich/lingeval97/master/lingeval97.json"


def shell_line(cmd: List[str], stdout: Optional[str] = None, tee: Optional[str] = None) -> str:
    line = " ".join(shlex.quote(c) for c in cmd)
    if stdout:
        line += f" > {shlex.quote(stdout)}"
    if tee:
        line += f" | tee {shlex.quote(tee)}"
    return line


class Runner:
    """Runs commands through the pipeline driver (:func:`..pipeline.run`), or with ``plan`` prints them."""

    def __init__(self, plan: bool = False, stream=None):
        self.plan = plan
        self.stream = stream or sys.stdout
        self.commands: List[str] = []

    def log(self, message: str):
        print(f"[recipe {time.strftime('%H:%M:%S')}] {message}", file=self.stream, flush=True)

    def note(self, message: str):
        """A line of the plan (nothing when running)."""
        if self.plan:
            print(f"  # {message}", file=self.stream, flush=True)

    def run(self, cmd: List[str], stdout: Optional[str] = None, tee: Optional[str] = None):
        cmd = [str(c) for c in cmd]
        line = shell_line(cmd, stdout, tee)
        self.commands.append(line)
        if self.plan:
            print(f"  $ {line}", file=self.stream, flush=True)
            return
        self.stream.flush()
        try:
            if stdout:
                pipeline.run(cmd, stdout=stdout)
            else:
                pipeline.run(cmd, log=tee, on_line=self.stream.write)
        except pipeline.StepFailed as e:
            raise RecipeError(e.returncode)


def py(module: str, *args) -> List[str]:
    return pipeline.module_command(module, *args)


GPU_STAGES = ("train", "generate", "concat", "contrastive", "speed")  # the stages that run a model


def cpu_requested(device_flags: str) -> bool:
    return "--cpu" in device_flags.split()


def visible_gpus() -> int:
    """The GPUs torch sees (0 on a host without one)."""
    import torch  # torch loads in seconds: only to count the GPUs

    return torch.cuda.device_count()


def check_device(recipe: Recipe, stages: List[str]):
    """A recipe of the papers' sizes (small, base, big: GPU-scale) whose stages run a model needs a GPU
    unless DEVICE_FLAGS=--cpu asks for the CPU; the CPU sizes (tiny, mini) run wherever they are."""
    if recipe.size in TEST_SIZES or cpu_requested(recipe.get("DEVICE_FLAGS")):
        return
    first = next((i for i, s in enumerate(stages) if s in GPU_STAGES), None)
    if first is not None and visible_gpus() == 0:
        before = " ".join(stages[:first])
        raise RecipeError(
            f"SIZE={recipe.size} (GPUS={recipe['GPUS']}) is a GPU-scale recipe: its stage '{stages[first]}' runs the "
            f"model on GPUs, but torch sees none here ({sys.executable}: torch.cuda.device_count() == 0). Run it on a "
            "GPU host, or ask for the CPU explicitly with DEVICE_FLAGS=--cpu"
            + (f"; the stages before it need no GPU: STAGES=\"{before}\"" if before else ""))


class Stages:
    def __init__(self, recipe: Recipe, runner: Runner):
        self.r = recipe
        self.run = runner
        self.out = recipe["OUT"]
        self.raw = recipe["RAW"]
        self.src, self.tgt, self.name = recipe["SRC"], recipe["TGT"], recipe["NAME"]
        self.data_bin = os.path.join(self.out, "data-bin")
        self.prep = os.path.join(self.out, "prep")
        self.ckpt_dir = os.path.join(self.out, "checkpoints", self.name)
        self.final = os.path.join(self.ckpt_dir, "checkpoint_final.pt")
        self.gen_out = os.path.join(self.out, f"generate.{self.name}.txt")
        self.untranslated = os.path.join(self.out, f"untranslated.{self.name}.json")
        self.facts = {}  # values the stages computed (updates per epoch, GPUs, ...) for the plan

    # --- helpers ------------------------------------------------------------------------------
    def spm_model(self) -> str:
        return os.path.join(self.prep, f"spm.{self.tgt}.model" if self.r.flag("SEPARATE") else "spm.model")

    def detok_flags(self) -> List[str]:
        flags = []
        if self.r.flag("MOSES"):
            flags += ["--moses-detok", self.tgt]
        if self.r.flag("LOWERCASE"):
            flags += ["--lowercase"]
        return flags

    def reference(self) -> str:
        return os.path.join(self.prep, "raw", f"test.{self.tgt}")

    def raw_present(self) -> bool:
        return all(glob.glob(os.path.join(self.raw, f"train.{lang}*")) for lang in (self.src, self.tgt))

    # --- stages -------------------------------------------------------------------------------
    def download(self):
        if self.raw_present():
            self.run.log(f"download: raw data present in {self.raw} (train.{self.src}, train.{self.tgt}), "
                         "skipping the download")
            return
        self.run.log(f"download: no raw data in {self.raw}; fetching {self.r['TASK']} for {self.r.paper} (needs internet; "
                     "sources: posmix_fairseq/harness/recipes/download.py)")
        if not self.run.plan:
            os.makedirs(self.raw, exist_ok=True)
        self.run.run(py("posmix_fairseq.harness.recipes.download", self.r["TASK"], self.raw, "-s", self.src, "-t",
                        self.tgt, "--paper", self.r.paper, *(["--mtdata"] if self.r.flag("MTDATA") else [])))

    def prepare(self):
        r = self.r
        self.run.log(f"prepare: normalise/tokenise (moses={r['MOSES']} lowercase={r['LOWERCASE']} "
                     f"romanian={r['ROMANIAN']}), {r['SPM_TYPE']} {r['VOCAB']}"
                     + (f"/{r['VOCAB_TGT']}" if r.flag("SEPARATE") else "") + f" (separate={r['SEPARATE']})")
        cmd = py("posmix_fairseq.harness.recipes.prepare_data", self.raw, self.prep, "-s", self.src, "-t", self.tgt,
                 "--vocab-size", r["VOCAB"], "--model-type", r["SPM_TYPE"])
        if r.flag("SEPARATE"):
            cmd += ["--separate", "--target-vocab-size", r["VOCAB_TGT"]]
        for key, flag in (("MOSES", "--moses"), ("LOWERCASE", "--lowercase"), ("ROMANIAN", "--romanian")):
            if r.flag(key):
                cmd.append(flag)
        for key, flag in (("MAX_TRAIN", "--max-train-sentences"), ("MAX_EVAL", "--max-eval-sentences"),
                          ("TEST_SET", "--test-name")):
            if r.get(key):
                cmd += [flag, r[key]]
        self.run.run(cmd)

    def preprocess(self):
        self.run.log(f"preprocess: fairseq-preprocess -> {self.data_bin}")
        if self.run.plan:
            self.run.run(["rm", "-rf", self.data_bin])
        elif os.path.isdir(self.data_bin):
            shutil.rmtree(self.data_bin)
        self.run.run(pipeline.preprocess_command(
            self.src, self.tgt, self.data_bin, *(os.path.join(self.prep, split) for split in ("train", "valid", "test")),
            joined=not self.r.flag("SEPARATE"), workers=2))

    def train_flags(self, update_freq: int, interval: int, validate_interval: int = 0) -> List[str]:
        """fairseq-train's flags after the data directory."""
        r = self.r
        kind, n = parse_average(r["AVG"])
        flags = ["--task", "translation_window", "--average-window", str(n),
                 "--average-from", "last" if kind == "last" else "best", "--arch", r["ARCH"]]
        share = r["SHARE"]
        if r.flag("SEPARATE") and share == "all":
            share = "none"
        flags += {"all": ["--share-all-embeddings"], "decoder": ["--share-decoder-input-output-embed"],
                  "none": []}[share]
        flags += ["--optimizer", "adam", "--adam-betas", r["ADAM_BETAS"], "--adam-eps", r["ADAM_EPS"],
                  "--clip-norm", "0.0", "--weight-decay", r["WEIGHT_DECAY"], "--lr", r["LR"]]
        sched = r["SCHEDULER"]
        if sched == "inverse_sqrt":
            flags += ["--lr-scheduler", "inverse_sqrt", "--warmup-updates", r["WARMUP"], "--warmup-init-lr",
                      r["WARMUP_INIT_LR"]]
        elif sched == "polynomial_decay":
            flags += ["--lr-scheduler", "polynomial_decay", "--total-num-update", r["MAX_UPDATE"], "--warmup-updates",
                      r["WARMUP"], "--end-learning-rate", r["END_LR"]]
        elif sched == "validation_plateau":
            flags += ["--lr-scheduler", "validation_plateau", "--lr-shrink", r["LR_SHRINK"], "--lr-patience",
                      r["LR_PATIENCE"]]
        else:
            raise RecipeError(f"SCHEDULER={sched}: valid values are inverse_sqrt, polynomial_decay, validation_plateau")
        flags += ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", r["LABEL_SMOOTHING"],
                  "--max-tokens", r["MAX_TOKENS"], "--update-freq", str(update_freq), "--max-update", r["MAX_UPDATE"],
                  "--save-dir", self.ckpt_dir, "--save-interval-updates", str(interval),
                  "--keep-interval-updates", "-1", "--no-epoch-checkpoints",
                  "--best-checkpoint-metric", r["BEST_METRIC"]]
        if validate_interval:
            flags += ["--validate-interval-updates", str(validate_interval)]
        flags += ["--log-format", "simple", "--log-interval", r.get("LOG_INTERVAL", "100"), "--seed", r.get("SEED", "1")]
        for key in ("SIZE_FLAGS", "DEVICE_FLAGS", "TRAIN_FLAGS"):
            flags += shlex.split(r.get(key))
        return flags

    def model_flags(self) -> List[str]:
        """The flags that decide the model (for the plan's meta-device model)."""
        return self.train_flags(1, 1)

    def schedule(self):
        """(gpus, update_freq, save interval, validate interval) as training will run."""
        r = self.r
        if self.run.plan or "GPUS" in r.values and r.values["GPUS"].source == "environment":
            gpus = r.int("GPUS")
        elif cpu_requested(r.get("DEVICE_FLAGS")):
            gpus = 1  # one training process on the CPU
        else:
            gpus = visible_gpus()
            if gpus == 0:  # a CPU size without --cpu (check_device stops the GPU sizes): fairseq trains on the CPU
                gpus = 1
        if r.values["UPDATE_FREQ"].source == "environment":
            freq = r.update_freq()
        else:
            freq = max(1, round(r.int("EFFECTIVE_TOKENS") / (r.int("MAX_TOKENS") * gpus)))
        interval = r.int("SAVE_INTERVAL_UPDATES") if "SAVE_INTERVAL_UPDATES" in r.values else 0
        validate, per_epoch = 0, r.int("VALIDATIONS_PER_EPOCH")
        if per_epoch > 0 and interval and r.values["SAVE_INTERVAL_UPDATES"].source == "environment":
            validate = interval
        elif per_epoch > 0:  # PEA 4.1: a checkpoint (and a validation) 8 times per epoch
            if os.path.isfile(os.path.join(self.data_bin, f"dict.{self.src}.txt")):
                updates = updates_per_epoch([self.data_bin] + self.train_flags(freq, 1), gpus)
                how = "from the binarized training data"
            else:
                updates = estimate_updates_per_epoch(r, freq, gpus)
                how = "estimated (no binarized data yet): the paper's training pairs x mean tokens per pair"
            interval = validate = max(1, math.ceil(updates / per_epoch))
            self.facts["updates_per_epoch"] = (updates, how)
        self.facts.update(gpus=gpus, update_freq=freq, save_interval=interval, validate_interval=validate)
        return gpus, freq, interval, validate

    def train(self):
        r = self.r
        gpus, freq, interval, validate = self.schedule()
        self.run.log(f"train: {self.name} = {' '.join([r['ARCH']] + shlex.split(r.get('TRAIN_FLAGS')))} ({r.paper}, {r.size}): {r['MAX_UPDATE']} "
                     f"updates x {r['MAX_TOKENS']} tokens x {gpus} GPU(s) x {freq}, lr {r['LR']} ({r['SCHEDULER']})"
                     + (f", validation and checkpoint every {interval} updates" if validate else ""))
        self.run.run(pipeline.train_command(self.data_bin, None, self.train_flags(freq, interval, validate)))

    def average(self):
        kind, n = parse_average(self.r["AVG"])
        if kind == "none":
            self.run.log(f"average: none for {self.r.paper}; using checkpoint_best.pt")
            best = os.path.join(self.ckpt_dir, "checkpoint_best.pt")
            if self.run.plan:
                self.run.run(["cp", best, self.final])
            else:
                shutil.copyfile(best, self.final)
            return
        self.run.log(f"average: {self.r['AVG']} checkpoints of {self.ckpt_dir}")
        self.run.run(py("posmix_fairseq.harness.evaluation.average", "--dir", self.ckpt_dir, f"--{kind}", n,
                        "--output", self.final))

    def generate_command(self, data: str, out: str, untranslated: str) -> List[str]:
        r = self.r
        return py("posmix_fairseq.harness.recipes.generate", data, "--path", self.final, "-s", self.src, "-t", self.tgt,
                  "--out", out, "--untranslated", untranslated, "--beam", r["BEAM"], "--lenpen", r["LENPEN"],
                  "--max-len-a", r["MAX_LEN_A"], "--max-len-b", r["MAX_LEN_B"],
                  "--max-tokens", r.get("GEN_MAX_TOKENS", "8000"), f"--device-flags={r.get('DEVICE_FLAGS')}",
                  *(["--", *shlex.split(r.get("GEN_FLAGS"))] if r.get("GEN_FLAGS") else []))

    def generate(self):
        self.run.log(f"generate: beam {self.r['BEAM']}, lenpen {self.r['LENPEN']}, max length "
                     f"{self.r['MAX_LEN_A']} x source + {self.r['MAX_LEN_B']}")
        self.run.run(self.generate_command(self.data_bin, self.gen_out, self.untranslated))

    def score(self):
        r = self.r
        self.run.log(f"score: posmix-score (tokenize {r['TOKENIZE']})")
        cmd = pipeline.score_command([self.gen_out], [self.name], self.reference(), flags=[
                 "--spm-model", self.spm_model(), "--src", os.path.join(self.prep, "raw", f"test.{self.src}"),
                 "--tokenize", r["TOKENIZE"], *self.detok_flags(), "--untranslated", self.untranslated,
                 "--json", os.path.join(self.out, f"scores.{self.name}.json"),
                 "--csv", os.path.join(self.out, f"scores.{self.name}.csv")])
        for model in r.get("COMET_MODEL").split():  # one or more COMET-family models
            cmd += ["--comet-model", model]
        if r.get("BLEURT_CHECKPOINT"):
            cmd += ["--bleurt-checkpoint", r["BLEURT_CHECKPOINT"]]
        cmd += shlex.split(r.get("SCORE_FLAGS"))
        self.run.run(cmd, tee=os.path.join(self.out, f"scores.{self.name}.md"))

    def lengthbins(self):
        """PEA Table 2 / HC Fig. 4: metrics per source-length group of the ordinary test set."""
        r = self.r
        bins = r.get("LENGTH_BINS") or "25,50,75,100"
        by = r.get("LENGTH_BY") or "src"
        count = "pieces" if by == "src" else "words"  # generation reads sources only: no T- (reference) pieces
        self.run.log(f"lengthbins: groups {bins} by {by} length ({count})")
        self.run.run(py("posmix_fairseq.harness.evaluation.length_bins", self.gen_out, "--names", self.name, "--spm-model",
                        self.spm_model(), "--ref", self.reference(), "--src",
                        os.path.join(self.prep, "raw", f"test.{self.src}"), "--by", by, "--count", count,
                        "--bins", bins, "--tokenize", r["TOKENIZE"], *self.detok_flags(),
                        "--untranslated", self.untranslated,
                        "--json", os.path.join(self.out, f"length-bins.{self.name}.json")),
                     tee=os.path.join(self.out, f"length-bins.{self.name}.md"))

    def concat(self):
        """PEA 4.2, Tables 3-4: consecutive pairs joined, binarized with the training dictionaries,
        translated (limits raised where the model extrapolates) and scored per source-length group."""
        r = self.r
        bins = r.get("CONCAT_BINS") or "25,50,75,100"
        concat, concat_bin = os.path.join(self.out, "concat"), os.path.join(self.out, "data-bin-concat")
        self.run.log(f"concat: concatenated test set, groups {bins}")
        self.run.run(py("posmix_fairseq.harness.evaluation.concat_testset", "--src", os.path.join(self.prep, f"test.{self.src}"),
                        "--tgt", os.path.join(self.prep, f"test.{self.tgt}"), "-s", self.src, "-t", self.tgt,
                        "--out", concat, "--bins", bins))
        self.run.run(py("posmix_fairseq.harness.evaluation.concat_testset", "--src", os.path.join(self.prep, "raw", f"test.{self.src}"),
                        "--tgt", self.reference(), "-s", self.src, "-t", self.tgt,
                        "--out", os.path.join(concat, "raw")))
        if self.run.plan or not os.path.isdir(concat_bin):
            self.run.run(pipeline.preprocess_command(
                self.src, self.tgt, concat_bin, testpref=os.path.join(concat, "concat"),
                srcdict=os.path.join(self.data_bin, f"dict.{self.src}.txt"),
                tgtdict=os.path.join(self.data_bin, f"dict.{self.tgt}.txt"), workers=2))
        gen = os.path.join(self.out, f"generate-concat.{self.name}.txt")
        untranslated = os.path.join(self.out, f"untranslated-concat.{self.name}.json")
        self.run.run(self.generate_command(concat_bin, gen, untranslated))
        self.run.run(py("posmix_fairseq.harness.evaluation.length_bins", gen, "--names", self.name, "--spm-model", self.spm_model(),
                        "--ref", os.path.join(concat, "raw", f"concat.{self.tgt}"), "--src",
                        os.path.join(concat, "raw", f"concat.{self.src}"), "--by", "src", "--count", "pieces",
                        "--bins", bins, "--tokenize", r["TOKENIZE"], *self.detok_flags(), "--untranslated", untranslated,
                        "--json", os.path.join(self.out, f"concat-bins.{self.name}.json")),
                     tee=os.path.join(self.out, f"concat-bins.{self.name}.md"))

    def speed(self):
        """Decoding speed and peak memory with the measurement of the table it reproduces (SPEED_SETTING:
        gpa-4, GPA Table 4 on the CPU; hc, HC Tables 3 and 7 on a GPU); SPEED_FLAGS adds posmix-decode-speed
        flags (e.g. --runs 2)."""
        r = self.r
        setting = r.get("SPEED_SETTING") or "gpa-4"
        self.run.log(f"speed: posmix-decode-speed --setting {setting}")
        cmd = py("posmix_fairseq.harness.evaluation.decode_speed", self.data_bin, "--path", self.final, "--setting", setting,
                 "--json", os.path.join(self.out, f"speed.{self.name}.json"))
        if "--cpu" in r.get("DEVICE_FLAGS").split():
            cmd += ["--device", "cpu"]
        self.run.run(cmd + shlex.split(r.get("SPEED_FLAGS")), tee=os.path.join(self.out, f"speed.{self.name}.md"))

    def contrastive(self):
        """HC Table 4 / Fig. 5: LingEval97 (en->de), read from LINGEVAL97 (default RAW/lingeval97.json) or
        fetched from LingEval97's repository (needs internet)."""
        r = self.r
        if r.flag("SEPARATE"):
            raise RecipeError("contrastive: needs one joint SentencePiece model (SEPARATE=0)")
        path = r.get("LINGEVAL97") or os.path.join(self.raw, "lingeval97.json")
        if os.path.isfile(path):
            self.run.log(f"contrastive: LingEval97 present in {path}, skipping the download")
        else:
            url = r.get("LINGEVAL97_URL") or LINGEVAL97_URL
            self.run.log(f"contrastive: no {path}; fetching {url} (needs internet)")
            self.run.run([sys.executable, "-c", "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])",
                          url, path])
        flags = (["--moses"] if r.flag("MOSES") else []) + (["--lowercase"] if r.flag("LOWERCASE") else [])
        self.run.run(py("posmix_fairseq.harness.evaluation.contrastive", self.data_bin, "--path", self.final, "--set", path,
                        "-s", self.src, "-t", self.tgt, *flags, "--spm-model", os.path.join(self.prep, "spm.model"),
                        "--per-token", "--scores-out", os.path.join(self.out, f"contrastive-scores.{self.name}.txt"),
                        "--json", os.path.join(self.out, f"contrastive.{self.name}.json")),
                     tee=os.path.join(self.out, f"contrastive.{self.name}.md"))


def check_arch(recipe: Recipe):
    """A clear error for an arch that does not exist (VARIANT + the size's suffix)."""
    from fairseq.models import ARCH_MODEL_REGISTRY  # fairseq loads in seconds: only when an arch is checked

    posmix_fairseq.register()  # the package may have been imported before fairseq (then it registered nothing)

    arch = recipe["ARCH"]
    if arch not in ARCH_MODEL_REGISTRY:
        suffix = recipe.values["ARCH_SUFFIX"].value
        same = sorted(a for a in ARCH_MODEL_REGISTRY if a.endswith("_" + suffix) and not a.startswith("transformer"))
        raise RecipeError(f"ARCH={arch} is not registered (VARIANT={recipe['VARIANT']} with SIZE={recipe.size}'s suffix "
                          f"'{suffix}'); archs of this size: {', '.join(same)}")


def run_recipe(recipe: Recipe, plan: bool = False, stream=None) -> Stages:
    runner = Runner(plan, stream)
    stages = Stages(recipe, runner)
    names = recipe["STAGES"].split()
    unknown = [s for s in names if s not in ALL_STAGES]
    if unknown:
        raise RecipeError(f"STAGES: unknown stage '{unknown[0]}'; valid: {' '.join(ALL_STAGES)}")
    task = recipe["TASK"]
    if "the earlier name of" in recipe.values["PAPER"].source:
        runner.log(f"PAPER={recipe.paper}: {recipe.values['PAPER'].source}")
    runner.log(f"{task}: {recipe['ARCH']} ({recipe.paper} hyper-parameters, size {recipe.size}); raw {recipe['RAW']}; "
               f"work {recipe['OUT']}" + ("; PLAN: nothing runs, the commands are printed" if plan else ""))
    if not plan:
        check_device(recipe, names)
    if "train" in names or plan:
        check_arch(recipe)
    if not plan:
        os.makedirs(recipe["OUT"], exist_ok=True)
    for name in names:
        getattr(stages, name)()
    if plan:
        print(plan_report(recipe, stages), file=runner.stream, flush=True)
    runner.log(f"{task}: {'plan done' if plan else 'done'}")
    return stages


def main(argv=None):
    task = os.environ.get("TASK")
    if not task:
        raise SystemExit("recipe: TASK is not set (run examples/<task>/run.sh)")
    try:
        recipe = resolve(task, dict(os.environ))
    except ValueError as e:
        raise SystemExit(f"recipe: {e}")
    run_recipe(recipe, plan=os.environ.get("PLAN", "0") not in ("", "0"))


if __name__ == "__main__":
    main()
