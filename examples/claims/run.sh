#!/usr/bin/env bash
# The five papers' headline claims measured on Multi30k de->en (docs/reproduction.md): BPE, a length-capped
# training split, every system trained with several seeds (5 for the Transformer, 3 for the others) until
# validation stops improving or the update cap, checkpoint averaging, beam search, BLEU with its brevity
# penalty and precisions, intervals over seeds and sentences, and the page of verdicts. Two studies share the
# data: one at equal updates (2,500, learning speed; on a 2-core CPU with one thread each run takes 21-39
# minutes, measured 2026-11-28/29), and the converged one (validation every epoch, patience 5, a safety cap of
# 30,000 updates that a converged run never reaches).
#
#   RAW=DIR bash examples/claims/run.sh                  # every system and seed, output in ./claims
#   RAW=DIR ROWS=gpa-1,gpa-2 bash examples/claims/run.sh # only the systems those rows compare
#   RAW=DIR PLAN=1 bash examples/claims/run.sh           # every command and the time it needs; runs nothing
#   RAW=DIR CONVERGED=1 bash examples/claims/run.sh      # the converged study on this machine, one run at a time
#   RAW=DIR GPU=1 JOBS=16 bash examples/claims/run.sh    # the converged study on one GPU, 16 runs at once
#
# RAW holds the raw {train,val,test_2016_flickr}.{de,en}[.gz] of Multi30k (the public multi30k/dataset
# repository, data/task1/raw). OUT (default ./claims) is the study's folder, RESULTS (default OUT/results,
# OUT/results-converged with CONVERGED=1, OUT/results-gpu with GPU=1) keeps each finished run's result and
# hypotheses: a stopped run continues where it stopped, on this machine or another. Runs with the python of the active environment (or $PYTHON).
set -euo pipefail
: "${RAW:?set RAW to the folder of Multi30k raw text, e.g. RAW=~/data/multi30k/data/task1/raw}"
OUT=${OUT:-claims}
PY=${PYTHON:-python}
args=(--data-dir "$RAW" -s de -t en --out "$OUT")
CONVERGED_RULE=(--validate-every 0 --patience 5 --max-update 30000)
if [ -n "${GPU:-}" ]; then
  args+=(--device cuda --jobs "${JOBS:-16}" "${CONVERGED_RULE[@]}" --results "${RESULTS:-$OUT/results-gpu}")
elif [ -n "${CONVERGED:-}" ]; then
  args+=("${CONVERGED_RULE[@]}" --threads 1 --results "${RESULTS:-$OUT/results-converged}")
else
  args+=(--results "${RESULTS:-$OUT/results}")
fi
if [ -n "${ROWS:-}" ]; then args+=(--rows "$ROWS"); fi
if [ -n "${PAGE:-}" ]; then args+=(--page "$PAGE"); fi
if [ -n "${PLAN:-}" ]; then args+=(--plan); fi
exec "$PY" -m posmix_fairseq.harness.evaluation.claims "${args[@]}" "$@"
