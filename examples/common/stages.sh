# Shared stages of the per-task recipes (examples/<task>/run.sh). Source it, set the task variables,
# then call run_recipe. Every stage prints "[recipe HH:MM:SS] <stage>: ..." lines.
#
# Task variables (set by each run.sh):
#   TASK SRC TGT          e.g. iwslt14_de_en de en
#   PAPER                 gpa (default) | hc | ape | posnet | rpe: whose hyper-parameters
#   LOWERCASE MOSES       1/0: lowercase (GPA DE->EN), Moses normalisation+tokenisation before BPE
#   VOCAB SPM_TYPE SEPARATE   subword vocabulary size, bpe|unigram, 1 = one model per language
#   TOKENIZE              sacreBLEU tokenizer: 13a | intl | zh
# User variables (environment):
#   RAW (raw corpus dir) OUT (work dir) SIZE (tiny: tests; mini: 3+3 layers, D=128, a few hundred updates on CPU;
#   small|base|big: the papers') VARIANT (e.g. rposnet) or ARCH (full arch name)
#   STAGES ("download prepare preprocess train average generate score"), DEVICE_FLAGS ("--cpu", "--fp16")
#   MAX_UPDATE MAX_TOKENS UPDATE_FREQ LR WARMUP BEAM LENPEN AVG SAVE_INTERVAL_UPDATES: override the size's values
#   TEST_SET (RAW/<name>.* as the test set, e.g. newstest_all), MAX_TRAIN MAX_EVAL (subsets, for tests), TRAIN_FLAGS (extra fairseq-train flags)
#   COMET_MODEL (one or more local COMET-family models, space-separated: COMET, CometKiwi, XCOMET) BLEURT_CHECKPOINT
#   (local models for posmix-score; skipped with a message when unset), SCORE_FLAGS (extra posmix-score flags, e.g. "--gpus 0")
set -euo pipefail

log() { echo "[recipe $(date +%H:%M:%S)] $*"; }

posmix_init() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  PY=${PY:-$ROOT/.venv/bin/python}
  BIN=$(dirname "$PY")
  export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
  UD=$("$PY" -c "import posmix_fairseq, os; print(os.path.dirname(posmix_fairseq.__file__))")
  RAW=${RAW:-$ROOT/data/$TASK/raw}
  OUT=${OUT:-$ROOT/runs/$TASK}
  PAPER=${PAPER:-gpa}; LOWERCASE=${LOWERCASE:-0}; MOSES=${MOSES:-0}; SEPARATE=${SEPARATE:-0}
  SPM_TYPE=${SPM_TYPE:-bpe}; TOKENIZE=${TOKENIZE:-13a}; SIZE=${SIZE:-base}; VARIANT=${VARIANT:-rposnet}
  size_defaults
  ARCH=${ARCH:-${VARIANT}_${ARCH_SUFFIX}}
  NAME=${NAME:-$ARCH}   # system name: checkpoints/$NAME, generate.$NAME.txt, scores.$NAME.*
  mkdir -p "$OUT"
}

