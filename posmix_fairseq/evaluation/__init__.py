"""Evaluation, analyses and reproduction commands.

One small module per idea:

- ``generate_output``: reading what ``fairseq-generate`` printed (H-/T-/S- lines);
- ``detok``: undoing the recipe's subword/tokenisation step (SentencePiece, or BPE removal + Moses);
- ``metrics``: BLEU / chrF / chrF++ / TER (sacreBLEU), COMET (unbabel-comet), BLEURT (bleurt-pytorch);
- ``significance``: paired bootstrap resampling over segment scores (sacreBLEU's own test is used
  for its corpus metrics);
- ``score``: the ``posmix-score`` command;
- ``average``: ``posmix-average`` (checkpoint averaging);
- ``length_bins``, ``concat_testset``, ``decode_speed``, ``attention``, ``contrastive``: the papers'
  analyses;
- ``reproduce``: ``posmix-reproduce --table NAME``.
"""
