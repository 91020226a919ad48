#!/usr/bin/env bash
# WMT19 zh->en, as the APE paper (Table 1): unigram language-model segmentation with separate 32k
# vocabularies, newsdev2017 + newstest2017 as dev, newstest2019 test, APE hyper-parameters.
TASK=wmt19_zh_en SRC=${SRC:-zh} TGT=${TGT:-en}
PAPER=${PAPER:-ape} MOSES=0 SEPARATE=1 SPM_TYPE=unigram VOCAB=${VOCAB:-32000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-base}
VARIANT=${VARIANT:-shaw}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
