"""fairseq-train, -generate or -preprocess in this process, as posmix-bench-gpu runs them in a child:

    python -m posmix_fairseq.harness.benchmarks.gpu.fairseq_child train|generate|preprocess FAIRSEQ-ARGS...

The arguments are fairseq's own. Two differences from the console scripts, both for a single GPU:

- ``--bf16`` trains and decodes in bfloat16 on the GPU. fairseq 0.12 reads ``--bf16`` as a TPU
  setting (its options set ``args.tpu``, which then imports torch_xla); here ``args.tpu`` is reset
  after parsing, so the trainer keeps the CUDA device and casts the model to bfloat16.
- At the end a line ``POSMIX_CHILD {"peak_bytes": ..., "seconds": ...}`` gives the peak GPU memory
  allocated during the run (``torch.cuda.max_memory_allocated``) and the wall time of the command; then the
  process exits at once with status 0, without the interpreter's teardown (see the end of this module).
"""
import json
import os
import sys
import time

import torch
from fairseq import options

import posmix_fairseq


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "generate", "preprocess"):
        raise SystemExit("usage: python -m posmix_fairseq.harness.benchmarks.gpu.fairseq_child train|generate|preprocess ARGS")
    verb, args_list = argv[0], argv[1:]
    posmix_fairseq.register()  # --user-dir does not re-import the package this module's import loaded
    start = time.perf_counter()
    if verb == "preprocess":
        from fairseq_cli import preprocess  # fairseq_cli's modules set up logging on import: the verb's own
        preprocess.main(options.get_preprocessing_parser().parse_args(args_list))
    else:
        parser = options.get_training_parser() if verb == "train" else options.get_generation_parser()
        args = options.parse_args_and_arch(parser, args_list)
        args.tpu = False  # --bf16 on a GPU (see the module docstring)
        if verb == "train":
            from fairseq_cli import train  # fairseq_cli's modules set up logging on import: the verb's own
            train.main(args)
        else:
            from fairseq_cli import generate  # fairseq_cli's modules set up logging on import: the verb's own
            generate.main(args)
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    print("POSMIX_CHILD " + json.dumps(dict(peak_bytes=peak, seconds=time.perf_counter() - start)), flush=True)


if __name__ == "__main__":
    main()
    # Done and reported: leave without the interpreter's teardown, where the DataLoader's worker processes and
    # threads (--num-workers) now and then end the process with a C++ "terminate called without an active
    # exception" after a complete run, which would read as a failed one. A failure raises before this line.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
