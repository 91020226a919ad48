#!/usr/bin/env python
"""Whole-model beam-search decoding speed (tokens/s) of Transformer, Shaw, aPosNet, rPosNet and the
frozen (search-time, posmix-freeze) aPosNet / rPosNet, measured side by side in one run, as the GPA
paper's Table 4 reports it (GPA Section 7.1: "average CPU decoding speeds and
variances measured across ten runs").

    posmix-bench-decode         # default: 30 tokens, beams 12 and 5, batch 1, 10 runs (~3 CPU-min)
    posmix-bench-decode --sizes typical,long --beams 12,5 --batch-sizes 1,4 --runs 10   # full
    posmix-bench-decode --operators --beams 5 --device cuda   # what one search step launches (no timing)

Models: Base size (``*_wmt_en_de``: D 512, 6+6 layers, 8 heads, K 16) with random weights and a
shared vocabulary of --vocab words; the frozen models come from the random trained ones through
``posmix_fairseq.harness.freeze.freeze_model`` with N = the longest position the setting needs. Every
model decodes exactly the same number of steps: fairseq's SequenceGenerator with min_len = max_len
= the output length (EOS forbidden before it, forced at it). One run decodes --batches batches of
random source sentences; the models take turns within each run (round-robin), so a load change
on the shared cores hits all of them alike. Tokens = generated tokens of the best hypotheses (EOS
included). Reported: mean ± std and variance of tokens/s over the runs, each model's ratio to
the Transformer (ratio of means), and the median and range of the ratios of single runs (each run's models
decode one after the other). A second table gives where a step's wall time goes, measured in the same decodes
(benchmarks/step_time.py): the share inside the model's decoder, the beam's reordering of the model's state, the
encoder, and fairseq's search around them. ``--operators`` counts instead what one step asks of the device: operators,
scalar reads and, on CUDA, kernels per step (benchmarks/operator_counts.py), from decoding half the output length
and the whole of it.
"""
import statistics
import time


import torch  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402
from fairseq.tasks.translation import TranslationConfig, TranslationTask  # noqa: E402

from posmix_fairseq.harness.freeze import freeze_model  # noqa: E402
from posmix_fairseq.harness.testing import build_model_from_args, make_dictionary, parse_model_args, random_batch  # noqa: E402
from . import operator_counts  # noqa: E402
from .step_time import PARTS, TimedEnsemble, shares  # noqa: E402
from ..command import (POSITIVE_INT, Number, NumberList, UsageError, build_parser as command_parser,  # noqa: E402
                       console, device_option)

MODELS = {  # name -> (arch, frozen)
    "Transformer": ("posmix_transformer", False),
    "Shaw": ("shaw", False),
    "aPosNet": ("aposnet", False),
    "rPosNet": ("rposnet", False),
    "aPosNet frozen": ("aposnet", True),
    "rPosNet frozen": ("rposnet", True),
}
SIZES = {"typical": (30, 30), "long": (512, 512)}  # name -> (source length, output length)


def build(name, size, dictionary, num_positions, embed_dim=None):
    """Model ``name`` at arch size ``size``; ``embed_dim`` (D, FFN 4D) replaces the size's widths, its layers and heads
    kept."""
    arch, frozen = MODELS[name]
    widths = []
    for side in ("encoder", "decoder") if embed_dim is not None else ():
        widths += [f"--{side}-embed-dim", str(embed_dim), f"--{side}-ffn-embed-dim", str(4 * embed_dim)]
    args = parse_model_args(["--arch", f"{arch}_{size}", "--share-all-embeddings", "--max-source-positions", "1024",
                             "--max-target-positions", "1024", *widths], tiny=False)
    heads = max(args.encoder_attention_heads, args.decoder_attention_heads)
    if embed_dim is not None and embed_dim % heads:
        raise UsageError(f"--embed-dim {embed_dim}: give a multiple of the {size} models' {heads} heads")
    model, _ = build_model_from_args(args, dictionary, seed=1)
    model.eval()
    if frozen:
        task = TranslationTask(TranslationConfig(data="unused-data-dir"), dictionary, dictionary)
        model, _ = freeze_model(task, model, args, num_positions)
    return model


def decode(generator, model, batches):
    tokens, start = 0, time.perf_counter()
    with torch.inference_mode():
        for src, src_len in batches:
            hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": src_len}})
            tokens += sum(int(h[0]["tokens"].numel()) for h in hypos)
    if src.is_cuda:
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - start


