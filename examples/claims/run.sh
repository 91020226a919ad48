#!/usr/bin/env bash
# The five papers' headline claims measured on Multi30k de->en (docs/reproduction.md): BPE, a length-capped
# training split, every system trained until validation stops improving, checkpoint averaging, beam search,
# BLEU/chrF++ with 95% intervals and paired p-values, and the page of verdicts. 21-39 minutes per
# system on a 2-core CPU with one thread (2,500 updates and four decodes, measured 2026-11-28); a GPU
# runs the grid in well under an hour.
#
#   RAW=DIR bash examples/claims/run.sh                  # all systems, output in ./claims
#   RAW=DIR ROWS=gpa-1,gpa-2 bash examples/claims/run.sh # only the systems those rows compare
#   RAW=DIR PLAN=1 bash examples/claims/run.sh           # every command and the budget; runs nothing
#
# RAW holds Multi30k's raw {train,val,test_2016_flickr}.{de,en}[.gz] (the public multi30k/dataset
# repository, data/task1/raw). OUT (default ./claims) is the study's folder, RESULTS (default
# OUT/results) keeps each finished system's result and hypotheses: a stopped run continues where it stopped,
# on this machine or another. Runs with the python of the active environment (or $PYTHON).
set -euo pipefail
: "${RAW:?set RAW to a folder of Multi30k's raw text (e.g. RAW=~/data/multi30k/data/task1/raw)}"
OUT=${OUT:-claims}
PY=${PYTHON:-python}
args=(--data-dir "$RAW" --src de --tgt en --out "$OUT" --results "${RESULTS:-$OUT/results}")
[ -n "${ROWS:-}" ] && args+=(--rows "$ROWS")
[ -n "${PAGE:-}" ] && args+=(--page "$PAGE")
[ -n "${PLAN:-}" ] && args+=(--plan)
exec "$PY" -m posmix_fairseq.harness.evaluation.claims "${args[@]}" "$@"
