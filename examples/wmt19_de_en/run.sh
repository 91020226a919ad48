#!/usr/bin/env bash
# WMT19 de->en, as the Analysis of positional encodings (APE) paper, Section 4: joint BPE (50k merges),
# base model, lr 3e-4 without warmup, 4700 tokens, training sentences <= 100 tokens; newstest2015 dev,
# newstest2018 test. The download also writes newstest_all (newstest2008-2018 without 2015); after
# training, the length analyses are:
#   posmix-concat-testset --src-file RAW/newstest_all.de --tgt-file RAW/newstest_all.en --src de --tgt en \
#       --out $OUT/concat --spm-model $OUT/prep/spm.model           # Tables 3-4
#   posmix-length-bins $OUT/generate.$ARCH.txt --spm-model $OUT/prep/spm.model --by src --count pieces \
#       --bins 25,50,75,100 --ref $OUT/prep/raw/test.en            # Table 2
# To decode sentences longer than the trained 100 positions, raise the limits at generation:
#   GEN_FLAGS="--max-source-positions 1024 --max-target-positions 1024 --model-overrides \"{'max_source_positions':1024,'max_target_positions':1024}\""
TASK=wmt19_de_en SRC=${SRC:-de} TGT=${TGT:-en}
PAPER=${PAPER:-ape} MOSES=${MOSES:-1} VOCAB=${VOCAB:-50000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-base}
VARIANT=${VARIANT:-shaw}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
