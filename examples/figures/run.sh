#!/usr/bin/env bash
# The pictures of docs/figures.md on Multi30k en->de: small models (2+2 layers, D = 64, 4 heads,
# FFN 256), UPDATES updates of MAX_TOKENS tokens on the first 10,000 training pairs, CPU; then the
# analysis commands, then posmix-plot. Each stage skips what is already there.
#
#   bash examples/figures/run.sh RAW_DIR [OUT_DIR]            # STAGES="train analyse plot" by default
#   STAGES=plot bash examples/figures/run.sh RAW_DIR          # redraw from the analysis outputs
#   STAGES=docs bash examples/figures/run.sh RAW_DIR          # the few PNGs docs/figures.md shows
#
# RAW_DIR (or RAW) holds Multi30k's raw release, {train,val,test_2016_flickr}.{en,de}[.gz] (the public
# multi30k/dataset repository, data/task1/raw); OUT_DIR (or OUT) defaults to runs/figures of the current
# directory. It runs in the active environment: the `python` on PATH (or $PYTHON).
# These models show what the commands draw, not what the architectures can reach.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAW=${1:-${RAW:-}}
[ -n "$RAW" ] || { echo "figures: name the raw Multi30k folder: bash examples/figures/run.sh RAW_DIR [OUT_DIR] (or RAW=DIR)" >&2; exit 2; }
[ -d "$RAW" ] || { echo "figures: RAW=$RAW: no such folder (Multi30k's raw {train,val,test_2016_flickr}.{en,de}[.gz])" >&2; exit 2; }
OUT=${2:-${OUT:-runs/figures}}
PY=${PYTHON:-python}
command -v "$PY" >/dev/null 2>&1 || { echo "figures: PYTHON=$PY: no such command; activate the environment with fairseq and posmix_fairseq, or set PYTHON" >&2; exit 2; }
UPDATES=${UPDATES:-250}
MAX_TOKENS=${MAX_TOKENS:-2048}
THREADS=${THREADS:-1}
STAGES=${STAGES:-"train analyse plot"}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
UD=$ROOT/posmix_fairseq
SIZE="--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 256
      --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 --decoder-attention-heads 4"
GATING_ON="--encoder-self-gating on --decoder-self-gating on"
GATING_OFF="--encoder-self-gating off --decoder-self-gating off"
ONE_LAYER="--encoder-layers 1 --decoder-layers 1"
NO_FF="--no-encoder-ffn --no-decoder-ffn"
REF_TEST=$(ls "$RAW"/test*.de* | head -1)
REF_VALID=$(ls "$RAW"/val*.de* | head -1)
mkdir -p "$OUT/logs" "$OUT/scores" "$OUT/gpa-6" "$OUT/hc-fig7" "$OUT/figures"
has() { [[ " $STAGES " == *" $1 "* ]]; }
say() { echo "[figures $(date +%H:%M:%S)] $*"; }

# name | arch | flags (last on the command line, so they win)
FEW="--max-update 100"   # models drawn only for their learned positions
SYSTEMS=(
  "base|posmix_transformer_iwslt_de_en|"
  "rposnet|rposnet_iwslt_de_en|$GATING_ON"
  "aposnet|aposnet_iwslt_de_en|$GATING_ON"
  "hc_sa|hc_sa_iwslt_de_en|"
  "hc_all|hc_all_iwslt_de_en|"
  "sh_x|sh_x_iwslt_de_en|--decoder-cross-heads 0,1"
  "posnet_embed_64|posnet_embed_iwslt_de_en|--encoder-posnet-embed-dim 64 --decoder-posnet-embed-dim 64"
  "base_gated|posmix_transformer_iwslt_de_en|$GATING_ON"
  "shaw|shaw_iwslt_de_en|$GATING_OFF"
  "shaw_gated|shaw_iwslt_de_en|$GATING_ON"
  "relattn|relattn_iwslt_de_en|$GATING_OFF"
  "relattn_gated|relattn_iwslt_de_en|$GATING_ON"
  "aposnet_ungated|aposnet_iwslt_de_en|$GATING_OFF"
  "rposnet_ungated|rposnet_iwslt_de_en|$GATING_OFF"
  "sh_x_2last|sh_x_iwslt_de_en|--decoder-cross-heads 0,2"
  "sh_x_spread|sh_x_iwslt_de_en|--decoder-cross-heads 1,1"
  "base_noff|posmix_transformer_iwslt_de_en|$NO_FF"
  "hc_sa_noff|hc_sa_iwslt_de_en|$NO_FF"
  "posnet_embed_16|posnet_embed_iwslt_de_en|--encoder-posnet-embed-dim 16 --decoder-posnet-embed-dim 16"
  "posnet_embed_32|posnet_embed_iwslt_de_en|--encoder-posnet-embed-dim 32 --decoder-posnet-embed-dim 32"
  "t5|t5bias_iwslt_de_en|$FEW"
  "at5|at5bias_iwslt_de_en|$FEW"
  "linearnet|linearnet_iwslt_de_en|$FEW"
  "posnet_attn|posnet_attn_iwslt_de_en|$FEW"
  "base_1|posmix_transformer_iwslt_de_en|$ONE_LAYER"
  "base_1_noff|posmix_transformer_iwslt_de_en|$ONE_LAYER $NO_FF"
  "hc_sa_1|hc_sa_iwslt_de_en|$ONE_LAYER"
  "hc_sa_1_noff|hc_sa_iwslt_de_en|$ONE_LAYER $NO_FF"
)

