#!/usr/bin/env bash
# Fresh machine -> results: installs the pinned stack into .venv, then runs the main job
# (synthetic corpus, fairseq-preprocess, fairseq-train rPosNet + Transformer, fairseq-generate,
# sacreBLEU) and prints the side-by-side table. Extra arguments go to scripts/run_pipeline.py,
# e.g.  bash scripts/quickstart.sh --data-dir DIR --src en --tgt de   (DIR: {train,valid,test}.{en,de})
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/run_pipeline.py "$@"
