#!/usr/bin/env bash
# IWSLT16 en<->de, as the Hard-coded Gaussian attention (HC) paper, Sections 3-4: the HC small IWSLT
# model (embedding 288, hidden 507, 4 heads, 5 layers; lr 3e-4, linear schedule); BLEU with sacreBLEU's
# 'intl' tokenizer (footnote 13) on tst2013. Reverse direction: SRC=de TGT=en.
#   VARIANT=hc_sa bash examples/iwslt16_en_de/run.sh       # hc_sa | hc_all | sh_x (+ _iwslt_small)
# Contrastive evaluation (HC Table 4, Fig. 5): the real LingEval97 set is https://github.com/rsennrich/lingeval97
#   (files lingeval97.{en,de,json}); after training run
#   posmix-contrastive $OUT/data-bin --path $OUT/checkpoints/$ARCH/checkpoint_final.pt --prefix lingeval97 \
#       --spm-model $OUT/prep/spm.model --per-token
TASK=iwslt16_en_de SRC=${SRC:-en} TGT=${TGT:-de}
PAPER=${PAPER:-hc} MOSES=${MOSES:-1} VOCAB=${VOCAB:-16000} TOKENIZE=${TOKENIZE:-intl} SIZE=${SIZE:-small}
VARIANT=${VARIANT:-hc_sa}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
