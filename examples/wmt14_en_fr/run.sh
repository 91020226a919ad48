#!/usr/bin/env bash
# WMT14 En->Fr (newstest2014): GPA Base (joint 46k vocabulary, Table 1), PosNet (PAPER=posnet, 40k),
# HC (PAPER=hc: trained on the Europarl / CommonCrawl subset only, footnote 10).
#   PLAN=1 PAPER=hc VARIANT=hc_sa bash examples/wmt14_en_fr/run.sh
TASK=wmt14_en_fr
source "$(dirname "$0")/../common/stages.sh"
run_recipe
