#!/usr/bin/env python
"""CPU (or GPU) training-step time of several architectures, measured in the same run.

    posmix-bench-train-step                       # rposnet vs transformer, Small size
    posmix-bench-train-step --archs rposnet_iwslt_de_en,aposnet_iwslt_de_en \
        --batch 32 --src-len 30 --tgt-len 30 --steps 10

One step = forward + backward + Adam update on a fixed random batch (label-smoothed cross
entropy). Reports the median step time of each arch and its ratio to the first arch.
"""
import statistics
import time

import torch
import torch.nn.functional as F

from posmix_fairseq.harness.testing import build_model_from_args, make_dictionary, parse_model_args
from ..command import build_parser as command_parser, console
from ..command import NON_NEGATIVE_INT, POSITIVE_INT


def build(arch, extra, vocab):
    model, _ = build_model_from_args(parse_model_args(["--arch", arch, *extra], tiny=False), vocab)
    return model


def main(argv=None):
    p = command_parser("posmix-bench-train-step", __doc__)
    p.add_argument("--archs", default="posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en",
                   help="archs to time, comma list")
    p.add_argument("--batch", type=POSITIVE_INT, default=32, help="sentences per batch")
    p.add_argument("--src-len", type=POSITIVE_INT, default=30, help="source tokens per sentence")
    p.add_argument("--tgt-len", type=POSITIVE_INT, default=30, help="target tokens per sentence")
    p.add_argument("--vocab", type=POSITIVE_INT, default=8000, help="dictionary size")
    p.add_argument("--steps", type=POSITIVE_INT, default=10, help="timed training steps")
    p.add_argument("--warmup", type=NON_NEGATIVE_INT, default=2, help="untimed steps before timing")
    p.add_argument("--threads", type=POSITIVE_INT, default=2, help="torch CPU threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--model-args", default="", help="extra fairseq model flags, e.g. '--encoder-layers 3'")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    vocab = make_dictionary(args.vocab - 4)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(vocab), (args.batch, args.src_len), generator=g)
    tgt = torch.randint(4, len(vocab), (args.batch, args.tgt_len), generator=g)
    prev = torch.cat([torch.full((args.batch, 1), vocab.eos()), tgt[:, :-1]], dim=1)
    lengths = torch.full((args.batch,), args.src_len)
    src, tgt, prev, lengths = (t.to(args.device) for t in (src, tgt, prev, lengths))
    print(f"batch {args.batch} x src {args.src_len} x tgt {args.tgt_len}, vocab {len(vocab)}, "
          f"{args.threads} threads, device {args.device}, torch {torch.__version__}")
    results = []
    for arch in args.archs.split(","):
        torch.manual_seed(0)
        model = build(arch, args.model_args.split(), vocab).to(args.device).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        times = []
        for step in range(args.warmup + args.steps):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits, _ = model(src, lengths, prev)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1), label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
        params = sum(p.numel() for p in model.parameters())
        results.append((arch, statistics.median(times), params))
    base = results[0][1]
    print(f"| arch | params | median step (ms) | ratio to {results[0][0]} |")
    print("|---|---|---|---|")
    for arch, t, params in results:
        print(f"| {arch} | {params:,} | {t * 1000:.1f} | {t / base:.2f} |")


cli = console(main, "posmix-bench-train-step")


if __name__ == "__main__":
    raise SystemExit(cli())
