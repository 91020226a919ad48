#!/usr/bin/env python
"""Forward time of one hard-coded Gaussian mixer, ``--S-gaussian-impl full`` vs ``window``.

    posmix-bench-gaussian-window                     # N = 32, 128, 512; batch 8; D 512; K 16
    posmix-bench-gaussian-window --lengths 64,1024 --threads 2

Reports the median of ``--repeats`` calls (after two warm-up calls) for each length.
"""
import statistics
import time

import torch

from posmix_fairseq.harness.testing import mix, mixer_spec, standalone_mixer
from ..command import build_parser as command_parser, console
from ..command import POSITIVE_INT, NumberList


def main(argv=None):
    parser = command_parser("posmix-bench-gaussian-window", __doc__)
    parser.add_argument("--lengths", default="32,128,512", type=NumberList(POSITIVE_INT), help="sentence lengths N, comma list")
    parser.add_argument("--batch", type=POSITIVE_INT, default=8, help="sentences per batch")
    parser.add_argument("--dim", type=POSITIVE_INT, default=512, help="model dimension D")
    parser.add_argument("--heads", type=POSITIVE_INT, default=8, help="attention heads H")
    parser.add_argument("--k", type=POSITIVE_INT, default=16, help="window half-width K (GPA: 16 Small/Base, 8 Big)")
    parser.add_argument("--repeats", type=POSITIVE_INT, default=5, help="timed runs per row")
    parser.add_argument("--threads", type=POSITIVE_INT, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    for n in args.lengths:
        times = {}
        for impl in ("full", "window"):
            spec = mixer_spec("gaussian", options={"gaussian-impl": impl}, k=args.k, d=args.dim, h=args.heads)
            mixer = standalone_mixer(spec).eval()
            x = torch.randn(n, args.batch, args.dim)
            samples = []
            with torch.no_grad():
                for i in range(args.repeats + 2):
                    start = time.perf_counter()
                    mix(mixer, x, need_weights=False)
                    if i >= 2:
                        samples.append((time.perf_counter() - start) * 1000)
            times[impl] = statistics.median(samples)
        print(f"N={n} batch={args.batch} D={args.dim} H={args.heads} K={args.k} threads={args.threads}: "
              f"full {times['full']:.1f} ms, window {times['window']:.1f} ms")


cli = console(main, "posmix-bench-gaussian-window")


if __name__ == "__main__":
    raise SystemExit(cli())
