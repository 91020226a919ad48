"""Benchmarks of posmix_fairseq, each a module with a ``main(argv=None)`` and a ``posmix-bench-*``
console entry point (also ``python -m posmix_fairseq.harness.benchmarks.<name>``):

- :mod:`.kernels` (``posmix-bench-kernels``): the gated rPosNet sublayer on the kernels of
  :mod:`posmix_fairseq.kernels` against MHA, and one constant-state decoding step; imports
  without fairseq (a GPU host with only torch and Triton runs it from a checkout).
- :mod:`.gpu` (``posmix-bench-gpu``): the whole GPU measurement in sections (kernel tests on CUDA,
  sublayer, training, decoding, quality), Markdown tables and JSON.
- :mod:`.search_attention` (``posmix-bench-search-attention``): search-time rPosNet sublayers
  (window form, constant-state step) against fairseq's MHA.
- :mod:`.decode` (``posmix-bench-decode``): whole-model beam-search decoding speed, and where a step's time goes
  (:mod:`.step_time`: the model's decoder, the beam's reordering, the encoder, fairseq's search).
- :mod:`.train_step` (``posmix-bench-train-step``): whole-model training-step time.
- :mod:`.gaussian_window` (``posmix-bench-gaussian-window``): the hard-coded Gaussian mixer, full
  vs window.

This package imports nothing itself: each module imports what it needs (fairseq only where used).
"""
