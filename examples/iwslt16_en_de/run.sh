#!/usr/bin/env bash
# IWSLT16 En<->De as the Hard-coded Gaussian attention (HC) paper: its small IWSLT model (embedding 288,
# hidden 507, 4 heads, 5 layers; lr 3e-4, linear schedule, Section 4.2), BLEU with sacreBLEU's 'intl'
# tokenizer (footnote 13) on tst2013 (footnote 9). Reverse direction: SRC=de TGT=en.
#   VARIANT=hc_sa bash examples/iwslt16_en_de/run.sh       # hc_sa | hc_all | sh_x | posmix_transformer (BASE)
#   PLAN=1 bash examples/iwslt16_en_de/run.sh
# Contrastive evaluation (HC Table 4, Fig. 5): STAGES="... score contrastive" reads LingEval97's
# lingeval97.json from LINGEVAL97 (default RAW/lingeval97.json) or fetches it (needs internet).
TASK=iwslt16_en_de
source "$(dirname "$0")/../common/stages.sh"
run_recipe
