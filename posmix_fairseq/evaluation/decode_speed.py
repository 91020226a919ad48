"""``posmix-decode-speed``: CPU decoding speed of any checkpoint, as the GPA paper's Table 4 measures
it ("average CPU decoding speeds and variances measured across ten runs", tokens per second).

One run = beam search over the whole subset (or its first --max-sentences sentences) with fairseq's
SequenceGenerator, as fairseq-generate builds it. Tokens = generated target tokens of the best
hypotheses, EOS included. Reported: mean, variance and standard deviation over the runs of tokens/s,
plus sentences/s (the HC paper's Table 3 unit). ``measure_decode_speed`` is importable for other
benchmarks.

    posmix-decode-speed data-bin --path checkpoints/checkpoint_best.pt --runs 10 --beam 4 --threads 1
"""
import argparse
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

import torch

from .fairseq_loading import batches, load_for_inference


@dataclass
class SpeedResult:
    runs: int
    sentences: int
    tokens: int                      # per run
    seconds: List[float] = field(default_factory=list)
    tokens_per_s: List[float] = field(default_factory=list)
    mean_tokens_per_s: float = 0.0
    var_tokens_per_s: float = 0.0
    std_tokens_per_s: float = 0.0
    mean_sentences_per_s: float = 0.0
    threads: int = 1


def decode_once(task, generator, models, cfg, subset, max_sentences: int, batch_size: int, max_tokens: int):
    """(sentences, generated tokens, seconds) for one pass over the subset."""
    n_sent = n_tok = 0
    elapsed = 0.0
    for sample in batches(cfg, task, subset, max_sentences=batch_size, max_tokens=max_tokens):
        if max_sentences and n_sent >= max_sentences:
            break
        if max_sentences and n_sent + sample["nsentences"] > max_sentences:
            keep = max_sentences - n_sent
            sample = {**sample, "id": sample["id"][:keep], "nsentences": keep,
                      "net_input": {k: v[:keep] for k, v in sample["net_input"].items()}}
        start = time.perf_counter()
        with torch.inference_mode():
            hypos = task.inference_step(generator, models, sample)
        elapsed += time.perf_counter() - start
        n_sent += len(hypos)
        n_tok += sum(int(h[0]["tokens"].numel()) for h in hypos)
    return n_sent, n_tok, elapsed


def measure_decode_speed(data_dir: str, checkpoint: str, runs: int = 10, beam: int = 4, subset: str = "test",
                         max_sentences: int = 0, batch_size: int = 0, max_tokens: int = 4000, threads: int = 1,
                         extra: Sequence[str] = (), warmup: bool = True) -> SpeedResult:
    if runs < 1:
        raise ValueError(f"--runs must be >= 1 (got {runs})")
    if threads < 1:
        raise ValueError(f"--threads must be >= 1 (got {threads})")
    torch.set_num_threads(threads)
    cfg, task, models = load_for_inference(data_dir, checkpoint, ["--beam", str(beam), *extra], subset)
    if subset not in task.datasets:
        raise ValueError(f"{data_dir}: no '{subset}' split (fairseq-preprocess --testpref/--validpref)")
    generator = task.build_generator(models, cfg.generation)
    if warmup:  # one untimed pass first (allocator and thread-pool warm-up)
        decode_once(task, generator, models, cfg, subset, max_sentences, batch_size, max_tokens)
    result = SpeedResult(runs=runs, sentences=0, tokens=0, threads=threads)
    for _ in range(runs):
        n_sent, n_tok, secs = decode_once(task, generator, models, cfg, subset, max_sentences, batch_size, max_tokens)
        result.sentences, result.tokens = n_sent, n_tok
        result.seconds.append(secs)
        result.tokens_per_s.append(n_tok / secs)
    tps = result.tokens_per_s
    result.mean_tokens_per_s = statistics.fmean(tps)
    result.var_tokens_per_s = statistics.variance(tps) if len(tps) > 1 else 0.0
    result.std_tokens_per_s = statistics.stdev(tps) if len(tps) > 1 else 0.0
    result.mean_sentences_per_s = statistics.fmean(result.sentences / s for s in result.seconds)
    return result


def main(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(prog="posmix-decode-speed", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("data", help="fairseq-preprocess --destdir")
    p.add_argument("--path", required=True, help="checkpoint")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--subset", default="test")
    p.add_argument("--max-sentences", type=int, default=0, help="decode only the first N sentences (0: all)")
    p.add_argument("--batch-size", type=int, default=0, help="sentences per batch (0: fairseq's --max-tokens batching)")
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--json", help="write the result here")
    p.add_argument("--generate-args", default="", help="extra fairseq-generate flags, quoted (e.g. '--lenpen 0.6')")
    a = p.parse_args(argv)
    try:
        r = measure_decode_speed(a.data, a.path, a.runs, a.beam, a.subset, a.max_sentences, a.batch_size,
                                 a.max_tokens, a.threads, a.generate_args.split())
    except ValueError as e:
        raise SystemExit(f"posmix-decode-speed: {e}")
    print(f"| checkpoint | runs | sentences | tokens | tokens/s (mean ± std) | variance | sentences/s |\n"
          f"|---|---|---|---|---|---|---|\n"
          f"| {a.path} | {r.runs} | {r.sentences} | {r.tokens} | {r.mean_tokens_per_s:.1f} ± {r.std_tokens_per_s:.1f} | "
          f"{r.var_tokens_per_s:.2f} | {r.mean_sentences_per_s:.2f} |")
    print(f"(CPU, {r.threads} thread(s), beam {a.beam}; per-run seconds: {', '.join(f'{s:.2f}' for s in r.seconds)})")
    if a.json:
        import json

        with open(a.json, "w") as f:
            json.dump(asdict(r), f, indent=1)
    return r


def cli():
    """Console entry point: main() returns results for tests; the process exits 0 on success."""
    main()


if __name__ == "__main__":
    cli()
