#!/usr/bin/env python
"""CPU (or GPU) training-step time of several architectures, measured in the same run.

    posmix-bench-train-step                       # rposnet vs transformer, Small size
    posmix-bench-train-step -q --threads 1 --steps 8 --sizes small,d64 \
        --archs posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en,aposnet_iwslt_de_en,shaw_iwslt_de_en
    posmix-bench-train-step --archs "posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en+--encoder-self-gating off"

One step = forward + backward + Adam update on a fixed random batch (label-smoothed cross entropy). Every
model of a size is built first; each repetition runs every arch's ``--warmup`` untimed steps, then ``--steps``
rounds in which every arch takes one timed step in turn, so that a change of the machine's speed reaches every
arch alike. Per arch: the median step time, target tokens per second and the ratio to the first arch, each the
median over the repetitions of that repetition's figure (the ratio: of the two medians measured in the same
repetition), with the range (lowest to highest repetition). An arch may carry its own flags after ``+``.

Sizes: ``small`` is each arch's registered size (GPA's Small for the ``*_iwslt_de_en`` archs: D = 512, 6+6
layers, FFN 1024), vocabulary 8,000; ``d64`` is posmix-claims' ``--size small`` (3+3 layers, D = 64, FFN 256,
4 heads, dropout 0.1), vocabulary 4,000. ``--profile`` prints, instead of timing, where each arch's step spends
its time (torch.profiler, op by op, for the forward, the backward and the optimizer step) and the
multiply-adds of its matrix products (torch.utils.flop_counter), the figures of docs/training-profile.md.
"""
import statistics
import time
from collections import defaultdict

import torch
import torch.nn.functional as F

from posmix_fairseq.harness.testing import build_model_from_args, make_dictionary, parse_model_args
from ..command import build_parser as command_parser, console
from ..command import NON_NEGATIVE_INT, POSITIVE_INT, Number, UsageError, device_option
from ..evaluation.claims import SIZES as CLAIMS_SIZES

#: name -> (model flags, default vocabulary)
SIZES = {"small": ((), 8000), "d64": (tuple(CLAIMS_SIZES["small"].split()), 4000)}
PHASES = ("forward", "backward", "optimizer")
#: --profile's summary: kind of work -> the aten ops counted as it (every other op: "other")
KINDS = {
    "matrix products": ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_flash_attention_for_cpu_backward"),
    "softmax and masks": ("_softmax", "_softmax_backward_data", "masked_fill_", "all", "any", "bitwise_not",
                          "bitwise_or", "lt", "eq", "where"),
    "vocabulary log-softmax": ("_log_softmax", "_log_softmax_backward_data", "nll_loss_forward",
                               "nll_loss_backward"),
    "gathers and lookups": ("gather", "scatter_add_", "scatter_reduce_", "index", "index_select", "index_put_",
                            "_index_put_impl_", "index_add_", "embedding", "embedding_dense_backward", "unique_dim"),
    "norms and activations": ("native_layer_norm", "native_layer_norm_backward", "gelu", "gelu_backward",
                              "clamp_min", "threshold_backward"),
    "dropout": ("bernoulli_", "dropout", "native_dropout", "native_dropout_backward"),
    "copies": ("copy_", "cat", "clone", "_to_copy"),
    "arithmetic": ("mul", "mul_", "add", "add_", "sum", "div", "div_", "sub", "neg", "exp", "sin", "cos"),
    "fills": ("fill_", "zero_"),
}
KIND_OF = {f"aten::{op}": kind for kind, ops in KINDS.items() for op in ops}


def build(arch, extra, vocab):
    model, _ = build_model_from_args(parse_model_args(["--arch", arch, *extra], tiny=False), vocab)
    return model


def parse_archs(text):
    """[(label, arch, flags)] of ``ARCH[+FLAGS],...``."""
    entries = []
    for item in text.split(","):
        arch, _, flags = item.strip().partition("+")
        if not arch:
            raise UsageError(f"--archs: an empty arch in {text!r}")
        if any(item.strip() == label for label, _, _ in entries):
            raise UsageError(f"--archs: {item.strip()!r} is listed twice")
        entries.append((item.strip(), arch, tuple(flags.split())))
    return entries


