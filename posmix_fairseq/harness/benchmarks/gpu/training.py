"""Section ``train`` of posmix-bench-gpu: fairseq-train at Base size, words per second and peak memory.

Systems (``*_wmt_en_de``: D 512, 6+6 layers, FFN 2048, 8 heads; rPosNet K = 16): the Transformer,
rPosNet with dense mixing, rPosNet with window mixing (``--S-rposnet-impl window`` in both
self-attentions: the Triton kernel on the GPU), the same with Eq. 4's gating by the Triton kernels
(``POSMIX_GPU_DEFAULTS='{"gating": "triton"}'``; the other rPosNet / aPosNet rows use PyTorch's),
aPosNet; in bf16 (and fp16 in the full run), on a
synthetic corpus (random sentences of 10-50 tokens over a 8,000-word vocabulary; the target is the
source reversed through a fixed word map, so the loss falls), the same seed for every system, no
attention dropout (the window form has none), no validation, no checkpoints. Reported: words per
second (fairseq's target-token ``wps``, the median of its log intervals after the first), peak GPU
memory, and each system's loss per log interval; rPosNet dense and window compute the same function,
so their curves must agree within bf16 rounding.
"""
import json
import os
import random
import re
import statistics
import time

from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.command import replace_file

WINDOW = ["--encoder-self-rposnet-impl", "window", "--decoder-self-rposnet-impl", "window"]
SYSTEMS = {  # name -> (fairseq flags, environment: POSMIX_GPU_DEFAULTS sets the gating kernels)
    "Transformer": (["--arch", "posmix_transformer_wmt_en_de"], {}),
    "rPosNet dense": (["--arch", "rposnet_wmt_en_de", "--encoder-self-rposnet-impl", "dense",
                       "--decoder-self-rposnet-impl", "dense"], {"POSMIX_GPU_DEFAULTS": '{"gating": "torch"}'}),
    "rPosNet window (Triton)": (["--arch", "rposnet_wmt_en_de", *WINDOW],
                                {"POSMIX_GPU_DEFAULTS": '{"gating": "torch"}'}),
    "rPosNet window, Triton gating": (["--arch", "rposnet_wmt_en_de", *WINDOW],
                                      {"POSMIX_GPU_DEFAULTS": '{"gating": "triton"}'}),
    "aPosNet": (["--arch", "aposnet_wmt_en_de"], {"POSMIX_GPU_DEFAULTS": '{"gating": "torch"}'}),
}
TINY_FLAGS = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32", "--decoder-embed-dim",
              "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
              "--decoder-attention-heads", "2"]
#: |loss(dense) - loss(window)| allowed per log interval, per precision (bits): the two differ only in
#: the rounding of the mixing (the order of the sums), which bf16 (8-bit mantissa) amplifies over updates
LOSS_TOLERANCE = {"bf16": 0.05, "fp16": 0.02, "fp32": 1e-3}


def synthetic_corpus(raw_dir, sentences, vocab=8000, seed=1, valid=200):
    """Random sentences of 10-50 tokens; target = the source reversed through a fixed word map."""
    rng = random.Random(seed)
    mapping = list(range(vocab))
    rng.shuffle(mapping)
    os.makedirs(raw_dir, exist_ok=True)
    for split, n in (("train", sentences), ("valid", valid)):
        src, tgt = [], []
        for _ in range(n):
            words = [rng.randrange(vocab) for _ in range(rng.randint(10, 50))]
            src.append(" ".join(f"w{w}" for w in words) + "\n")
            tgt.append(" ".join(f"w{mapping[w]}" for w in reversed(words)) + "\n")
        replace_file(os.path.join(raw_dir, f"{split}.src"), "".join(src))
        replace_file(os.path.join(raw_dir, f"{split}.tgt"), "".join(tgt))


