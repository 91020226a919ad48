"""Benchmark of the gated position-based attention kernels; see posmix_fairseq/kernels/bench.py.

    python scripts/bench_kernels.py                          # GPU, the issue's sizes
    python scripts/bench_kernels.py --device cpu --quick     # CPU smoke run, torch backends only

Imports without fairseq (a GPU host with only torch and Triton can run it from a checkout).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from posmix_fairseq.kernels.bench import main  # noqa: E402

if __name__ == "__main__":
    main()
