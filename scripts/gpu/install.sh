#!/usr/bin/env bash
# Installs the wheel set of scripts/offline_wheels.sh on a GPU host with no network, into a target
# directory, beside the host's own torch, Triton and numpy (nothing of the host is replaced), then
# checks that fairseq, its compiled modules and the plugin import.
#
#   bash scripts/gpu/install.sh [DIR] [TARGET]        # defaults: .whl and /tmp/posmix-site
#   export PYTHONPATH=TARGET:$PWD                      # then: python3 -m posmix_fairseq.harness.benchmarks.gpu ...
#
# PYTHON (default python3) is the host's interpreter that holds torch. Its version must be the one
# the set was gathered for (DIR/MANIFEST.txt). A set that carries fairseq's source (no wheel fitted
# that Python) is built here with the host's compiler, torch, numpy and Cython (minutes). If
# fairseq's compiled modules fail to import with the host's numpy, the set's numpy-fallback
# (numpy 1.26) goes into TARGET, ahead of the host's numpy on PYTHONPATH, and the check runs again.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${1:-.whl}
TARGET=${2:-/tmp/posmix-site}
PY=${PYTHON:-python3}
say() { echo "install: $*"; }
die() { echo "install: ERROR: $*" >&2; exit 1; }

[ -f "$DIR/MANIFEST.txt" ] || die "$DIR/MANIFEST.txt not found: gather the set first, on a machine with the registry: bash scripts/offline_wheels.sh $DIR --python X.Y"
WANT=$(sed -n 's/^python //p' "$DIR/MANIFEST.txt")
HAVE=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$WANT" = "$HAVE" ] || die "$DIR was gathered for Python $WANT, but $PY is Python $HAVE: gather it again with --python $HAVE"
"$PY" - <<'EOF' || die "$PY lacks torch (the host's CUDA torch is required; this set does not carry it)"
import torch
print(f"install: host torch {torch.__version__}, CUDA {'available: ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'not available'}")
EOF
"$PY" "$ROOT/scripts/gpu/wheelset.py" host-check "$DIR" || die "the host lacks packages the set relies on (above)"
mkdir -p "$TARGET"
pipi() { "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$TARGET" "$@"; }
say "wheels of $DIR -> $TARGET"
pipi "$DIR"/*.whl
shopt -s nullglob
SDISTS=("$DIR"/fairseq_fixed-*.tar.gz)
if [ ${#SDISTS[@]} -gt 0 ]; then
  "$PY" -c 'import numpy, Cython, setuptools, torch' 2>/dev/null \
    || die "building fairseq from source needs numpy, Cython and setuptools beside torch in $PY"
  say "building fairseq-fixed from source with the host's compiler (minutes: C++ and Cython extensions)"
  PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}" pipi --no-build-isolation "${SDISTS[@]}"
fi

check() {  # prints the import check's output; its exit status is the check's
  PYTHONPATH="$TARGET:$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" - 2>&1 <<'EOF'
import importlib, sys
import numpy
import fairseq
for name in ("fairseq.data.data_utils_fast", "fairseq.data.token_block_utils_fast"):  # Cython, against numpy
    importlib.import_module(name)
from fairseq.data import data_utils
import numpy as np
batches = data_utils.batch_by_size(np.arange(10), lambda i: 5, max_tokens=20)  # runs the compiled code
assert sum(len(b) for b in batches) == 10, batches
import posmix_fairseq
from fairseq.models import ARCH_MODEL_REGISTRY
assert "rposnet_wmt_en_de" in ARCH_MODEL_REGISTRY, "posmix_fairseq did not register its archs"
import posmix_fairseq.kernels as k
print(f"install: ok: fairseq {fairseq.__version__} ({fairseq.__file__}), numpy {numpy.__version__}, "
      f"posmix_fairseq from {posmix_fairseq.USER_DIR}, Triton {'importable' if k.triton_available() else 'missing'}")
EOF
}
if ! OUTPUT=$(check); then
  echo "$OUTPUT"
  # numpy's messages when a module compiled against another numpy ABI is imported
  if ! grep -qiE "numpy.*(ABI|C-API|failed to import|compiled using NumPy|_ARRAY_API)|multiarray" <<<"$OUTPUT"; then
    die "fairseq or the plugin does not import (above)"
  fi
  FALLBACK=("$DIR"/numpy-fallback/numpy-*.whl)
  [ ${#FALLBACK[@]} -gt 0 ] || die "fairseq's compiled modules fail with the host's numpy (above), and the set has no numpy fallback"
  say "fairseq's compiled modules failed with the host's numpy (above): installing the numpy fallback ${FALLBACK[0]##*/} into $TARGET"
  pipi "${FALLBACK[@]}"
  OUTPUT=$(check) || { echo "$OUTPUT"; die "fairseq or the plugin does not import even with numpy 1.26 (above)"; }
fi
echo "$OUTPUT"
"$PY" "$ROOT/scripts/gpu/wheelset.py" env-check "$TARGET"
say "done. Before any command: export PYTHONPATH=$TARGET:$ROOT"
