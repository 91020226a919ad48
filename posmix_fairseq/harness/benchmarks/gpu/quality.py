"""Section ``quality`` of posmix-bench-gpu: Multi30k de->en to near convergence, then BLEU and chrF++.

The recipe: Multi30k task 1 (29,000 training pairs; the shared corpus), joint SentencePiece BPE of
8,000 pieces (posmix_fairseq.harness.raw_text), the paper's Small size (``*_iwslt_de_en``: D 512, 6+6
layers, FFN 1024, 4 heads; Gated position-based attention, 5.1) for the Transformer, rPosNet and
aPosNet, bf16, Adam (0.9, 0.98), lr 5e-4 with 1,000 warm-up updates (inverse square root),
label smoothing 0.1, dropout 0.3 (Multi30k is small), 4,096 tokens per update, the same seed.
Stopping rule: validation after every epoch; stop when the validation loss has not improved for 5
epochs (``--patience 5``), or after 60 epochs, or at ``--stop-time-hours`` (the section's time
budget per system, so that a system fits one job of a GPU host whose jobs are limited to 10 minutes).
The best checkpoint (validation loss) decodes test_2016_flickr with beam 5; posmix-score gives BLEU and chrF++ against the raw references.
rPosNet's best checkpoint is then frozen (posmix-freeze) and decodes the same test set: its
hypotheses must equal the trained model's. Each system's training is bounded by ``quality.hours``
(0.12 h quick, 0.25 h full); decoding and scoring add about a minute (an estimate: no GPU has run
it yet). The table says what stopped each system (patience, time budget, epoch limit).

The data preparation needs no GPU: ``--sections quality --quality-prepare-only`` on the CPU writes the
binarized data (a few MB) into the work folder, which can travel to the GPU host with the checkout.
"""
import json
import os
import re

from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.command import read_text_lines, replace_file
from posmix_fairseq.harness.raw_text import prepare_bpe

from .training import TINY_FLAGS, child, launcher

SYSTEMS = {"Transformer": "posmix_transformer_iwslt_de_en", "rPosNet": "rposnet_iwslt_de_en",
           "aPosNet": "aposnet_iwslt_de_en"}


def default_config(mode):
    if mode == "dry":
        return dict(max_train=300, vocab=200, max_epoch=1, patience=5, hours=0.05, max_tokens=1024, warmup=10,
                    tiny=True, beam=2, test_lines=20, systems=["rPosNet"])  # rPosNet: also frozen == trained
    return dict(max_train=0, vocab=8000, max_epoch=60, patience=5, hours=0.12 if mode == "quick" else 0.25,
                max_tokens=4096, warmup=1000, tiny=False, beam=5, test_lines=0)


def prepare(raw, work, cfg, log):
    size = "tiny" if cfg["tiny"] else "full"
    data = os.path.join(work, f"multi30k-de-en-bin-{size}")
    bpe = os.path.join(work, f"multi30k-de-en-bpe-{size}")
    if os.path.exists(os.path.join(data, "dict.de.txt")) and os.path.exists(os.path.join(bpe, "spm.model")):
        return data, bpe
    if not raw or not os.path.isdir(raw):
        raise RuntimeError(f"the Multi30k raw corpus is needed ({raw!r} is not a folder): pass --multi30k DIR "
                           "(the shared corpus) or prepare on the CPU first with --quality-prepare-only")
    texts, _ = prepare_bpe(raw, "de", "en", bpe, cfg["vocab"], cfg["max_train"])
    if cfg["test_lines"]:  # the dry run: a few validation and test sentences
        for split in ("valid", "test"):
            for lang in ("de", "en"):
                path = os.path.join(bpe, f"{split}.{lang}")
                lines = read_text_lines(path)[: cfg["test_lines"]]
                replace_file(path, "".join(line + "\n" for line in lines))
    lines = texts[("test", "en")]  # the raw references
    replace_file(os.path.join(bpe, "test.ref.en"),
                 "".join(line + "\n" for line in (lines[: cfg["test_lines"]] if cfg["test_lines"] else lines)))
    pipeline.preprocess("de", "en", data, f"{bpe}/train", f"{bpe}/valid", f"{bpe}/test",
                        workers=min(8, os.cpu_count() or 1), in_process=True)  # it needs no GPU and no isolation
    for name in os.listdir(bpe):  # what the GPU run needs of it: the SentencePiece model, the references
        if name not in ("spm.model", "spm.vocab", "test.ref.en"):
            os.remove(os.path.join(bpe, name))
    size = sum(os.path.getsize(os.path.join(d, f)) for d in (data, bpe) for f in os.listdir(d))
    log(f"  Multi30k de-en prepared in {data} ({size / 2 ** 20:.1f} MiB with {bpe})")
    return data, bpe


