#!/usr/bin/env bash
# IWSLT14 de->en, as the Gated position-based attention (GPA) paper, Section 5.1: lowercased, joint BPE
# (10k vocabulary, Table 1), Small model (30k updates, ~16k target tokens, beam 12, average of the best
# checkpoint and the 29 after it, every 300 updates). Test: TED dev2010 + dev2012 + tst2010-2012 (6,750 pairs).
#   bash examples/iwslt14_de_en/run.sh                               # rPosNet Small; downloads if RAW is empty
#   RAW=DIR VARIANT=posmix_transformer DEVICE_FLAGS=--fp16 bash examples/iwslt14_de_en/run.sh
#   STAGES="generate score" bash examples/iwslt14_de_en/run.sh       # rerun some stages
# RAW holds {train,valid,test}.{de,en}[.gz] (any raw parallel text works, e.g. ../shared/data/multi30k).
TASK=iwslt14_de_en SRC=${SRC:-de} TGT=${TGT:-en}
PAPER=${PAPER:-gpa} LOWERCASE=1 MOSES=${MOSES:-1} VOCAB=${VOCAB:-10000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-small}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
