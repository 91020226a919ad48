#!/usr/bin/env bash
# WMT14 en->fr (newstest2014): GPA Base (joint BPE 46k, Table 1), PosNet (PAPER=posnet, BPE 40k),
# HC (PAPER=hc: the paper trained on the Europarl/CommonCrawl subset only, footnote 10).
TASK=wmt14_en_fr SRC=${SRC:-en} TGT=${TGT:-fr}
PAPER=${PAPER:-gpa} MOSES=${MOSES:-1} VOCAB=${VOCAB:-46000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-base}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