class Step:
    """One arch's model, optimizer and fixed batch."""

    def __init__(self, arch, flags, vocab, args):
        torch.manual_seed(0)
        self.model = build(arch, flags, vocab).to(args.device).train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.params = sum(p.numel() for p in self.model.parameters())
        self.cuda = args.device.startswith("cuda")

    def forward(self, batch):
        src, lengths, prev, tgt = batch
        logits, _ = self.model(src, lengths, prev)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1), label_smoothing=0.1)

    def backward(self, loss):
        self.opt.zero_grad(set_to_none=True)
        loss.backward()

    def __call__(self, batch):
        self.backward(self.forward(batch))
        self.opt.step()

    def timed(self, batch):
        """The wall time (s) of one step."""
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        self(batch)
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t0


def make_batch(vocab, args, device):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(vocab), (args.batch, args.src_len), generator=g)
    tgt = torch.randint(4, len(vocab), (args.batch, args.tgt_len), generator=g)
    prev = torch.cat([torch.full((args.batch, 1), vocab.eos()), tgt[:, :-1]], dim=1)
    lengths = torch.full((args.batch,), args.src_len)
    return tuple(t.to(device) for t in (src, lengths, prev, tgt))


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def time_size(entries, steps, batch, args):
    """Each repetition runs every arch's warm-up steps, then --steps rounds of one timed step of every arch in
    turn; prints the table."""
    tokens = args.batch * args.tgt_len
    per_rep = defaultdict(list)  # label -> [median step time of each repetition]
    for _ in range(args.reps):
        for step in steps.values():
            for _ in range(args.warmup):
                step(batch)
        times = defaultdict(list)
        for _ in range(args.steps):
            for label, step in steps.items():
                times[label].append(step.timed(batch))
        for label in steps:
            per_rep[label].append(statistics.median(times[label]))
    base = entries[0][0]
    print(f"| arch | params | step (ms) | target tokens/s | ratio to {base} |")
    print("|---|---|---|---|---|")
    for label, _, _ in entries:
        times = per_rep[label]
        ratios = [t / b for t, b in zip(times, per_rep[base])]
        print(f"| {label} | {steps[label].params:,} | {spread([t * 1000 for t in times], '{:.1f}'.format)} | "
              f"{spread([tokens / t for t in times], '{:,.0f}'.format)} | {spread(ratios, '{:.3f}'.format)} |")


def phase_of(event, labels):
    while event is not None and event.name not in labels:
        event = event.cpu_parent
    return None if event is None else event.name


def profile_size(entries, steps, batch, args):
    """Per arch: the matrix products' multiply-adds of one step, then self CPU time per op and phase."""
    # only --profile reads them
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils import flop_counter

    aten = torch.ops.aten
    cpu_attention = {  # the CPU's fused attention, which the counter does not know (the Transformer's sublayers)
        aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda grad, q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_backward_flop_count(grad, q, k, v)}
    macs = {}
    for label, step in steps.items():
        with flop_counter.FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter:
            step(batch)
        macs[label] = counter.get_total_flops() / 2
    base = entries[0][0]
    print(f"| arch | matrix-product MACs per step | ratio to {base} |\n|---|---|---|")
    for label, _, _ in entries:
        print(f"| {label} | {macs[label] / 1e9:.2f} G | {macs[label] / macs[base]:.3f} |")
    labels = {f"posmix.{phase}" for phase in PHASES}
    summary = {}  # (arch, phase) -> kind -> ms per step
    for label, step in steps.items():
        for _ in range(args.warmup):
            step(batch)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                with record_function("posmix.forward"):
                    loss = step.forward(batch)
                with record_function("posmix.backward"):
                    step.backward(loss)
                with record_function("posmix.optimizer"):
                    step.opt.step()
        self_us = defaultdict(float)  # (phase, op) -> self CPU microseconds
        calls = defaultdict(int)
        for event in prof.events():
            phase = phase_of(event, labels)
            if phase is not None and event.name not in labels:
                self_us[phase, event.name] += event.self_cpu_time_total
                calls[phase, event.name] += 1
        total = sum(self_us.values()) / args.steps / 1000
        print(f"\n{label}: {total:.1f} ms of self CPU time per step, {args.steps} steps profiled")
        for phase in (f"posmix.{p}" for p in PHASES):
            rows = sorted(((us, op) for (ph, op), us in self_us.items() if ph == phase), reverse=True)
            phase_ms = sum(us for us, _ in rows) / args.steps / 1000
            print(f"\n| {phase[7:]} ({phase_ms:.1f} ms) | ms per step | % of step | calls per step |")
            print("|---|---|---|---|")
            for us, op in rows[:args.profile_rows]:
                ms = us / args.steps / 1000
                print(f"| {op} | {ms:.2f} | {100 * ms / total:.1f} | {calls[phase, op] / args.steps:g} |")
            kinds = summary[label, phase[7:]] = defaultdict(float)
            for us, op in rows:
                kinds[KIND_OF.get(op, "other")] += us / args.steps / 1000
    columns = [*KINDS, "other"]
    print(f"\nself CPU ms per step by kind of work (ops listed in {__name__}.KINDS)\n")
    print(f"| arch | phase | {' | '.join(columns)} | total |\n|---|---|{'---|' * (len(columns) + 1)}")
    for (label, phase), kinds in summary.items():
        cells = " | ".join(f"{kinds[kind]:.1f}" for kind in columns)
        print(f"| {label} | {phase} | {cells} | {sum(kinds.values()):.1f} |")