if [ ! -f "$OUT/data-bin/dict.de.txt" ]; then
  say "prepare: SentencePiece BPE 4000 on the first 10,000 pairs, fairseq-preprocess"
  "$PY" -m posmix_fairseq.harness.raw_text "$RAW" en de "$OUT/bpe" --vocab-size 4000 --max-train-sentences 10000
  "$PY" -m fairseq_cli.preprocess --source-lang en --target-lang de --trainpref "$OUT/bpe/train" --validpref "$OUT/bpe/valid" \
      --testpref "$OUT/bpe/test" --destdir "$OUT/data-bin" --joined-dictionary --workers 1 > "$OUT/logs/preprocess.log"
fi

train() {  # name arch flags...
  local name=$1 arch=$2; shift 2
  grep -qs "done training" "$OUT/logs/train.$name.log" && return
  say "train $name ($arch $*)"
  "$PY" -m fairseq_cli.train "$OUT/data-bin" --user-dir "$UD" --arch "$arch" $SIZE --share-all-embeddings \
      --optimizer adam --adam-betas '(0.9,0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 \
      --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 --max-tokens "$MAX_TOKENS" \
      --max-update "$UPDATES" --save-dir "$OUT/ckpt/$name" --no-epoch-checkpoints --disable-validation \
      --no-progress-bar --log-interval 50 --cpu --seed 1 --num-workers 0 "$@" > "$OUT/logs/train.$name.log" 2>&1
}

generate() {  # name subset
  local name=$1 subset=${2:-test} ref=$REF_TEST
  [ "$subset" = valid ] && ref=$REF_VALID
  [ -f "$OUT/scores/scores.$name.$subset.json" ] && return
  say "generate + score $name ($subset)"
  "$PY" -m fairseq_cli.generate "$OUT/data-bin" --user-dir "$UD" --path "$OUT/ckpt/$name/checkpoint_last.pt" \
      --gen-subset "$subset" --beam 4 --max-tokens 4000 --required-batch-size-multiple 1 --cpu \
      > "$OUT/generate.$name.$subset.txt" 2> "$OUT/logs/generate.$name.$subset.log"
  "$PY" -m posmix_fairseq.harness.evaluation.score "$OUT/generate.$name.$subset.txt" --names "$name" \
      --spm-model "$OUT/bpe/spm.model" --ref "$ref" --metrics bleu,chrf++ --paired-bs-n 0 \
      --json "$OUT/scores/scores.$name.$subset.json" > "$OUT/logs/score.$name.$subset.md"
}

if has train; then
  for entry in "${SYSTEMS[@]}"; do
    IFS='|' read -r name arch flags <<< "$entry"
    train "$name" "$arch" $flags
  done
fi

