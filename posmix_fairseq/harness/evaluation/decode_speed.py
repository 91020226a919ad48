"""``posmix-decode-speed``: decoding speed and peak memory of any checkpoint, with the settings of the
paper table it reproduces.

One run = beam search over the whole subset (or its first --max-sentences sentences) with fairseq's
SequenceGenerator, as fairseq-generate builds it. Tokens = generated target tokens of the best
hypotheses, EOS included. Reported: mean, variance and standard deviation over the runs of tokens/s and
sentences/s, and the peak memory: on a GPU the peak allocated by torch during the timed runs
(``torch.cuda.max_memory_allocated``, the weights included); on the CPU the peak resident set of the
process (``ru_maxrss``: loading included). ``measure_decode_speed`` is importable for other benchmarks.

``--setting`` takes a paper table's own measurement (each value can still be overridden):

- ``gpa-4`` (the default): GPA Table 4, "average CPU decoding speeds and variances measured across
  ten runs" in tokens/s, beam 12 (GPA 5.3, "for all models"); one sentence per batch and one thread
  are ours (the paper does not say);
- ``hc``: HC Table 3 / Table 7 (Section 5), "sentences per second ... on a 2080 Ti, reporting the
  average of five runs with a batch size of 256"; beam 4 is the released code's default (the paper
  does not state the beam used for speed).

    posmix-decode-speed data-bin --path checkpoints/checkpoint_best.pt                    # GPA Table 4
    posmix-decode-speed data-bin --path checkpoints/checkpoint_best.pt --setting hc       # HC, on a GPU
"""
import resource
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

import torch

from ..fairseq_loading import batches, load_for_inference
from ..command import (build_parser as command_parser, check_checkpoints, check_data_dir, check_output_file,
                        console, write_json)
from ..command import NON_NEGATIVE_INT, POSITIVE_INT, device_option

SETTINGS = {
    "gpa-4": dict(beam=12, runs=10, batch_size=1, device="cpu", threads=1, unit="tokens/s",
                  source="GPA Table 4 (CPU, ten runs, tokens/s) and 5.3 (beam 12); batch 1 and 1 thread: ours"),
    "hc": dict(beam=4, runs=5, batch_size=256, device="cuda", threads=1, unit="sentences/s",
               source="HC Section 5 (GPU, five runs, batch 256, sentences/s); beam 4: fallcat/stupidNMT's default"),
}


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
    std_sentences_per_s: float = 0.0
    threads: int = 1
    device: str = "cpu"
    beam: int = 0
    batch_size: int = 0
    peak_memory_gb: float = 0.0
    peak_memory_kind: str = ""
    setting: str = ""


def decode_once(task, generator, models, cfg, subset, max_sentences: int, batch_size: int, max_tokens: int,
                device: str = "cpu"):
    """(sentences, generated tokens, seconds) for one pass over the subset."""
    from fairseq import utils  # fairseq loads in seconds: not on --help

    n_sent = n_tok = 0
    elapsed = 0.0
    for sample in batches(cfg, task, subset, max_sentences=batch_size, max_tokens=max_tokens):
        if max_sentences and n_sent >= max_sentences:
            break
        if max_sentences and n_sent + sample["nsentences"] > max_sentences:
            keep = max_sentences - n_sent
            sample = {**sample, "id": sample["id"][:keep], "nsentences": keep,
                      "net_input": {k: v[:keep] for k, v in sample["net_input"].items()}}
        if device == "cuda":
            sample = utils.move_to_cuda(sample)
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            hypos = task.inference_step(generator, models, sample)
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed += time.perf_counter() - start
        n_sent += len(hypos)
        n_tok += sum(int(h[0]["tokens"].numel()) for h in hypos)
    return n_sent, n_tok, elapsed