def valid_curve(output):
    """[(epoch, num_updates, valid loss)] from fairseq's JSON log."""
    curve = []
    for line in output.splitlines():
        match = re.search(r"(?:\| |INFO:)valid(?: \| |:)(\{.*\})", line)  # fairseq's or logging's format
        if match:
            r = json.loads(match.group(1))
            curve.append((int(r.get("epoch", 0)), int(r.get("valid_num_updates", r.get("num_updates", 0))),
                          float(r["valid_loss"])))
    return curve


def stopped_by(output):
    """Why fairseq-train stopped: the patience rule, the time budget, or the epoch limit."""
    if "early stop since valid performance hasn't improved" in output:
        return "patience (converged)"
    if "stop_time_hours" in output and "Stopping training due to" in output:
        return "time budget"
    return "epoch limit"


def generate(data, checkpoint, out_path, cfg, device):
    flags = ["--beam", str(cfg["beam"]), "--max-tokens", "8000"]
    if cfg["tiny"]:
        flags += ["--max-len-a", "1", "--max-len-b", "5"]
    if device.type == "cpu":
        flags += ["--cpu"]
    output, _ = child(pipeline.generate_command(data, checkpoint, flags, launcher=launcher("generate")))
    replace_file(out_path, output)
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t[^\t]*\t(.*)$", output, re.M)}


def run(mode, device, log, work, multi30k=None, overrides=None, prepare_only=False):
    cfg = dict(default_config(mode), **(overrides or {}))
    data, bpe = prepare(multi30k, work, cfg, log)
    if prepare_only:
        return dict(config=cfg, prepared=data, rows=[], targets=[])
    rows = []
    for name in cfg.get("systems") or list(SYSTEMS):
        save = os.path.join(work, "quality-checkpoints", SYSTEMS[name])
        flags = ["--arch", SYSTEMS[name], "--share-all-embeddings",
                 "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "5e-4", "--lr-scheduler",
                 "inverse_sqrt", "--warmup-updates", str(cfg["warmup"]), "--criterion", "label_smoothed_cross_entropy",
                 "--label-smoothing", "0.1", "--dropout", "0.3", "--max-tokens", str(cfg["max_tokens"]),
                 "--max-epoch", str(cfg["max_epoch"]), "--patience", str(cfg["patience"]), "--stop-time-hours",
                 str(cfg["hours"]), "--seed", "1", "--no-epoch-checkpoints",
                 "--no-last-checkpoints", "--best-checkpoint-metric", "loss", "--log-format", "json",
                 "--log-interval", "50", "--num-workers", "2"]
        flags += TINY_FLAGS if cfg["tiny"] else []
        flags += ["--cpu"] if device.type == "cpu" else ["--bf16"]
        row = dict(system=name, arch=SYSTEMS[name])
        try:
            output, record = child(pipeline.train_command(data, save, flags, launcher=launcher("train")))
            curve = valid_curve(output)
            row.update(train_seconds=record["seconds"], valid_curve=curve, stopped_by=stopped_by(output),
                       updates=curve[-1][1] if curve else None,
                       best_valid_loss=min(c[2] for c in curve) if curve else None)
            best = os.path.join(save, "checkpoint_best.pt")
            hyps = generate(data, best, os.path.join(work, f"quality-gen.{name.replace(' ', '_')}.txt"), cfg, device)
            row["gen"] = os.path.join(work, f"quality-gen.{name.replace(' ', '_')}.txt")
            if name == "rPosNet":
                frozen = os.path.join(save, "checkpoint_frozen.pt")
                pipeline.freeze(best, frozen, flags=["--data", data])
                frozen_gen = os.path.join(work, "quality-gen.rPosNet_frozen.txt")
                frozen_hyps = generate(data, frozen, frozen_gen, cfg, device)
                differing = sum(hyps.get(i) != frozen_hyps.get(i) for i in set(hyps) | set(frozen_hyps))
                rows.append(row)
                log(f"  {name}: {row.get('updates')} updates, best valid loss {row.get('best_valid_loss')}")
                row = dict(system="rPosNet frozen", arch=SYSTEMS[name], gen=frozen_gen, differing_hypotheses=differing,
                           sentences=len(hyps))
        except Exception as exc:  # noqa: BLE001
            row["error"] = str(exc)[-2000:]
        rows.append(row)
        log(f"  {row['system']}: " + (row["error"][-300:] if "error" in row else
                                      f"{row.get('updates')} updates, best valid loss {row.get('best_valid_loss')}"
                                      if "differing_hypotheses" not in row else
                                      f"{row['differing_hypotheses']} hypotheses differ from the trained model's"))
    score_rows(rows, bpe, work)
    return dict(config=cfg, rows=rows, targets=targets(rows))