P="$PY -m posmix_fairseq"   # the console commands posmix-* as modules (same arguments)
SPM="--spm-model $OUT/bpe/spm.model"
F=$OUT/figures
if has analyse; then
  for name in base hc_sa hc_all sh_x sh_x_2last sh_x_spread base_noff hc_sa_noff base_1 base_1_noff hc_sa_1 \
              hc_sa_1_noff base_gated shaw shaw_gated relattn relattn_gated aposnet_ungated aposnet rposnet_ungated \
              rposnet posnet_embed_64; do
    generate "$name" test
  done
  for d in 16 32 64; do generate "posnet_embed_$d" valid; done
  # posmix-reproduce's file names for the gpa-6 and hc-fig7 grids (posmix-plot --scores-dir)
  for pair in base:transformer_gating_off base_gated:transformer_gating_on shaw:shaw_et_al_2018_gating_off \
              shaw_gated:shaw_et_al_2018_gating_on relattn:rel_self_attention_gating_off \
              relattn_gated:rel_self_attention_gating_on aposnet_ungated:aposnet_gating_off aposnet:aposnet_gating_on \
              rposnet_ungated:rposnet_gating_off rposnet:rposnet_gating_on; do
    ln -sf "$OUT/scores/scores.${pair%%:*}.test.json" "$OUT/gpa-6/scores.${pair##*:}.json"
  done
  for pair in sh_x:1_head_last_layer sh_x_2last:2_heads_last_layer sh_x_spread:2_heads_1_per_layer; do
    ln -sf "$OUT/scores/scores.${pair%%:*}.test.json" "$OUT/hc-fig7/scores.${pair##*:}.json"
  done
  say "posmix-attention (BASE, rPosNet)"
  for name in base rposnet; do
    [ -f "$OUT/attn.$name/argmax_distance.csv" ] || \
      $P.evaluation.attention "$OUT/data-bin" --path "$OUT/ckpt/$name/checkpoint_last.pt" --out "$OUT/attn.$name" \
          --heatmaps 0 > "$OUT/logs/attention.$name.md"
  done
  say "posmix-length-bins"
  G=$OUT/generate
  $P.evaluation.length_bins $G.hc_sa.test.txt $G.hc_all.test.txt $G.sh_x.test.txt --baseline $G.base.test.txt \
      --names HC-SA HC-ALL SH-X BASE $SPM --ref "$REF_TEST" --by ref --bins quantiles:5 --metrics bleu \
      --json "$OUT/bins.ref.json" > "$OUT/logs/bins.ref.md"
  for kind in encoder_self decoder_self decoder_cross; do
    $P.evaluation.length_bins $G.hc_sa.test.txt $G.hc_all.test.txt $G.sh_x.test.txt --baseline $G.base.test.txt \
        --names HC-SA HC-ALL SH-X BASE $SPM --ref "$REF_TEST" --key-file "$OUT/attn.base/offdiag.$kind.txt" \
        --bins quantiles:4 --metrics bleu --json "$OUT/bins.offdiag.$kind.json" > "$OUT/logs/bins.offdiag.$kind.md"
  done
  say "posmix-contrastive (LINGEVAL97, default: the tests' 4-reference example in LingEval97's format)"
  for name in base hc_sa hc_all; do
    $P.evaluation.contrastive "$OUT/data-bin" --path "$OUT/ckpt/$name/checkpoint_last.pt" $SPM --per-token \
        --set "${LINGEVAL97:-$ROOT/tests/data/lingeval97_tiny.json}" \
        --json "$OUT/contrastive.$name.json" > "$OUT/logs/contrastive.$name.md"
  done
  say "posmix-ngram-orders (PosNet-Embed d_p 64 over SAPE)"
  $P.evaluation.ngram_orders $G.posnet_embed_64.test.txt --baseline $G.base.test.txt --names PosNet-Embed SAPE $SPM \
      --ref "$REF_TEST" --json "$OUT/ngram-orders.json" > "$OUT/logs/ngram-orders.md"
  say "posmix-forward-time (PosNet Table 1's methods at this size)"
  $P.evaluation.forward_time --table posnet-1 --size small --model-flags "$SIZE" --vocab 4000 --batch-size 32 \
      --length 30 --repeats 10 --threads 1 --json "$OUT/forward-time.json" > "$OUT/logs/forward-time.md"
  say "posmix-freeze (rPosNet)"
  [ -f "$OUT/ckpt/rposnet/frozen.pt" ] || $P.freeze "$OUT/ckpt/rposnet/checkpoint_last.pt" \
      "$OUT/ckpt/rposnet/frozen.pt" --max-positions 64 > "$OUT/logs/freeze.md"
