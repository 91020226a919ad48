#!/usr/bin/env bash
# IWSLT17 en<->ja, as the HC paper (Section 4.1, footnote 13): SentencePiece 32k, detokenised BLEU.
# Reverse direction: SRC=ja TGT=en. For Japanese output, score with a Japanese tokenizer
# (TOKENIZE=ja-mecab needs sacrebleu[ja]); the default 13a matches the paper's "de-tokenized BLEU".
TASK=iwslt17_en_ja SRC=${SRC:-en} TGT=${TGT:-ja}
PAPER=${PAPER:-hc} MOSES=0 VOCAB=${VOCAB:-32000} TOKENIZE=${TOKENIZE:-13a} SIZE=${SIZE:-small}
VARIANT=${VARIANT:-hc_sa}
source "$(dirname "$0")/../common/stages.sh"
run_recipe
