#!/usr/bin/env bash
# WMT19 De->En as the Analysis of positional encodings (PEA) paper, Section 4: 50k joint BPE, base model,
# lr 3e-4 without warmup, x0.9 after 6 validations without improvement, 8 validations per epoch,
# 4700 tokens, training sentences <= 100 tokens, unshared embeddings; newstest2015 dev, newstest2018 test.
# newstest_all (2008-2018 without 2015) is downloaded too: TEST_SET=newstest_all, and the stages
# lengthbins (Table 2) and concat (Tables 3-4). Test sentences longer than 100 tokens are translated
# (the limits are raised at generation for models that extrapolate).
#   PLAN=1 bash examples/wmt19_de_en/run.sh
TASK=wmt19_de_en
source "$(dirname "$0")/../common/stages.sh"
run_recipe