def main(argv=None):
    p = command_parser("posmix-bench-train-step", __doc__)
    p.add_argument("--archs", default="posmix_transformer_iwslt_de_en,rposnet_iwslt_de_en",
                   help="archs to time, comma list; ARCH+FLAGS gives an arch its own model flags; the first is the "
                        "reference of the ratios")
    p.add_argument("--sizes", default="small", help=f"comma list of {', '.join(SIZES)} (the module docstring)")
    p.add_argument("--batch", type=POSITIVE_INT, default=32, help="sentences per batch")
    p.add_argument("--src-len", type=POSITIVE_INT, default=30, help="source tokens per sentence")
    p.add_argument("--tgt-len", type=POSITIVE_INT, default=30, help="target tokens per sentence")
    p.add_argument("--vocab", type=Number(int, 5), default=None,
                   help="dictionary size (default: 8000 at small, 4000 at d64)")
    p.add_argument("--steps", type=POSITIVE_INT, default=10, help="timed (or profiled) training steps per repetition")
    p.add_argument("--warmup", type=NON_NEGATIVE_INT, default=2, help="untimed steps of every arch before each repetition")
    p.add_argument("--reps", type=POSITIVE_INT, default=3,
                   help="repetitions (each times every arch in turn); figures are their median and range")
    p.add_argument("--threads", type=POSITIVE_INT, default=2, help="torch CPU threads")
    p.add_argument("--device", default="cpu", type=device_option, help="cpu or cuda")
    p.add_argument("--model-args", default="",
                   help="extra fairseq model flags for every arch, e.g. '--encoder-layers 3'")
    p.add_argument("--profile", action="store_true",
                   help="print where each step spends its time (and its multiply-adds) instead of timing it")
    p.add_argument("--profile-rows", type=POSITIVE_INT, default=15, help="ops listed per phase with --profile")
    args = p.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",")]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        raise UsageError(f"--sizes: {', '.join(map(repr, unknown or ['']))} is not a size; valid: {', '.join(SIZES)}")
    entries = parse_archs(args.archs)
    torch.set_num_threads(args.threads)
    for size in sizes:
        flags, default_vocab = SIZES[size]
        vocab = make_dictionary((args.vocab or default_vocab) - 4)
        batch = make_batch(vocab, args, args.device)
        print(f"\n{size}: batch {args.batch} x src {args.src_len} x tgt {args.tgt_len}, vocab {len(vocab)}, "
              f"{args.threads} threads, device {args.device}, torch {torch.__version__}, "
              f"{args.reps} repetitions of {args.warmup} + {args.steps} steps")
        steps = {label: Step(arch, (*flags, *args.model_args.split(), *own), vocab, args)
                 for label, arch, own in entries}
        (profile_size if args.profile else time_size)(entries, steps, batch, args)
        del steps


cli = console(main, "posmix-bench-train-step")


if __name__ == "__main__":
    raise SystemExit(cli())