def bench_setting(models, dictionary, beam, batch, src_len, out_len, runs, n_batches, device="cpu"):
    """({model: tokens/s of each run}, tokens per run, {model: step_time.shares of all its timed decodes})."""
    batches = [tuple(t.to(device) for t in random_batch(dictionary, [src_len] * batch, seed=100 + i))
               for i in range(n_batches)]
    ensembles = {name: TimedEnsemble([m]) for name, m in models.items()}
    generators = {name: SequenceGenerator(ensembles[name], dictionary, beam_size=beam, max_len_a=0,
                                          max_len_b=out_len, min_len=out_len) for name in models}
    for name, m in models.items():  # untimed warm-up pass
        decode(generators[name], m, batches[:1])
        ensembles[name].reset()
    speeds = {name: [] for name in models}
    seconds = {name: 0.0 for name in models}
    tokens = {}
    for _ in range(runs):
        for name, m in models.items():
            n, secs = decode(generators[name], m, batches)
            tokens.setdefault(name, n)
            if n != tokens[name] or n != tokens[next(iter(models))]:
                raise RuntimeError(f"{name} decoded {n} tokens, not the same number as the others")
            speeds[name].append(n / secs)
            seconds[name] += secs
    step_shares = {name: shares(ensembles[name].seconds, seconds[name], ensembles[name].steps) for name in models}
    return speeds, tokens[next(iter(models))], step_shares


def run_ratios(speeds, base):
    """(median, lowest, highest) of one model's per-run ratios to the ``base`` model's tokens/s in the same runs."""
    ratios = [s / b for s, b in zip(speeds, base)]
    return statistics.median(ratios), min(ratios), max(ratios)


def operators_setting(models, dictionary, beam, batch, src_len, out_len, device="cpu"):
    """{model: the counts of one search step (operator_counts.per_step)}, from one batch decoded to out_len // 2
    and to out_len tokens (each once untimed first)."""
    batches = [tuple(t.to(device) for t in random_batch(dictionary, [src_len] * batch, seed=100))]
    short_len = out_len // 2
    steps = {}
    for name, model in models.items():
        counts = {}
        for length in (short_len, out_len):
            generator = SequenceGenerator([model], dictionary, beam_size=beam, max_len_a=0, max_len_b=length,
                                          min_len=length)
            decode(generator, model, batches)
            counts[length] = operator_counts.profile(lambda: decode(generator, model, batches), device)
        steps[name] = operator_counts.per_step(counts[short_len], counts[out_len], out_len - short_len)
    return steps


def print_operators(size, out_len, beam, batch, steps, device, top=8):
    first = steps[next(iter(steps))]["operators"]
    for name, step in steps.items():
        kernels = (f"{step['kernels']:.1f} | {step['kernel_us']:.0f}" if device.startswith("cuda") else "— | —")
        common = ", ".join(f"{op} {n:g}" for op, n in list(step["by_operator"].items())[:top])
        print(f"| {size} ({out_len}) | {beam} | {batch} | {name} | {step['operators']:.1f} | "
              f"{step['scalar_reads']:.1f} | {kernels} | {step['operators'] / first:.2f} | {common} |", flush=True)


