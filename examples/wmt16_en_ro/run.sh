#!/usr/bin/env bash
# WMT16 En<->Ro (newstest2016) as the HC paper (Table 2, Figs. 3 and 7, Table 3): Sennrich et al. (2016)
# preprocessing (Romanian normalisation and diacritics removal, Moses), joint BPE; base model.
# Reverse direction: SRC=ro TGT=en. Fig. 7: SIZE=small VARIANT=sh_x TRAIN_FLAGS="--decoder-cross-heads 0,0,0,1,1".
#   PLAN=1 bash examples/wmt16_en_ro/run.sh
TASK=wmt16_en_ro
source "$(dirname "$0")/../common/stages.sh"
run_recipe
