#!/usr/bin/env bash
# Multi30k (task 1) en->de with any posmix arch: BPE, preprocess, train, generate, posmix-score.
#
#   bash examples/multi30k_en_de/run.sh [RAW_DIR] [OUT_DIR]
#   ARCH=shaw_iwslt_de_en MAX_UPDATE=20000 bash examples/multi30k_en_de/run.sh
#
# RAW_DIR holds {train,val,test_2016_flickr}.{en,de}[.gz] (the raw release of the public
# multi30k/dataset repository, data/task1/raw); default ../shared/data/multi30k.
# Hyper-parameters follow the paper's Small setting (Gated position-based attention, 5.1).
# Extra fairseq-train flags: TRAIN_FLAGS="--encoder-self-gating off --decoder-self-gating off".
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAW=${1:-$ROOT/../shared/data/multi30k}
OUT=${2:-$ROOT/runs/multi30k_en_de}
ARCH=${ARCH:-rposnet_iwslt_de_en}
MAX_UPDATE=${MAX_UPDATE:-20000}
MAX_TOKENS=${MAX_TOKENS:-4096}
DEVICE_FLAGS=${DEVICE_FLAGS:-}   # e.g. "--cpu" on a machine without GPU, "--fp16" on a GPU
PY=${PY:-$ROOT/.venv/bin/python}
BIN=$(dirname "$PY")
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
UD=$("$PY" -c "import posmix_fairseq, os; print(os.path.dirname(posmix_fairseq.__file__))")

mkdir -p "$OUT"
"$PY" -m posmix_fairseq.raw_text "$RAW" en de "$OUT/bpe" --vocab-size 8000
"$BIN/fairseq-preprocess" --source-lang en --target-lang de --trainpref "$OUT/bpe/train" \
    --validpref "$OUT/bpe/valid" --testpref "$OUT/bpe/test" --destdir "$OUT/data-bin" \
    --joined-dictionary --workers 2
"$BIN/fairseq-train" "$OUT/data-bin" --user-dir "$UD" --arch "$ARCH" --share-all-embeddings \
    --optimizer adam --adam-betas '(0.9,0.98)' --clip-norm 0.0 --lr 5e-4 --lr-scheduler inverse_sqrt \
    --warmup-updates 4000 --weight-decay 0.0001 --criterion label_smoothed_cross_entropy \
    --label-smoothing 0.1 --max-tokens "$MAX_TOKENS" --max-update "$MAX_UPDATE" \
    --save-dir "$OUT/checkpoints/$ARCH" --no-epoch-checkpoints --keep-best-checkpoints 1 \
    --no-progress-bar --log-interval 100 $DEVICE_FLAGS ${TRAIN_FLAGS:-}
"$BIN/fairseq-generate" "$OUT/data-bin" --user-dir "$UD" --path "$OUT/checkpoints/$ARCH/checkpoint_best.pt" \
    --gen-subset test --beam 5 --max-tokens 8000 --required-batch-size-multiple 1 $DEVICE_FLAGS \
    > "$OUT/generate.$ARCH.txt"
# score: posmix-score joins the SentencePiece pieces of the H- lines back and scores them against the raw
# references (BLEU, chrF++, chrF, TER; COMET/BLEURT with COMET_MODEL / BLEURT_CHECKPOINT set)
REF=$("$PY" -c "import sys; from posmix_fairseq.raw_text import find_split; print(find_split(sys.argv[1], ['test'], 'de'))" "$RAW")
SRC_RAW=$("$PY" -c "import sys; from posmix_fairseq.raw_text import find_split; print(find_split(sys.argv[1], ['test'], 'en'))" "$RAW")
SCORE_FLAGS=""
for model in ${COMET_MODEL:-}; do SCORE_FLAGS="$SCORE_FLAGS --comet-model $model"; done
[ -n "${BLEURT_CHECKPOINT:-}" ] && SCORE_FLAGS="$SCORE_FLAGS --bleurt-checkpoint $BLEURT_CHECKPOINT"
"$PY" -m posmix_fairseq.evaluation.score "$OUT/generate.$ARCH.txt" --names "$ARCH" --spm-model "$OUT/bpe/spm.model" \
    --ref "$REF" --src "$SRC_RAW" $SCORE_FLAGS --json "$OUT/scores.$ARCH.json" --csv "$OUT/scores.$ARCH.csv" \
    | tee "$OUT/scores.$ARCH.md"