def launcher(verb):
    """fairseq's command ``verb`` run by fairseq_child (bf16 on a GPU, peak memory), for the pipeline's stages."""
    return pipeline.module_command("posmix_fairseq.harness.benchmarks.gpu.fairseq_child", verb)


def child(command, env=None):
    """Runs a pipeline command built with :func:`launcher`; returns (its output, the POSMIX_CHILD record)."""
    try:
        output = pipeline.run(command, env=env)
    except pipeline.StepFailed as e:
        raise RuntimeError(f"{command[3]} failed (exit {e.returncode}):\n" + "\n".join(str(e).splitlines()[-30:]))
    record = [line for line in output.splitlines() if line.startswith("POSMIX_CHILD ")]
    return output, json.loads(record[-1][len("POSMIX_CHILD "):])


def prepare(work, mode, log):
    size = "tiny" if mode == "dry" else "base"
    data = os.path.join(work, f"train-data-bin-{size}")
    if os.path.exists(os.path.join(data, "train.src-tgt.src.bin")):
        return data
    raw = os.path.join(work, f"train-raw-{size}")
    synthetic_corpus(raw, 300 if mode == "dry" else 40000, vocab=200 if mode == "dry" else 8000)
    start = time.perf_counter()
    pipeline.preprocess("src", "tgt", data, f"{raw}/train", f"{raw}/valid", workers=min(8, os.cpu_count() or 1),
                        in_process=True)  # it needs no GPU and no isolation
    log(f"  synthetic corpus binarized in {time.perf_counter() - start:.0f} s")
    return data


def parse_log(output):
    """train_inner records of fairseq's JSON log: [(num_updates, loss, wps)]."""
    records = []
    for line in output.splitlines():
        match = re.search(r"(?:\| |INFO:)train_inner(?: \| |:)(\{.*\})", line)  # fairseq's or logging's format
        if match:
            r = json.loads(match.group(1))
            records.append((int(r["num_updates"]), float(r["loss"]), float(r["wps"])))
    return records


def train_flags(system, precision, cfg, device):
    """fairseq-train's flags after the data (no checkpoints: ``--no-save``)."""
    flags = [*SYSTEMS[system][0], "--share-all-embeddings", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
             "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(cfg["warmup"]),
             "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--dropout", "0.1",
             "--attention-dropout", "0", "--max-tokens", str(cfg["max_tokens"]), "--max-update", str(cfg["updates"]),
             "--seed", "1", "--no-save", "--disable-validation", "--log-format", "json", "--log-interval",
             str(cfg["log_interval"]), "--num-workers", "2", "--required-batch-size-multiple", "8",
             "--max-source-positions", "1024", "--max-target-positions", "1024"]
    if cfg.get("tiny"):
        flags += TINY_FLAGS
    if device.type == "cpu":
        flags += ["--cpu"]
    if precision == "bf16":
        flags += ["--bf16"]
    elif precision == "fp16":
        flags += ["--fp16"]
    return flags


def default_config(mode):
    if mode == "dry":  # the two systems whose loss curves are compared
        return dict(precisions=["fp32"], updates=3, max_tokens=512, warmup=2, log_interval=1, tiny=True,
                    systems=["rPosNet dense", "rPosNet window (Triton)"])
    if mode == "quick":
        return dict(precisions=["bf16"], updates=150, max_tokens=8192, warmup=50, log_interval=10)
    return dict(precisions=["bf16", "fp16"], updates=300, max_tokens=8192, warmup=100, log_interval=10)