# Hyper-parameters of the papers. GPA 5.3: Small 30k updates x ~16k target tokens, Base 150k x ~27k,
# Big 300k x ~27k; Adam, 4000 warmup updates; beam 12; average the best checkpoint and the ones after
# it: 30 x 300 updates (Small), 7 x 1000 (Base), 20 x 600 (Big). The learning rate is not stated: we
# use fairseq's translation-example values. PosNet 4.1: 4096 tokens x 8 accumulated, Adam eps 1e-9,
# beam 4, length penalty 0.6, average of the last 5. APE 4.1: lr 3e-4 without warmup, 4700 tokens,
# lr x 0.9 after 6 checkpoints without improvement, 8 checkpoints per epoch, training length <= 100.
# HC 4.2: IWSLT small model (hc_*_iwslt_small) with lr 3e-4 and a linear schedule; base: 4000 warmup.
size_defaults() {
  local mu mt uf lr wu beam lp avg sint extra=""
  case "$SIZE" in
    tiny)  ARCH_SUFFIX=iwslt_de_en; mu=6; mt=1000; uf=1; lr=1e-3; wu=1; beam=2; lp=1; avg="best-and-next 2"; sint=2
           GEN_SIZE_FLAGS="--max-len-a 1 --max-len-b 5"
           extra="--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 --decoder-attention-heads 2 --max-source-positions 128 --max-target-positions 128" ;;
    mini)  ARCH_SUFFIX=iwslt_de_en; mu=400; mt=4096; uf=1; lr=1e-3; wu=300; beam=5; lp=1; avg="best-and-next 3"; sint=50
           extra="--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 --encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 --decoder-attention-heads 4 --dropout 0.1" ;;
    small) ARCH_SUFFIX=iwslt_de_en; mu=30000; mt=4000; uf=4; lr=5e-4; wu=4000; beam=12; lp=1; avg="best-and-next 30"; sint=300 ;;
    base)  ARCH_SUFFIX=wmt_en_de; mu=150000; mt=4500; uf=6; lr=7e-4; wu=4000; beam=12; lp=1; avg="best-and-next 7"; sint=1000 ;;
    big)   ARCH_SUFFIX=wmt_en_de_big; mu=300000; mt=4500; uf=6; lr=5e-4; wu=4000; beam=12; lp=1; avg="best-and-next 20"; sint=600 ;;
    *) echo "SIZE=$SIZE: valid values are tiny, mini, small, base, big" >&2; exit 2 ;;
  esac
  SCHED="--lr-scheduler inverse_sqrt --warmup-updates \$WARMUP"
  OPT="--optimizer adam --adam-betas (0.9,0.98) --clip-norm 0.0 --weight-decay 0.0001"
  SHARE="--share-all-embeddings"
  case "$PAPER" in
    gpa|rpe) ;;
    posnet) case "$SIZE" in tiny|mini) ;; *) false ;; esac || { mt=4096; uf=8; beam=4; lp=0.6; avg="last 5"; }
            OPT="--optimizer adam --adam-betas (0.9,0.98) --adam-eps 1e-9 --clip-norm 0.0" ;;
    ape) case "$SIZE" in tiny|mini) ;; *) false ;; esac || { lr=3e-4; mt=4700; uf=1; avg="none"; }
         SCHED="--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.9 --lr-patience 6"
         SHARE=""; extra="$extra --max-source-positions 100 --max-target-positions 100 --skip-invalid-size-inputs-valid-test" ;;
    hc) if [ "$SIZE" = small ]; then ARCH_SUFFIX=iwslt_small; lr=3e-4; mt=4000; uf=1
          SCHED="--lr-scheduler polynomial_decay --total-num-update \$MAX_UPDATE --warmup-updates 0"; fi ;;
    *) echo "PAPER=$PAPER: valid values are gpa, hc, ape, posnet, rpe" >&2; exit 2 ;;
  esac
  MAX_UPDATE=${MAX_UPDATE:-$mu}; MAX_TOKENS=${MAX_TOKENS:-$mt}; UPDATE_FREQ=${UPDATE_FREQ:-$uf}; LR=${LR:-$lr}
  WARMUP=${WARMUP:-$wu}; BEAM=${BEAM:-$beam}; LENPEN=${LENPEN:-$lp}; AVG=${AVG:-$avg}
  SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-$sint}; SIZE_FLAGS=$extra
  SCHED=$(eval echo "$SCHED")
}

stage_download() {
  if compgen -G "$RAW/train.$SRC*" >/dev/null && compgen -G "$RAW/train.$TGT*" >/dev/null; then
    log "download: raw data present in $RAW (train.$SRC, train.$TGT), skipping the download"
    return
  fi
  log "download: no raw data in $RAW; fetching $TASK (needs internet; sources: posmix_fairseq/recipes/download.py)"
  mkdir -p "$RAW"
  "$PY" -m posmix_fairseq.recipes.download "$TASK" "$RAW" --src "$SRC" --tgt "$TGT"
}

stage_prepare() {
  log "prepare: normalise/tokenise (moses=$MOSES lowercase=$LOWERCASE), $SPM_TYPE $VOCAB (separate=$SEPARATE)"
  local flags="--vocab-size $VOCAB --model-type $SPM_TYPE"
  [ "$MOSES" = 1 ] && flags="$flags --moses"
  [ "$LOWERCASE" = 1 ] && flags="$flags --lowercase"
  [ "$SEPARATE" = 1 ] && flags="$flags --separate"
  [ -n "${MAX_TRAIN:-}" ] && flags="$flags --max-train-sentences $MAX_TRAIN"
  [ -n "${MAX_EVAL:-}" ] && flags="$flags --max-eval-sentences $MAX_EVAL"
  [ -n "${TEST_SET:-}" ] && flags="$flags --test-name $TEST_SET"
  "$PY" -m posmix_fairseq.recipes.prepare_data "$RAW" "$OUT/prep" --src "$SRC" --tgt "$TGT" $flags
}

stage_preprocess() {
  log "preprocess: fairseq-preprocess -> $OUT/data-bin"
  local joined="--joined-dictionary"
  [ "$SEPARATE" = 1 ] && joined=""
  rm -rf "$OUT/data-bin"
  "$BIN/fairseq-preprocess" --source-lang "$SRC" --target-lang "$TGT" --trainpref "$OUT/prep/train" \
      --validpref "$OUT/prep/valid" --testpref "$OUT/prep/test" --destdir "$OUT/data-bin" $joined --workers 2
}

