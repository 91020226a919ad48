#!/usr/bin/env bash
# Multi30k (task 1) En->De with any posmix arch: SentencePiece BPE 8k, GPA's Small model with Multi30k's own
# training length (20k updates of 4096 tokens), beam 5, sacreBLEU.
#
#   bash examples/multi30k_en_de/run.sh [RAW_DIR] [OUT_DIR]
#   ARCH=shaw_iwslt_de_en MAX_UPDATE=20000 bash examples/multi30k_en_de/run.sh
#   PLAN=1 bash examples/multi30k_en_de/run.sh
#
# RAW_DIR holds {train,val,test_2016_flickr}.{en,de}[.gz] (the raw release of the public
# multi30k/dataset repository, data/task1/raw); default ../shared/data/multi30k.
# Extra fairseq-train flags: TRAIN_FLAGS="--encoder-self-gating off --decoder-self-gating off".
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAW=${1:-${RAW:-${POSMIX_MULTI30K:-$ROOT/../shared/data/multi30k}}}
OUT=${2:-${OUT:-$ROOT/runs/multi30k_en_de}}
export RAW OUT
TASK=multi30k_en_de
source "$(dirname "$0")/../common/stages.sh"
run_recipe
