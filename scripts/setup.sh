#!/usr/bin/env bash
# Creates .venv (Python 3.11) with the pinned stack and installs posmix_fairseq in editable mode.
# Idempotent: a second run only re-checks what is installed (~20 s).
#   bash scripts/setup.sh           # full stack, including COMET/BLEURT evaluation extras
#   POSMIX_NO_EVAL=1 bash scripts/setup.sh   # skip unbabel-comet / bleurt-pytorch
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${POSMIX_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
C="-c constraints.txt"
pip install $C --upgrade pip wheel >/dev/null
pip install $C torch==2.13.0
pip install $C "numpy<2" cython "setuptools<81"
# Triton for posmix_fairseq.kernels (GPU kernels; the CPU tests run them in its interpreter).
# Linux x86-64 only (elsewhere pip ignores the requirement); the version torch 2.13.0 expects.
pip install $C "triton==3.7.1; platform_system == 'Linux' and platform_machine == 'x86_64'"
# fairseq-fixed is an sdist with C++/Cython extensions; build it against the torch above.
if ! "$VENV/bin/python" -c "import fairseq" 2>/dev/null; then
  pip install $C --no-build-isolation fairseq-fixed==0.12.3.1
fi
pip install $C sacrebleu sentencepiece pytest pytest-xdist
# tensorboardX: fairseq's --tensorboard-logdir (without it every fairseq command logs "Please install tensorboardX")
pip install $C tensorboardX
# posmix-score --moses-detok (Moses detokenisation) and the attention heatmaps (posmix-attention)
pip install $C sacremoses matplotlib
if [ -z "${POSMIX_NO_EVAL:-}" ]; then
  pip install $C unbabel-comet==2.2.7 bleurt-pytorch==0.0.1
fi
pip install $C --no-deps --no-build-isolation -e .
echo "setup: done ($("$VENV/bin/python" -c 'import torch, fairseq; print("torch", torch.__version__, "fairseq", fairseq.__version__)'))"
