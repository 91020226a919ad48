#!/usr/bin/env bash
# WMT14 en->de (newstest2014): GPA Base/Big (joint BPE, 44k vocabulary, Table 1; sacreBLEU 13a),
# PosNet (PAPER=posnet: Moses + BPE 40k, 4096 tokens x 8, beam 4, lenpen 0.6, average of the last 5),
# RPE (PAPER=rpe), HC (PAPER=hc VARIANT=hc_sa, base model).
#   SIZE=base VARIANT=rposnet bash examples/wmt14_en_de/run.sh
#   PAPER=posnet VOCAB=40000 VARIANT=posnet_embed bash examples/wmt14_en_de/run.sh
TASK=wmt14_en_de SRC=${SRC:-en} TGT=${TGT:-de}
PAPER=${PAPER:-gpa} MOSES=${MOSES:-1} VOCAB=${VOCAB:-44000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-base}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
