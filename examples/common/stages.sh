# Shared entry of the per-task recipes: examples/<task>/run.sh sets TASK, sources this file and calls
# run_recipe, which runs the stages of posmix_fairseq/harness/recipes/stages.py with this checkout's package.
#
# Every setting (the task's data, the paper's hyper-parameters for SIZE=small|base|big, or tiny|mini for
# CPU tests) and where it comes from is in posmix_fairseq/harness/recipes/settings.py; each can be overridden
# from the environment under its name (PAPER, SIZE, VARIANT or ARCH, NAME, RAW, OUT, STAGES, MAX_UPDATE,
# MAX_TOKENS, GPUS, UPDATE_FREQ, LR, WARMUP, BEAM, LENPEN, AVG, SAVE_INTERVAL_UPDATES, VOCAB, TOKENIZE,
# TEST_SET, MAX_TRAIN, MAX_EVAL, TRAIN_FLAGS, DEVICE_FLAGS, GEN_FLAGS, COMET_MODEL, BLEURT_CHECKPOINT, ...).
#
#   PLAN=1 bash examples/<task>/run.sh     # print every command and the plan (batch, schedule, disk,
#                                          # test lengths against the model's limits, unstated settings,
#                                          # data sources); nothing runs, on the CPU in seconds
#   STAGES="generate score" bash examples/<task>/run.sh
set -euo pipefail

run_recipe() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  PY=${PY:-$root/.venv/bin/python}
  export TASK PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
  exec "$PY" -m posmix_fairseq.harness.recipes.stages
}
