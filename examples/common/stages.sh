# Shared entry of the per-task recipes: examples/<task>/run.sh sets TASK, sources this file and calls
# run_recipe, which runs the stages of posmix_fairseq/harness/recipes/stages.py with this checkout's package
# in the environment you have activated: the `python` on PATH (or $PYTHON), the one whose fairseq-train you
# use. It stops with what is missing there (and the command for each) when torch or fairseq does not import.
#
# Every setting (the task's data, the paper's hyper-parameters for SIZE=small|base|big, or tiny|mini for
# CPU tests) and where it comes from is in posmix_fairseq/harness/recipes/settings.py; each can be overridden
# from the environment under its name (PAPER, SIZE, VARIANT or ARCH, NAME, RAW, OUT, STAGES, MAX_UPDATE,
# MAX_TOKENS, GPUS, UPDATE_FREQ, LR, WARMUP, BEAM, LENPEN, AVG, SAVE_INTERVAL_UPDATES, VOCAB, TOKENIZE,
# TEST_SET, MAX_TRAIN, MAX_EVAL, TRAIN_FLAGS, DEVICE_FLAGS, GEN_FLAGS, COMET_MODEL, BLEURT_CHECKPOINT, MTDATA,
# ...).
# The sizes small, base and big train on GPUs: where torch sees none, the recipe stops unless
# DEVICE_FLAGS=--cpu asks for the CPU.
#
#   PLAN=1 bash examples/<task>/run.sh     # print every command and the plan (batch, schedule, disk,
#                                          # test lengths against the model's limits, unstated settings,
#                                          # data sources); nothing runs, on the CPU in seconds
#   STAGES="generate score" bash examples/<task>/run.sh
set -euo pipefail

run_recipe() {
  local root py report
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  py=${PYTHON:-python}
  if ! command -v "$py" >/dev/null 2>&1; then
    echo "recipe: PYTHON=$py: no such command. Activate the environment that has torch, fairseq and posmix_fairseq" \
         "(the one whose fairseq-train you use), or set PYTHON=/path/to/its/python" >&2
    exit 2
  fi
  export TASK PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
  if ! report=$("$py" -m posmix_fairseq.harness.environment --require torch,fairseq,sacrebleu,sentencepiece,sacremoses 2>&1); then
    printf '%s\n' "$report" >&2
    echo "recipe: $(command -v "$py") cannot run the recipes (above: what is missing or broken, and the command for" \
         "each). Activate the environment that has torch and fairseq (the one whose fairseq-train you use), or set" \
         "PYTHON=/path/to/its/python; bash scripts/install.sh installs what is missing into the active one" >&2
    exit 2
  fi
  exec "$py" -m posmix_fairseq.harness.recipes.stages
}
