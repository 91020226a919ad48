#!/usr/bin/env bash
# Fresh machine -> results: installs the pinned stack into .venv, then runs the main job
# (synthetic corpus, fairseq-preprocess, fairseq-train rPosNet + Transformer, posmix-freeze,
# fairseq-generate, sacreBLEU) and prints the side-by-side table. Extra arguments go to
# scripts/run_pipeline.py, e.g.  bash scripts/quickstart.sh --data-dir DIR -s en -t de
# Paths are the caller's: the job writes into ./runs/quickstart (or --out) of the current directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
exec "$root/.venv/bin/python" "$root/scripts/run_pipeline.py" "$@"
