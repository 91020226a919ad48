"""Evaluation, analyses and reproduction commands.

One small module per idea:

- ``generate_output``: reading what ``fairseq-generate`` printed (H-/D-/T-/S- lines);
- ``detok``: undoing the recipe's subword/tokenisation step (SentencePiece, or BPE removal + Moses) on
  the lines that still need it;
- ``metrics``: BLEU / chrF / chrF++ / TER (sacreBLEU), the COMET family (COMET, CometKiwi, XCOMET;
  unbabel-comet), BLEURT (bleurt-pytorch);
- ``significance``: paired bootstrap resampling and approximate randomization over segment scores
  (sacreBLEU's own tests are used for its corpus metrics);
- ``score``: the ``posmix-score`` command;
- ``average``: ``posmix-average`` (checkpoint averaging);
- ``length_bins``, ``concat_testset``, ``decode_speed``, ``attention``, ``contrastive``: the papers'
  analyses;
- ``reproduce``: ``posmix-reproduce --table NAME``.
"""