stage_train() {
  local share=$SHARE
  [ "$SEPARATE" = 1 ] && share=""
  log "train: $NAME = $ARCH ${TRAIN_FLAGS:-} ($PAPER, $SIZE): $MAX_UPDATE updates x $MAX_TOKENS tokens x $UPDATE_FREQ, lr $LR"
  "$BIN/fairseq-train" "$OUT/data-bin" --user-dir "$UD" --arch "$ARCH" $share $OPT --lr "$LR" $SCHED \
      --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens "$MAX_TOKENS" \
      --update-freq "$UPDATE_FREQ" --max-update "$MAX_UPDATE" --save-dir "$OUT/checkpoints/$NAME" \
      --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates -1 --no-epoch-checkpoints \
      --log-format simple --log-interval "${LOG_INTERVAL:-100}" --seed "${SEED:-1}" $SIZE_FLAGS \
      ${DEVICE_FLAGS:-} ${TRAIN_FLAGS:-}
}

stage_average() {
  local dir="$OUT/checkpoints/$NAME"
  if [ "$AVG" = none ]; then
    log "average: none for $PAPER; using checkpoint_best.pt"
    cp "$dir/checkpoint_best.pt" "$dir/checkpoint_final.pt"
    return
  fi
  log "average: $AVG checkpoints of $dir"
  "$PY" -m posmix_fairseq.evaluation.average --dir "$dir" --${AVG% *} "${AVG#* }" --output "$dir/checkpoint_final.pt"
}

stage_generate() {
  log "generate: beam $BEAM, lenpen $LENPEN"
  "$BIN/fairseq-generate" "$OUT/data-bin" --user-dir "$UD" --path "$OUT/checkpoints/$NAME/checkpoint_final.pt" \
      --gen-subset test --beam "$BEAM" --lenpen "$LENPEN" --max-tokens "${GEN_MAX_TOKENS:-8000}" \
      --required-batch-size-multiple 1 ${GEN_SIZE_FLAGS:-} ${DEVICE_FLAGS:-} ${GEN_FLAGS:-} > "$OUT/generate.$NAME.txt"
}

# The target side's SentencePiece model and detokenisation flags, as prepare made them: sets SPM and
# DETOK_FLAGS for the scoring stages.
target_detok() {
  SPM="$OUT/prep/spm.model"; DETOK_FLAGS=""
  [ "$SEPARATE" = 1 ] && SPM="$OUT/prep/spm.$TGT.model"
  [ "$MOSES" = 1 ] && DETOK_FLAGS="--moses-detok $TGT"
  [ "$LOWERCASE" = 1 ] && DETOK_FLAGS="$DETOK_FLAGS --lowercase"
  return 0
}

stage_score() {
  target_detok
  local spm="$SPM" flags="$DETOK_FLAGS"
  local model
  for model in ${COMET_MODEL:-}; do flags="$flags --comet-model $model"; done
  [ -n "${BLEURT_CHECKPOINT:-}" ] && flags="$flags --bleurt-checkpoint $BLEURT_CHECKPOINT"
  log "score: posmix-score (tokenize $TOKENIZE)"
  "$PY" -m posmix_fairseq.evaluation.score "$OUT/generate.$NAME.txt" --names "$NAME" --spm-model "$spm" \
      --ref "$OUT/prep/raw/test.$TGT" --src "$OUT/prep/raw/test.$SRC" --tokenize "$TOKENIZE" $flags ${SCORE_FLAGS:-} \
      --json "$OUT/scores.$NAME.json" --csv "$OUT/scores.$NAME.csv" | tee "$OUT/scores.$NAME.md"
}

