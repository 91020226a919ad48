"""Section ``decode`` of posmix-bench-gpu: beam-search decoding speed at Base size, with peak memory.

Models (``*_wmt_en_de``, random weights, a shared 10,000-word vocabulary, bf16 on the GPU): the
Transformer, rPosNet, rPosNet frozen (posmix-freeze's search-time model), and rPosNet frozen with the
Triton decoding step instead of the decode-weight table (the GPU default ``rposnet_decode`` set to
``triton`` for that model: what chooses the default); fairseq's
SequenceGenerator (what fairseq-generate runs) with the output length forced (min_len = max_len,
EOS forbidden before it), so every model decodes the same number of steps: outputs of 30 and 512
tokens from sources of the same length, beams 5 and 12, batches of 1 and 64 sentences. The models
take turns within each run; tokens/s is the mean over the runs. Then the decoder self-attention state
of one hypothesis after t = 1024 steps: the key/value cache of the Transformer against rPosNet's
constant state (the last K values and the sum of the older ones). Each model's decoder self-attention
kernels after its runs (``sublayer_kernels``, fallbacks included) are kept with the figures.
"""
import contextlib
import json
import os
import statistics
import time

import torch

from posmix_fairseq.kernels.choice import ENV_VAR, sublayer_kernels

#: name -> (arch, frozen, GPU defaults set while it is built: the choices are settled then)
MODELS = {"Transformer": ("posmix_transformer", False, {}), "rPosNet": ("rposnet", False, {}),
          "rPosNet frozen": ("rposnet", True, {}),
          "rPosNet frozen, Triton decoding step": ("rposnet", True, {"rposnet_decode": "triton"})}
#: the rPosNet decoding rows that choose the GPU default rposnet_decode, by its value
DECODE_CANDIDATES = {"table": "rPosNet frozen", "triton": "rPosNet frozen, Triton decoding step"}
MAX_POSITIONS = 1100  # t = 1024 decoder steps for the state comparison, 512-token sources and outputs


def build(name, flags, dictionary, num_positions, device, dtype):
    # fairseq (and the modules that import it): only the decode section, a GPU host may have torch alone
    from fairseq.tasks.translation import TranslationConfig, TranslationTask
    from posmix_fairseq.harness.freeze import freeze_model
    from posmix_fairseq.harness.testing import build_model_from_args, parse_model_args
    arch, frozen, gpu_defaults = MODELS[name]
    args = parse_model_args(["--arch", f"{arch}_{flags['size']}", "--share-all-embeddings", "--max-source-positions",
                             str(MAX_POSITIONS), "--max-target-positions", str(MAX_POSITIONS), *flags["extra"]],
                            tiny=False)
    with gpu_defaults_set(gpu_defaults):
        model, _ = build_model_from_args(args, dictionary, seed=1)
        model.eval()
        if frozen:
            task = TranslationTask(TranslationConfig(data="unused-data-dir"), dictionary, dictionary)
            model, _ = freeze_model(task, model, args, num_positions)
    return model.to(device=device, dtype=dtype)


@contextlib.contextmanager
def gpu_defaults_set(values):
    """POSMIX_GPU_DEFAULTS with ``values`` over the run's own while a model is built, then as it was."""
    before = os.environ.get(ENV_VAR)
    if values:
        os.environ[ENV_VAR] = json.dumps({**json.loads(before or "{}"), **values})
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def decoder_self_attention_kernels(model):
    """The kernels of the first decoder self-attention sublayer (what ran, fallbacks included)."""
    return sublayer_kernels(model).get("decoder.layers.0.self_attn", "")


def decode_batches(generator, model, batches, device):
    tokens = 0
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    with torch.inference_mode():
        for src, src_len in batches:
            hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": src_len}})
            tokens += sum(int(h[0]["tokens"].numel()) for h in hypos)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return tokens, time.perf_counter() - start


def self_attention_state_bytes(model, dictionary, steps, device):
    """Bytes of the decoder self-attention incremental state of one hypothesis after ``steps`` steps."""
    # testing imports fairseq: only the decode section, a GPU host may have torch alone
    from posmix_fairseq.harness.testing import random_batch
    src, src_len = (t.to(device) for t in random_batch(dictionary, [8], seed=5))
    g = torch.Generator().manual_seed(6)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (1, steps), generator=g).to(device)
    state = {}
    with torch.inference_mode():
        encoder_out = model.encoder(src, src_len)
        for t in range(steps):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
    total = 0
    for layer in model.decoder.layers:
        buffer = layer.self_attn._get_input_buffer(state) or {}
        total += sum(v.numel() * v.element_size() for v in buffer.values() if torch.is_tensor(v))
    return total


def default_config(mode):
    if mode == "dry":
        return dict(size="iwslt_de_en", extra=["--encoder-layers", "1", "--decoder-layers", "1",
                                               "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
                                               "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
                                               "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"],
                    vocab=100, outputs=[6, 12], beams=[2], batches=[1, 3], runs=2, state_steps=16)
    if mode == "quick":
        return dict(size="wmt_en_de", extra=[], vocab=10000, outputs=[30, 512], beams=[5], batches=[1, 64], runs=2,
                    state_steps=1024)
    return dict(size="wmt_en_de", extra=[], vocab=10000, outputs=[30, 512], beams=[5, 12], batches=[1, 64], runs=3,
                state_steps=1024)


