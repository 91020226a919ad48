#!/usr/bin/env bash
# WMT18 en->zh, tested on newstest2017 as the GPA paper (Tables 2 and 7): separate vocabularies of
# 32k (en) and 45k (zh) in Table 1 (here one VOCAB for both sides: set VOCAB=45000 for the target
# size), sacreBLEU 'zh' tokenizer (footnote 3). Light-convolution chain (Table 7): VARIANT=lightconvnet
# with TRAIN_FLAGS from the README.
TASK=wmt18_en_zh SRC=${SRC:-en} TGT=${TGT:-zh}
PAPER=${PAPER:-gpa} MOSES=0 SEPARATE=1 VOCAB=${VOCAB:-32000} TOKENIZE=${TOKENIZE:-zh} SIZE=${SIZE:-base}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
