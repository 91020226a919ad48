#!/usr/bin/env bash
# The test suite, exactly as CI runs it: sets up .venv if needed (idempotent), then pytest.
# Multi30k (the slow learning test) is read from $POSMIX_MULTI30K, default ../shared/data/multi30k.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export POSMIX_MULTI30K="${POSMIX_MULTI30K:-$(cd .. && pwd)/shared/data/multi30k}"
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests "$@"
