#!/usr/bin/env bash
# IWSLT16 en<->de, as the Hard-coded Gaussian attention (HC) paper, Sections 3-4: the HC small IWSLT
# model (embedding 288, hidden 507, 4 heads, 5 layers; lr 3e-4, linear schedule); BLEU with sacreBLEU's
# 'intl' tokenizer (footnote 13) on tst2013. Reverse direction: SRC=de TGT=en.
#   VARIANT=hc_sa bash examples/iwslt16_en_de/run.sh       # hc_sa | hc_all | sh_x (+ _iwslt_small)
# Contrastive evaluation (HC Table 4, Fig. 5): add the stage "contrastive" (STAGES="... score contrastive"):
#   it reads LingEval97's lingeval97.json from LINGEVAL97 (default RAW/lingeval97.json) or fetches it from
#   https://github.com/rsennrich/lingeval97, then runs posmix-contrastive with the recipe's preprocessing.
TASK=iwslt16_en_de SRC=${SRC:-en} TGT=${TGT:-de}
PAPER=${PAPER:-hc} MOSES=${MOSES:-1} VOCAB=${VOCAB:-16000} TOKENIZE=${TOKENIZE:-intl} SIZE=${SIZE:-small}
VARIANT=${VARIANT:-hc_sa}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
