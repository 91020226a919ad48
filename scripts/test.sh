#!/usr/bin/env bash
# The test suite, exactly as CI runs it: sets up .venv if needed (idempotent), then pytest.
# Multi30k (the slow learning test) is read from $POSMIX_MULTI30K, default ../shared/data/multi30k.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export POSMIX_MULTI30K="${POSMIX_MULTI30K:-$(cd .. && pwd)/shared/data/multi30k}"
# Two workers (pytest-xdist), one file per worker at a time (module fixtures are built once), one torch
# thread each: the machine's two cores run two tests instead of one test on two threads. The files go out in
# the order tests/conftest.py gives them (the longest first), not xdist's default (the most tests first).
# POSMIX_TEST_WORKERS=0 runs in this process.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
WORKERS="${POSMIX_TEST_WORKERS:-2}"
PARALLEL=()
if [ "$WORKERS" != "0" ]; then PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder); fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${PARALLEL[@]}" tests "$@"
