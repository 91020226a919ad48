#!/usr/bin/env bash
# WMT18 En->Zh, tested on newstest2017 as the GPA paper (Tables 2 and 7): separate vocabularies of 32k (en)
# and 45k (zh) (Table 1), no shared embeddings (Table 7's 107M Transformer), sacreBLEU 'zh' (footnote 3).
#   PLAN=1 bash examples/wmt18_en_zh/run.sh
TASK=wmt18_en_zh
source "$(dirname "$0")/../common/stages.sh"
run_recipe
