#!/usr/bin/env bash
# Multi30k (task 1) En->De with any posmix arch: SentencePiece BPE 8k, GPA's Small model with Multi30k's own
# training length (20k updates of 4096 tokens), beam 5, sacreBLEU.
#
#   bash examples/multi30k_en_de/run.sh [RAW_DIR] [OUT_DIR]
#   ARCH=shaw_iwslt_de_en MAX_UPDATE=20000 bash examples/multi30k_en_de/run.sh
#   PLAN=1 bash examples/multi30k_en_de/run.sh
#
# RAW_DIR (or RAW) holds {train,val,test_2016_flickr}.{en,de}[.gz] (the raw release of the public
# multi30k/dataset repository, data/task1/raw); default data/multi30k_en_de/raw of the current directory,
# downloaded there when it is empty. OUT_DIR (or OUT) defaults to runs/multi30k_en_de of the current directory.
# Extra fairseq-train flags: TRAIN_FLAGS="--encoder-self-gating off --decoder-self-gating off".
RAW=${1:-${RAW:-}}
OUT=${2:-${OUT:-}}
[ -z "$RAW" ] || export RAW
[ -z "$OUT" ] || export OUT
TASK=multi30k_en_de
source "$(dirname "$0")/../common/stages.sh"
run_recipe
