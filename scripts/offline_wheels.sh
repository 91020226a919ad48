#!/usr/bin/env bash
# Gathers, on a machine that reaches the package registry, every wheel that posmix_fairseq needs on a
# GPU host without network beyond what the host has (torch, Triton, numpy, sacrebleu, sentencepiece,
# ...: scripts/gpu/host-packages.txt), for the host's Python; scripts/gpu/install.sh installs them
# there. The set stays within 64 MiB, so that it travels with a checkout.
#
#   bash scripts/offline_wheels.sh [DIR] [--python 3.12]      # default DIR: .whl (git-ignored)
#
# What it holds (about 22 MiB, plus an 18 MiB numpy fallback, for Python 3.12):
#   fairseq-fixed 0.12.3.1: the cp312 wheel (manylinux_2_28); for another Python, where no wheel
#     fits, its source: install.sh then builds it on the host with the host's compiler, torch,
#     Cython and numpy (minutes: 20 on a loaded 2-core machine);
#   hydra-core 1.3.2, omegaconf 2.3.0, bitarray, cffi, pycparser (fairseq's needs the host lacks),
#   antlr4-python3-runtime 4.9.3 (source only on the registry: built into a wheel here),
#   sacremoses (posmix-score --moses-detok), tensorboardX (setup.py's install_requires);
#   numpy-fallback/numpy 1.26.4, installed by install.sh only if fairseq's compiled modules fail to
#     import with the host's numpy 2.
# Then scripts/gpu/wheelset.py checks that the plugin's requirements close over the set plus the
# host's packages for the target Python, that every wheel fits it, and the size; it writes
# DIR/MANIFEST.txt. Any python3 with pip runs this (pip fetches for the target Python); PYTHON
# picks it (default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=.whl
TARGET_PY=3.12
while [ $# -gt 0 ]; do
  case "$1" in
    --python) TARGET_PY=${2:?--python needs a version such as 3.12}; shift 2 ;;
    --python=*) TARGET_PY=${1#--python=}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "offline_wheels.sh: unknown option $1 (valid: --python X.Y)" >&2; exit 2 ;;
    *) DIR=$1; shift ;;
  esac
done
if ! [[ "$TARGET_PY" =~ ^3\.[0-9]+$ ]]; then
  echo "offline_wheels.sh: --python $TARGET_PY: give major.minor, e.g. 3.12" >&2; exit 2
fi
PY=${PYTHON:-python3}
CP=cp${TARGET_PY/./}
pip() { "$PY" -m pip --disable-pip-version-check "$@"; }
# pip matches manylinux_2_N tags exactly: the glibc 2.17 ... 2.28 tags that the wheels below use
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
binary() {  # binary wheels for the target Python, no dependencies (each need is named here)
  pip download -q --no-deps --only-binary=:all: --python-version "$TARGET_PY" --implementation cp \
    --abi "$CP" --abi abi3 --abi none $PLATFORMS -d "$1" "${@:2}"
}

rm -rf "$DIR"
mkdir -p "$DIR/numpy-fallback"
echo "offline_wheels: gathering wheels for CPython $TARGET_PY (Linux x86-64) into $DIR"
binary "$DIR" hydra-core==1.3.2 omegaconf==2.3.0 bitarray==3.12.3 cffi==2.1.1 pycparser==3.12 sacremoses==0.2.0 \
  tensorboardX==2.6.5
if binary "$DIR" fairseq-fixed==0.12.3.1 2>/dev/null; then
  echo "offline_wheels: fairseq-fixed 0.12.3.1: a $CP wheel"
else
  # pip reads an sdist's metadata by running its setup.py, which imports torch: without build
  # isolation (with it, pip would build torch from source), so PYTHON must hold torch, numpy, Cython
  "$PY" -c 'import torch, numpy, Cython, setuptools' 2>/dev/null || {
    echo "offline_wheels: no $CP wheel of fairseq-fixed; fetching its source needs PYTHON with torch, numpy," \
         "Cython and setuptools (e.g. PYTHON=.venv/bin/python)" >&2; exit 1; }
  pip download -q --no-deps --no-binary=fairseq-fixed --no-build-isolation -d "$DIR" fairseq-fixed==0.12.3.1
  echo "offline_wheels: fairseq-fixed 0.12.3.1: no $CP wheel on the registry; its source goes instead" \
       "(scripts/gpu/install.sh builds it on the host: needs a C++ compiler, torch, numpy, Cython, setuptools)"
fi
# antlr4-python3-runtime 4.9.3 (hydra-core and omegaconf pin 4.9.*) is source only: a pure-Python wheel
pip wheel -q --no-deps -w "$DIR" antlr4-python3-runtime==4.9.3
if ! binary "$DIR/numpy-fallback" numpy==1.26.4 2>/dev/null; then
  echo "offline_wheels: numpy 1.26.4 has no $CP wheel: no numpy fallback in the set"
  rmdir "$DIR/numpy-fallback"
fi
"$PY" "$ROOT/scripts/gpu/wheelset.py" check "$DIR" --python "$TARGET_PY"
echo "offline_wheels: done. On the GPU host, from a checkout with $DIR in it:"
echo "  bash scripts/gpu/install.sh $DIR \$HOME/posmix-site && export PYTHONPATH=\$HOME/posmix-site:\$PWD"
