#!/usr/bin/env bash
# IWSLT14 De->En as the Gated position-based attention (GPA) paper, Section 5: lowercased, Moses, one
# 10k BPE vocabulary (Table 1), the Small model (30k updates of ~16k target tokens, beam 12, the average of
# the best checkpoint and the 29 after it, every 300 updates). Test: TED dev2010 + dev2012 + tst2010-2012
# (6,750 pairs); validation: every 23rd cleaned training pair, as fairseq's prepare-iwslt14.sh.
#   bash examples/iwslt14_de_en/run.sh                               # rPosNet Small; downloads if RAW is empty
#   PLAN=1 bash examples/iwslt14_de_en/run.sh                        # the commands and the plan, nothing runs
#   RAW=DIR VARIANT=posmix_transformer DEVICE_FLAGS=--fp16 bash examples/iwslt14_de_en/run.sh
#   STAGES="generate score" bash examples/iwslt14_de_en/run.sh       # rerun some stages
# RAW holds {train,valid,test}.{de,en}[.gz] (any raw parallel text works, e.g. Multi30k's raw release).
TASK=iwslt14_de_en
source "$(dirname "$0")/../common/stages.sh"
run_recipe