def measure_decode_speed(data_dir: str, checkpoint: str, runs: int = 10, beam: int = 12, subset: str = "test",
                         max_sentences: int = 0, batch_size: int = 0, max_tokens: int = 4000, threads: int = 1,
                         extra: Sequence[str] = (), warmup: bool = True, device: str = "cpu",
                         setting: str = "") -> SpeedResult:
    if runs < 1:
        raise ValueError(f"--runs must be >= 1 (got {runs})")
    if threads < 1:
        raise ValueError(f"--threads must be >= 1 (got {threads})")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device {device!r}: valid values are cpu, cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no GPU is visible (this setting measures on a GPU; --device cpu measures "
                         "on the CPU instead)")
    torch.set_num_threads(threads)
    cfg, task, models = load_for_inference(data_dir, checkpoint, ["--beam", str(beam), *extra], subset)
    if subset not in task.datasets:
        raise ValueError(f"{data_dir}: no '{subset}' split (fairseq-preprocess --testpref/--validpref)")
    if device == "cuda":
        models = [m.cuda() for m in models]
    generator = task.build_generator(models, cfg.generation)
    if warmup:  # one untimed pass first (allocator and thread-pool warm-up)
        decode_once(task, generator, models, cfg, subset, max_sentences, batch_size, max_tokens, device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = SpeedResult(runs=runs, sentences=0, tokens=0, threads=threads, device=device, beam=beam,
                         batch_size=batch_size, setting=setting)
    for _ in range(runs):
        n_sent, n_tok, secs = decode_once(task, generator, models, cfg, subset, max_sentences, batch_size, max_tokens,
                                          device)
        result.sentences, result.tokens = n_sent, n_tok
        result.seconds.append(secs)
        result.tokens_per_s.append(n_tok / secs)
    tps = result.tokens_per_s
    sps = [result.sentences / s for s in result.seconds]
    result.mean_tokens_per_s = statistics.fmean(tps)
    result.var_tokens_per_s = statistics.variance(tps) if len(tps) > 1 else 0.0
    result.std_tokens_per_s = statistics.stdev(tps) if len(tps) > 1 else 0.0
    result.mean_sentences_per_s = statistics.fmean(sps)
    result.std_sentences_per_s = statistics.stdev(sps) if len(sps) > 1 else 0.0
    if device == "cuda":
        result.peak_memory_gb = torch.cuda.max_memory_allocated() / 1024 ** 3
        result.peak_memory_kind = "GPU: peak allocated by torch during the timed runs"
    else:
        result.peak_memory_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # kB on Linux
        result.peak_memory_kind = "CPU: peak resident set of the process, loading included"
    return result


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-decode-speed", __doc__)
    p.add_argument("data", metavar="DIR", help="the binarized data: fairseq-preprocess --destdir")
    p.add_argument("--path", required=True, metavar="FILE", help="checkpoint to decode with")
    p.add_argument("--setting", choices=sorted(SETTINGS), default="gpa-4",
                   help="the paper table whose measurement to make (default gpa-4); the flags below override it")
    p.add_argument("--runs", type=POSITIVE_INT, help="timed decoding runs (default: the --setting's)")
    p.add_argument("--beam", type=POSITIVE_INT, help="beam size (default: the --setting's)")
    p.add_argument("--device", choices=["cpu", "cuda"], type=device_option, help="where to decode (default: the --setting's)")
    p.add_argument("--subset", default="test", help="the split of the binarized data to decode")
    p.add_argument("--max-sentences", type=NON_NEGATIVE_INT, default=0, help="decode only the first N sentences (0: all)")
    p.add_argument("--batch-size", type=NON_NEGATIVE_INT, help="sentences per batch (0: fairseq's --max-tokens batching)")
    p.add_argument("--max-tokens", type=POSITIVE_INT, default=4000, help="tokens per batch with --batch-size 0")
    p.add_argument("--threads", type=POSITIVE_INT, help="torch CPU threads")
    p.add_argument("--json", metavar="FILE", help="write the result here")
    p.add_argument("--generate-args", default="", help="extra fairseq-generate flags, quoted (e.g. '--lenpen 0.6')")
    a = p.parse_args(argv)
    check_data_dir(a.data)
    check_checkpoints(a.path)
    if a.json:
        check_output_file(a.json, "--json")
    setting = SETTINGS[a.setting]
    pick = lambda name: getattr(a, name) if getattr(a, name) is not None else setting[name]  # noqa: E731
    try:
        r = measure_decode_speed(a.data, a.path, pick("runs"), pick("beam"), a.subset, a.max_sentences,
                                 pick("batch_size"), a.max_tokens, pick("threads"), a.generate_args.split(),
                                 device=pick("device"), setting=a.setting)
    except ValueError as e:
        raise SystemExit(f"posmix-decode-speed: {e}")
    print(f"| checkpoint | device | beam | batch | runs | sentences | tokens | tokens/s (mean ± std) | variance | "
          f"sentences/s (mean ± std) | peak memory |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
          f"| {a.path} | {r.device} | {r.beam} | {r.batch_size or 'max-tokens'} | {r.runs} | {r.sentences} | {r.tokens} | "
          f"{r.mean_tokens_per_s:.1f} ± {r.std_tokens_per_s:.1f} | {r.var_tokens_per_s:.2f} | "
          f"{r.mean_sentences_per_s:.2f} ± {r.std_sentences_per_s:.2f} | {r.peak_memory_gb:.2f} GB |")
    print(f"(setting {a.setting}: {setting['source']}; {r.threads} thread(s); per-run seconds: "
          f"{', '.join(f'{s:.2f}' for s in r.seconds)}; peak memory: {r.peak_memory_kind})")
    if a.json:
        write_json(a.json, asdict(r))
    return r


cli = console(main, "posmix-decode-speed")


if __name__ == "__main__":
    raise SystemExit(cli())