def run(mode, device, dtype, log, overrides=None):
    # fairseq (and the modules that import it): only the decode section, a GPU host may have torch alone
    from fairseq.sequence_generator import SequenceGenerator
    from posmix_fairseq.harness.testing import make_dictionary, random_batch
    cfg = dict(default_config(mode), **(overrides or {}))
    names = cfg.get("models") or list(MODELS)
    dictionary = make_dictionary(cfg["vocab"] - 4)
    num_positions = max(max(cfg["outputs"]), cfg["state_steps"]) + 2
    models = {n: build(n, cfg, dictionary, num_positions, device, dtype) for n in names}
    rows = []
    for out_len in cfg["outputs"]:
        for beam in cfg["beams"]:
            for batch in cfg["batches"]:
                batches = [tuple(t.to(device) for t in random_batch(dictionary, [out_len] * batch, seed=100))]
                generators = {n: SequenceGenerator([m], dictionary, beam_size=beam, max_len_a=0, max_len_b=out_len,
                                                   min_len=out_len) for n, m in models.items()}
                speeds, peaks, tokens = {n: [] for n in names}, {}, {}
                for n in names:  # warm-up, and the peak memory of one pass
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                        base = torch.cuda.memory_allocated(device)
                        torch.cuda.reset_peak_memory_stats(device)
                    tokens[n], _ = decode_batches(generators[n], models[n], batches, device)
                    if device.type == "cuda":
                        peaks[n] = (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20
                for _ in range(cfg["runs"]):
                    for n in names:
                        count, seconds = decode_batches(generators[n], models[n], batches, device)
                        if count != tokens[names[0]]:
                            raise RuntimeError(f"{n} decoded {count} tokens, not {tokens[names[0]]} as "
                                               f"{names[0]}: the forced length did not hold")
                        speeds[n].append(count / seconds)
                for n in names:
                    rows.append(dict(output=out_len, beam=beam, batch=batch, model=n, tokens=tokens[n],
                                     tokens_per_s=statistics.fmean(speeds[n]),
                                     std=statistics.stdev(speeds[n]) if len(speeds[n]) > 1 else 0.0,
                                     peak_mib=peaks.get(n)))
                log(f"  output {out_len}, beam {beam}, batch {batch}: " + ", ".join(
                    f"{n} {statistics.fmean(speeds[n]):.0f} tok/s" for n in names))
    states = {n: self_attention_state_bytes(models[n], dictionary, cfg["state_steps"], device) for n in names}
    log(f"  decoder self-attention state at t = {cfg['state_steps']}: {states}")
    kernels = {n: decoder_self_attention_kernels(models[n]) for n in names}
    return dict(config=cfg, rows=rows, state_bytes=states, kernels=kernels, targets=targets(rows, states, cfg))


def targets(rows, states, cfg):
    out = []
    for out_len in sorted({r["output"] for r in rows}):
        ratios = []
        for beam in sorted({r["beam"] for r in rows}):
            for batch in sorted({r["batch"] for r in rows}):
                speed = {r["model"]: r["tokens_per_s"] for r in rows
                         if (r["output"], r["beam"], r["batch"]) == (out_len, beam, batch)}
                if batch > 1 and "rPosNet frozen" in speed and "Transformer" in speed:
                    ratios.append(speed["rPosNet frozen"] / speed["Transformer"])
        goal = 1.3 if out_len >= 512 else 1.0
        if ratios:
            out.append(dict(target=f"batched decoding, {out_len}-token outputs: frozen rPosNet / Transformer "
                                   "tokens/s (min over beams)", value=min(ratios), goal=f">= {goal}x",
                            met=min(ratios) >= goal))
    if "Transformer" in states and "rPosNet frozen" in states:
        ratio = states["Transformer"] / states["rPosNet frozen"]
        out.append(dict(target=f"decoder self-attention state at t = {cfg['state_steps']}: KV cache / frozen "
                               "rPosNet state", value=ratio, goal=">= 30x", met=ratio >= 30))
    return out


def markdown(section):
    cfg = section["config"]
    lines = [f"\nDecoding ({cfg['size']}, random weights, forced output lengths; tokens/s mean ± std over "
             f"{cfg['runs']} runs; peak MiB above the model):\n",
             "| output | beam | batch | model | tokens/s | vs Transformer | peak MiB |",
             "|---|---|---|---|---|---|---|"]
    rows = section["rows"]
    for r in rows:
        base = next((b for b in rows if (b["output"], b["beam"], b["batch"], b["model"]) ==
                     (r["output"], r["beam"], r["batch"], "Transformer")), None)
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x" if base else "-"
        peak = "-" if r.get("peak_mib") is None else f"{r['peak_mib']:.0f}"
        lines.append(f"| {r['output']} | {r['beam']} | {r['batch']} | {r['model']} | {r['tokens_per_s']:.0f} ± "
                     f"{r['std']:.0f} | {ratio} | {peak} |")
    states = section["state_bytes"]
    lines.append(f"\nDecoder self-attention state of one hypothesis at t = {cfg['state_steps']}: " + ", ".join(
        f"{n} {b:,} B" for n, b in states.items()))
    lines += [f"\nDecoder self-attention kernels ({name}): {line}" for name, line in section.get("kernels", {}).items()
              if line]
    return "\n".join(lines)
