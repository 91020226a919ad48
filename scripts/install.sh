#!/usr/bin/env bash
# Installs posmix_fairseq into an existing Python environment (the active one, or $PYTHON).
#   bash scripts/install.sh            # keep the torch and fairseq that work here; install what is missing
#   bash scripts/install.sh --check    # only say what is there and what is missing (installs nothing)
# A torch or fairseq that imports is never replaced (a lab fork, a git checkout, a CUDA build). Where
# one is missing it is installed: torch 2.13.0 and fairseq-fixed 0.12.3.1 as tested (constraints.txt).
# Where one is there but does not import, the script stops and says why instead of replacing it.
# Then the plugin itself: `pip install -e .` (its requirements name neither torch nor fairseq).
# For a fresh, separate environment with the whole tested stack use `bash scripts/setup.sh` (.venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
CHECK_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --check) CHECK_ONLY=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$arg' (valid: --check, --help)" >&2; exit 2 ;;
  esac
done
command -v "$PY" >/dev/null || { echo "install.sh: no '$PY' on PATH; set PYTHON=/path/to/python" >&2; exit 2; }
# The check module uses the standard library only, so it runs before the package is installed.
envcheck() { "$PY" -c "import runpy, sys; sys.argv = ['environment'] + sys.argv[1:]; \
runpy.run_path('posmix_fairseq/harness/environment.py', run_name='__main__')" "$@"; }
status() { "$PY" -c "import importlib.util as u, sys; m = sys.argv[1]
if u.find_spec(m) is None: print('missing')
else:
    try: __import__(m); print('ok')
    except Exception as e: print('broken')" "$1" 2>/dev/null; }
if [ "$CHECK_ONLY" = 1 ]; then
  envcheck; exit $?
fi
pip() { "$PY" -m pip --disable-pip-version-check "$@"; }
torch_state=$(status torch)
fairseq_state=$(status fairseq)
for m in torch fairseq; do
  state=${m}_state
  if [ "${!state}" = broken ]; then
    envcheck || true
    echo "install.sh: $m is installed but does not import (above); fix or remove it first: this script never replaces an installed $m." >&2
    exit 1
  fi
done
if [ "$torch_state" = missing ]; then
  echo "install.sh: torch is missing: installing torch==2.13.0 (constraints.txt; for a CUDA build install torch yourself first)"
  pip install -c constraints.txt torch==2.13.0
else
  echo "install.sh: keeping the installed torch"
fi
if [ "$fairseq_state" = missing ]; then
  echo "install.sh: fairseq is missing: installing fairseq-fixed==0.12.3.1 (built against the torch above)"
  pip install "numpy<2" cython "setuptools<81"
  pip install --no-build-isolation fairseq-fixed==0.12.3.1
else
  echo "install.sh: keeping the installed fairseq"
fi
# The plugin and its own requirements (sacrebleu, sentencepiece, sacremoses, matplotlib, tensorboardX);
# pip's default strategy upgrades nothing that already satisfies them.
if "$PY" -c "import setuptools" 2>/dev/null; then
  pip install --no-build-isolation -e .   # no download of a build backend where one is installed
else
  pip install -e .
fi
envcheck --require torch,fairseq,sacrebleu,sentencepiece,sacremoses