def score_rows(rows, bpe, work):
    scored = [r for r in rows if r.get("gen")]
    if not scored:
        return
    out = os.path.join(work, "quality-scores.json")
    pipeline.score([r["gen"] for r in scored], [r["system"] for r in scored], os.path.join(bpe, "test.ref.en"),
                   flags=["--spm-model", os.path.join(bpe, "spm.model"), "--metrics", "bleu,chrf++",
                          "--paired-bs-n", "0", "--json", out])
    for record in json.load(open(out))["rows"]:
        for r in scored:
            if r["system"] == record.get("system"):
                metric = record.get("metric")
                r[metric] = record.get("score")


def targets(rows):
    by = {r["system"]: r for r in rows}
    out = []
    if by.get("Transformer", {}).get("BLEU") is not None and by.get("rPosNet", {}).get("BLEU") is not None:
        diff = by["rPosNet"]["BLEU"] - by["Transformer"]["BLEU"]
        out.append(dict(target="Multi30k de-en BLEU: rPosNet - Transformer", value=diff, goal=">= -0.5",
                        met=diff >= -0.5))
    if "rPosNet frozen" in by and "differing_hypotheses" in by["rPosNet frozen"]:
        d = by["rPosNet frozen"]["differing_hypotheses"]
        out.append(dict(target="frozen rPosNet == trained (test hypotheses that differ)", value=d, goal="0",
                        met=d == 0))
    return out


def markdown(section):
    if section.get("prepared"):
        return f"\nQuality: data prepared in {section['prepared']} (no training in this call)"
    lines = ["\nMulti30k de->en, test_2016_flickr, beam %d:\n" % section["config"]["beam"],
             "| system | updates | stopped by | best valid loss | BLEU | chrF++ | train s | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in section["rows"]:
        note = r.get("error", "").splitlines()[-1][:120] if "error" in r else ""
        if "differing_hypotheses" in r:
            note = f"{r['differing_hypotheses']} of {r['sentences']} hypotheses differ from the trained model's"
        fmt = (lambda v: "-" if v is None else f"{v:.2f}")
        lines.append(f"| {r['system']} | {r.get('updates', '-')} | {r.get('stopped_by', '-')} | "
                     f"{fmt(r.get('best_valid_loss'))} | "
                     f"{fmt(r.get('BLEU'))} | {fmt(r.get('chrF2++'))} | {fmt(r.get('train_seconds'))} | {note} |")
    for r in section["rows"]:
        if r.get("valid_curve"):
            lines.append(f"\nValidation loss, {r['system']} (epoch: loss): "
                         + ", ".join(f"{e}: {loss:.3f}" for e, _, loss in r["valid_curve"]))
    return "\n".join(lines)