# APE paper Section 4.2 / Tables 3-4: the concatenated test set (consecutive pairs joined), binarized with
# the training dictionaries, translated with raised length limits, and scored per source-length group.
stage_concat() {
  target_detok
  local spm="$SPM" flags="$DETOK_FLAGS"
  log "concat: concatenated test set, groups ${CONCAT_BINS:-25,50,75,100}"
  "$PY" -m posmix_fairseq.evaluation.concat_testset --src-file "$OUT/prep/test.$SRC" --tgt-file "$OUT/prep/test.$TGT" \
      --src "$SRC" --tgt "$TGT" --out "$OUT/concat" --bins "${CONCAT_BINS:-25,50,75,100}"
  "$PY" -m posmix_fairseq.evaluation.concat_testset --src-file "$OUT/prep/raw/test.$SRC" --tgt-file "$OUT/prep/raw/test.$TGT" \
      --src "$SRC" --tgt "$TGT" --out "$OUT/concat/raw" >/dev/null
  if [ ! -d "$OUT/data-bin-concat" ]; then
    "$BIN/fairseq-preprocess" --source-lang "$SRC" --target-lang "$TGT" --testpref "$OUT/concat/concat" \
        --srcdict "$OUT/data-bin/dict.$SRC.txt" --tgtdict "$OUT/data-bin/dict.$TGT.txt" --destdir "$OUT/data-bin-concat" --workers 2
  fi
  "$BIN/fairseq-generate" "$OUT/data-bin-concat" --user-dir "$UD" --path "$OUT/checkpoints/$NAME/checkpoint_final.pt" \
      --gen-subset test --beam "$BEAM" --lenpen "$LENPEN" --max-tokens "${GEN_MAX_TOKENS:-8000}" \
      --required-batch-size-multiple 1 --max-source-positions 4096 --max-target-positions 4096 \
      --model-overrides "{'max_source_positions': 4096, 'max_target_positions': 4096}" \
      ${GEN_SIZE_FLAGS:-} ${DEVICE_FLAGS:-} ${GEN_FLAGS:-} > "$OUT/generate-concat.$NAME.txt"
  "$PY" -m posmix_fairseq.evaluation.length_bins "$OUT/generate-concat.$NAME.txt" --names "$NAME" --spm-model "$spm" \
      --ref "$OUT/concat/raw/concat.$TGT" --by src --count pieces --bins "${CONCAT_BINS:-25,50,75,100}" \
      --tokenize "$TOKENIZE" $flags --json "$OUT/concat-bins.$NAME.json" | tee "$OUT/concat-bins.$NAME.md"
}

# APE paper Table 2 / HC Fig. 4: metrics per source-length group of the ordinary test set
stage_lengthbins() {
  target_detok
  local spm="$SPM" flags="$DETOK_FLAGS"
  log "lengthbins: groups ${LENGTH_BINS:-25,50,75,100} by ${LENGTH_BY:-src} length"
  "$PY" -m posmix_fairseq.evaluation.length_bins "$OUT/generate.$NAME.txt" --names "$NAME" --spm-model "$spm" \
      --ref "$OUT/prep/raw/test.$TGT" --by "${LENGTH_BY:-src}" --count pieces --bins "${LENGTH_BINS:-25,50,75,100}" \
      --tokenize "$TOKENIZE" $flags --json "$OUT/length-bins.$NAME.json" | tee "$OUT/length-bins.$NAME.md"
}

# HC Table 4 / Fig. 5: LingEval97 contrastive evaluation (en->de). The set is read from $LINGEVAL97
# (default RAW/lingeval97.json); when absent it is fetched from LingEval97's repository (needs internet).
stage_contrastive() {
  local set=${LINGEVAL97:-$RAW/lingeval97.json} flags=""
  [ "$SEPARATE" = 1 ] && { echo "contrastive: needs one joint SentencePiece model (SEPARATE=0)" >&2; exit 2; }
  [ "$MOSES" = 1 ] && flags="--moses"
  [ "$LOWERCASE" = 1 ] && flags="$flags --lowercase"
  if [ -f "$set" ]; then
    log "contrastive: LingEval97 present in $set, skipping the download"
  else
    log "contrastive: no $set; fetching ${LINGEVAL97_URL:-$LINGEVAL97_DEFAULT_URL} (needs internet)"
    "$PY" -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
        "${LINGEVAL97_URL:-$LINGEVAL97_DEFAULT_URL}" "$set" || {
      echo "contrastive: could not fetch LingEval97; put lingeval97.json at $set (or set LINGEVAL97=PATH)" >&2; exit 2; }
  fi
  "$PY" -m posmix_fairseq.evaluation.contrastive "$OUT/data-bin" --path "$OUT/checkpoints/$NAME/checkpoint_final.pt" \
      --set "$set" --src "$SRC" --tgt "$TGT" $flags --spm-model "$OUT/prep/spm.model" --per-token \
      --scores-out "$OUT/contrastive-scores.$NAME.txt" --json "$OUT/contrastive.$NAME.json" | tee "$OUT/contrastive.$NAME.md"
}
LINGEVAL97_DEFAULT_URL=https://raw.githubusercontent.com/rsennrich/lingeval97/master/lingeval97.json

run_recipe() {
  posmix_init
  log "$TASK: $ARCH ($PAPER hyper-parameters, size $SIZE); raw $RAW; work $OUT"
  for stage in ${STAGES:-download prepare preprocess train average generate score}; do
    if ! declare -F "stage_$stage" >/dev/null; then
      echo "STAGES: unknown stage '$stage'; valid: download prepare preprocess train average generate score lengthbins concat contrastive" >&2
      exit 2
    fi
    "stage_$stage"
  done
  log "$TASK: done"
}
