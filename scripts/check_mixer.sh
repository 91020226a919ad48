#!/usr/bin/env bash
# A contributor's loop: every check of one mixer, in about a minute or two on two cores (docs/contributing.md,
# "Checking a mixer"). It runs the tests that `pytest --mixer NAME` selects (tests/mixer_checks.py): every
# generated check whose configuration puts the mixer in a sublayer (decoding exactness first among them), its
# option sweeps and ranges, its CLI end-to-end case (fairseq-train, then fairseq-generate in a fresh process, for
# this mixer alone), its own equation tests, and the docs, floors, budget and house checks.
# Usage: scripts/check_mixer.sh NAME [pytest options]     e.g. scripts/check_mixer.sh alibi -x
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ -z "$1" ] || [ "${1#-}" != "$1" ]; then
  echo "usage: scripts/check_mixer.sh NAME [pytest options]  (NAME: a registered mixer, e.g. the name in its" \
       "register_mixer)" >&2
  exit 2
fi
NAME="$1"
shift
PYTHON=python
if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export POSMIX_MULTI30K="${POSMIX_MULTI30K:-$(cd .. && pwd)/shared/data/multi30k}"
# two workers, one file each at a time, as scripts/test.sh; POSMIX_TEST_WORKERS=0 runs in this process
WORKERS="${POSMIX_TEST_WORKERS:-2}"
PARALLEL=()
if [ "$WORKERS" != "0" ]; then PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder); fi
exec "$PYTHON" -m pytest -q -p no:cacheprovider "${PARALLEL[@]}" --mixer "$NAME" tests "$@"
