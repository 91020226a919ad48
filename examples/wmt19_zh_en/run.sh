#!/usr/bin/env bash
# WMT19 Zh->En as the PEA paper (Table 1): unigram language-model segmentation with separate 32k
# vocabularies, newsdev2017 + newstest2017 as dev, newstest2019 test, PEA hyper-parameters.
#   PLAN=1 bash examples/wmt19_zh_en/run.sh
TASK=wmt19_zh_en
source "$(dirname "$0")/../common/stages.sh"
run_recipe
