#!/usr/bin/env bash
# WMT16 en<->ro (newstest2016), as the HC paper (Table 2, Figs. 3 and 7): Moses + joint BPE following
# Sennrich et al. (2016); base model. Reverse direction: SRC=ro TGT=en.
# Fig. 7 (cross heads per layer): TRAIN_FLAGS="--decoder-cross-heads 1,1,1,1,1,1" VARIANT=sh_x
TASK=wmt16_en_ro SRC=${SRC:-en} TGT=${TGT:-ro}
PAPER=${PAPER:-hc} MOSES=${MOSES:-1} VOCAB=${VOCAB:-40000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-base}
VARIANT=${VARIANT:-hc_sa}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