fi

if has plot; then
  say "posmix-plot"
  PLOT="$P.figures.plot"
  S=$OUT/scores
  $PLOT hc-fig2 "$OUT/attn.base/argmax_distance.csv" --out "$F"
  $PLOT hc-fig3 --score BASE:2=$S/scores.base.test.json --score BASE/-FF:2=$S/scores.base_noff.test.json \
      --score HC-SA:2=$S/scores.hc_sa.test.json --score HC-SA/-FF:2=$S/scores.hc_sa_noff.test.json \
      --score BASE:1=$S/scores.base_1.test.json --score BASE/-FF:1=$S/scores.base_1_noff.test.json \
      --score HC-SA:1=$S/scores.hc_sa_1.test.json --score HC-SA/-FF:1=$S/scores.hc_sa_1_noff.test.json --out "$F"
  $PLOT hc-fig4 "$OUT/bins.ref.json" --baseline BASE --out "$F"
  $PLOT hc-fig5 --system BASE="$OUT/contrastive.base.json" --system HC-SA="$OUT/contrastive.hc_sa.json" \
      --system HC-ALL="$OUT/contrastive.hc_all.json" --out "$F"
  $PLOT hc-fig6 "$OUT/bins.offdiag.decoder_self.json" --title "decoder self-attention (BASE's off-diagonality)" --out "$F"
  $PLOT hc-fig7 --scores-dir "$OUT/hc-fig7" --out "$F"
  $PLOT hc-fig8 --panel "encoder self-attention=$OUT/bins.offdiag.encoder_self.json" \
      --panel "decoder self-attention=$OUT/bins.offdiag.decoder_self.json" \
      --panel "decoder cross-attention=$OUT/bins.offdiag.decoder_cross.json" --out "$F"
  $PLOT gpa-fig2 --scores-dir "$OUT/gpa-6" --metric BLEU --ours-title "ours (Multi30k en-de, 2+2 layers, D = 64)" --out "$F"
  $PLOT posnet-fig2 "$OUT/forward-time.json" --out "$F"
  $PLOT posnet-fig3 --score 16=$S/scores.posnet_embed_16.valid.json --score 32=$S/scores.posnet_embed_32.valid.json \
      --score 64=$S/scores.posnet_embed_64.valid.json --out "$F"
  $PLOT posnet-fig4 "$OUT/ngram-orders.json" --out "$F"
  for name in rposnet aposnet hc_all t5 at5 linearnet posnet_attn posnet_embed_64; do
    $PLOT positions "$OUT/ckpt/$name/checkpoint_last.pt" --out "$F/positions.$name"
  done
  $PLOT positions "$OUT/ckpt/rposnet/frozen.pt" --out "$F/positions.rposnet_frozen"
fi
# STAGES=docs: the pictures docs/figures.md shows, in full colour (a palette reduction bands the colour bars);
# re-saved losslessly with PNG's optimiser. DOCS="name ..." copies only those (e.g. DOCS=figures/hc_fig2).
if has docs; then
  mkdir -p "$ROOT/docs/figures"
  "$PY" - "$OUT" "$ROOT/docs/figures" ${DOCS:-} <<'PYEOF'
import sys
from PIL import Image
src, dst, only = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in only or ["attn.base/attention_maps/sentence0.decoder_cross", "figures/hc_fig2", "figures/hc_fig3",
                     "figures/hc_fig4", "figures/hc_fig8", "figures/gpa_fig2", "figures/posnet_fig4",
                     "figures/positions.rposnet/rposnet_energy.encoder_self",
                     "figures/positions.aposnet/aposnet_energy.encoder_self",
                     "figures/positions.hc_all/gaussian.decoder_cross", "figures/positions.t5/t5_bias",
                     "figures/positions.linearnet/linear.decoder_self"]:
    out = f"{dst}/{name.split('/', 1)[1].replace('attention_maps/', '').replace('positions.', '').replace('/', '.')}.png"
    Image.open(f"{src}/{name}.png").convert("RGB").save(out, optimize=True)  # full colour: no palette
    print(out)
PYEOF
fi
say "done: $F"