def main(argv=None):
    p = command_parser("posmix-bench-decode", __doc__)
    p.add_argument("--sizes", default="typical", help="typical (30 -> 30 tokens), long (512 -> 512), comma list")
    p.add_argument("--beams", default="12,5", type=NumberList(POSITIVE_INT), help="beam sizes, comma list")
    p.add_argument("--batch-sizes", default="1", type=NumberList(POSITIVE_INT),
                   help="sentences per batch, comma list (the full table: 1,4)")
    p.add_argument("--runs", type=Number(int, 2), default=10, help="timed runs per row (at least 2: mean and variance)")
    p.add_argument("--batches", type=POSITIVE_INT, default=1, help="batches decoded per run")
    p.add_argument("--models", default=",".join(MODELS), help="models to decode with, comma list")
    p.add_argument("--vocab", type=POSITIVE_INT, default=10000, help="dictionary size of the random models")
    p.add_argument("--model-size", default="wmt_en_de", help="arch suffix: wmt_en_de (Base), iwslt_de_en, ...")
    p.add_argument("--embed-dim", type=POSITIVE_INT, default=None,
                   help="D of every model (FFN 4D), the size's layers and heads kept (default: the size's). A small D "
                        "leaves little arithmetic: a step's time is then mostly the host's (Python and dispatch), "
                        "what a GPU step at small batches waits on")
    p.add_argument("--threads", type=POSITIVE_INT, default=1, help="torch CPU threads")
    p.add_argument("--device", default="cpu", type=device_option, help="cpu (the paper's Table 4) or cuda")
    p.add_argument("--operators", action="store_true",
                   help="count what one search step asks of the device instead of timing it: operators, scalar "
                        "reads and, on CUDA, kernels and their device time per step, each model's operators as a "
                        "ratio to the first model's (--runs and --batches are not used)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    names = [n.strip() for n in a.models.split(",")]
    for n in names:
        if n not in MODELS:
            p.error(f"--models: {n!r} is not one of {', '.join(MODELS)}")
    sizes = [s.strip() for s in a.sizes.split(",")]
    for s in sizes:
        if s not in SIZES:
            p.error(f"--sizes: {s!r} is not one of {', '.join(SIZES)}")
    dictionary = make_dictionary(a.vocab - 4)
    width = "" if a.embed_dim is None else f" at D = {a.embed_dim}"
    share_rows = []
    if a.operators:
        print(f"{a.device.upper()}: what one beam-search step asks of the device, {a.model_size} models{width} with "
              f"random weights, vocabulary {a.vocab}; per step: (decoding the output length - decoding half of it) / "
              f"the steps between; ratio = operators / {names[0]}'s\n")
        print("| output | beam | batch | model | operators | scalar reads | kernels | kernel µs | ratio | "
              "most frequent operators |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---|")
    else:
        print(f"{a.device.upper()} decoding, {a.model_size} models{width} with random weights, vocabulary {a.vocab}, "
              f"{a.threads} thread(s), {a.runs} runs of {a.batches} batch(es); tokens/s mean ± std (variance); "
              "ratio = mean / Transformer's\n")
        print("| output | beam | batch | model | tokens/run | tokens/s | variance | ratio | ratio per run: median "
              "(range) |\n|---|---:|---:|---|---:|---:|---:|---:|---|")
    for size in sizes:
        src_len, out_len = SIZES[size]
        positions = max(src_len, out_len) + 2
        models = {n: build(n, a.model_size, dictionary, positions, a.embed_dim).to(a.device) for n in names}
        for beam in a.beams:
            for batch in a.batch_sizes:
                if a.operators:
                    steps = operators_setting(models, dictionary, beam, batch, src_len, out_len, a.device)
                    print_operators(size, out_len, beam, batch, steps, a.device)
                    continue
                speeds, tokens, step_shares = bench_setting(models, dictionary, beam, batch, src_len, out_len, a.runs,
                                                            a.batches, a.device)
                base = statistics.fmean(speeds[names[0]])
                for n in names:
                    s = speeds[n]
                    mean = statistics.fmean(s)
                    median, low, high = run_ratios(s, speeds[names[0]])
                    print(f"| {size} ({out_len}) | {beam} | {batch} | {n} | {tokens} | {mean:.1f} ± "
                          f"{statistics.stdev(s):.1f} | {statistics.variance(s):.2f} | {mean / base:.2f} | "
                          f"{median:.2f} ({low:.2f}-{high:.2f}) |", flush=True)
                    share = step_shares[n]
                    share_rows.append(f"| {size} ({out_len}) | {beam} | {batch} | {n} | {share['step_ms']:.2f} | "
                                      + " | ".join(f"{share[part]:.1f}" for part in PARTS) + " |")
        del models
    if share_rows:
        print("\nWhere a step's wall time goes, in the same decodes (% of the decode; ms/step = wall time / decoder "
              "steps): decoder = the model's decoder step (forward_decoder), reorder = the beam's reordering of the "
              "model's state, encoder = once per batch, search = fairseq's beam search around them\n")
        print("| output | beam | batch | model | ms/step | decoder % | reorder % | encoder % | search % |\n"
              "|---|---:|---:|---|---:|---:|---:|---:|---:|")
        print("\n".join(share_rows), flush=True)
    return 0

cli = console(main, "posmix-bench-decode")


if __name__ == "__main__":
    raise SystemExit(cli())
