#!/usr/bin/env bash
# WMT14 En->De (newstest2014): GPA Base/Big (joint 44k vocabulary, Table 1), PosNet (PAPER=posnet: Moses,
# BPE 40k, 4096 tokens x 8, beam 4, lenpen 0.6), RecPE (PAPER=recpe: unshared embeddings), HC (PAPER=hc).
#   SIZE=base VARIANT=rposnet bash examples/wmt14_en_de/run.sh
#   PAPER=posnet VARIANT=posnet_embed PLAN=1 bash examples/wmt14_en_de/run.sh
TASK=wmt14_en_de
source "$(dirname "$0")/../common/stages.sh"
run_recipe
