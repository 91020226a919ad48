#!/usr/bin/env bash
# IWSLT17 En<->Ja as the HC paper: SentencePiece 32k (footnote 13), sacreBLEU 'intl', test tst2017 (Table 1:
# 1,452 pairs). Reverse direction: SRC=ja TGT=en.
#   PLAN=1 bash examples/iwslt17_en_ja/run.sh
TASK=iwslt17_en_ja
source "$(dirname "$0")/../common/stages.sh"
run_recipe