def run(mode, device, log, work, overrides=None):
    cfg = dict(default_config(mode), **(overrides or {}))
    systems = cfg.get("systems") or list(SYSTEMS)
    data = prepare(work, mode, log)
    rows = []
    for precision in cfg["precisions"]:
        for system in systems:
            row = dict(system=system, precision=precision)
            try:
                output, record = child(pipeline.train_command(data, None, train_flags(system, precision, cfg, device),
                                                              launcher=launcher("train")), env=SYSTEMS[system][1])
                records = parse_log(output)
                steady = [wps for _, _, wps in records[1:]] or [wps for _, _, wps in records]
                row.update(wps=statistics.median(steady) if steady else None, seconds=record["seconds"],
                           peak_mib=None if record["peak_bytes"] is None else record["peak_bytes"] / 2 ** 20,
                           losses=[(u, loss) for u, loss, _ in records])
            except Exception as exc:  # noqa: BLE001  (a failing system is reported, the others run)
                row["error"] = str(exc)[-2000:]
            rows.append(row)
            log(f"  {precision} {system}: {row.get('wps', row.get('error', '')[:300])} wps, "
                f"peak {row.get('peak_mib')} MiB")
    return dict(config=cfg, rows=rows, targets=targets(rows))


def _row(rows, system, precision):
    return next((r for r in rows if r["system"] == system and r["precision"] == precision), None)


def targets(rows):
    out = []
    for precision in sorted({r["precision"] for r in rows}):
        base = _row(rows, "Transformer", precision)
        for system in ("rPosNet dense", "rPosNet window (Triton)", "rPosNet window, Triton gating"):
            r = _row(rows, system, precision)
            if base and r and base.get("wps") and r.get("wps"):
                ratio = r["wps"] / base["wps"]
                out.append(dict(target=f"{precision}: {system} words/s vs the Transformer", value=ratio,
                                goal=">= 1x", met=ratio >= 1.0))
        dense, window = _row(rows, "rPosNet dense", precision), _row(rows, "rPosNet window (Triton)", precision)
        if dense and window and dense.get("losses") and window.get("losses"):
            a, b = dict(dense["losses"]), dict(window["losses"])
            common = sorted(set(a) & set(b))
            diff = max(abs(a[u] - b[u]) for u in common) if common else None
            tol = LOSS_TOLERANCE.get(precision, 0.05)
            out.append(dict(target=f"{precision}: loss curves, rPosNet dense vs window (max abs difference per "
                                   "log interval, bits)", value=diff, goal=f"<= {tol}",
                            met=diff is not None and diff <= tol))
    return out


def markdown(section):
    cfg = section["config"]
    lines = [f"\nTraining, {cfg['updates']} updates of {cfg['max_tokens']} tokens (synthetic corpus), "
             "fairseq-train:\n", "| precision | system | words/s | vs Transformer | peak GPU MiB | wall s | "
             "loss at the last log |", "|---|---|---|---|---|---|---|"]
    for r in section["rows"]:
        if "error" in r:
            lines.append(f"| {r['precision']} | {r['system']} | failed: {r['error'].splitlines()[-1][:150]} "
                         "| | | | |")
            continue
        base = _row(section["rows"], "Transformer", r["precision"])
        ratio = f"{r['wps'] / base['wps']:.2f}x" if base and base.get("wps") and r.get("wps") else "-"
        last = f"{r['losses'][-1][1]:.3f}" if r.get("losses") else "-"
        peak = "-" if r.get("peak_mib") is None else f"{r['peak_mib']:.0f}"
        wps = "-" if r.get("wps") is None else f"{r['wps']:.0f}"
        lines.append(f"| {r['precision']} | {r['system']} | {wps} | {ratio} | {peak} | {r['seconds']:.0f} | {last} |")
    for precision in cfg["precisions"]:
        dense = _row(section["rows"], "rPosNet dense", precision)
        window = _row(section["rows"], "rPosNet window (Triton)", precision)
        if dense and window and dense.get("losses") and window.get("losses"):
            a, b = dict(dense["losses"]), dict(window["losses"])
            pairs = ", ".join(f"{u}: {a[u]:.3f} / {b[u]:.3f}" for u in sorted(set(a) & set(b)))
            lines.append(f"\nLoss curves ({precision}), update: dense / window: {pairs}")
    return "\n".join(lines)
