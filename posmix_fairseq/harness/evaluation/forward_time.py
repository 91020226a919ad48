"""``posmix-forward-time``: the time each model takes to forward the same batch N times (PosNet
Fig. 2 and Section 4.2: "we manually construct a batch of samples and only
perform the forward stage with Transformer base model ... We perform the forward stage with the same
batch 10 times and record the time consumed by the model").

Each system is an arch and its flags, built as ``fairseq-train --arch`` builds it, with random
weights (a forward's time does not depend on the weights) and a dictionary of ``--vocab`` words;
or a checkpoint (``LABEL=path.pt``), built from its stored args. The batch is ``--batch-size``
sentences of ``--length`` tokens on both sides, the same for every system. One untimed warm-up
forward, then ``--repeats`` timed forwards of encoder and decoder (teacher forcing, no gradient).
Reported: the seconds of each forward and their sum (the paper's y-axis), the parameters.

    posmix-forward-time --table posnet-1 --size base --json forward.json          # PosNet Table 1's systems
    posmix-forward-time --system SAPE=posmix_transformer_wmt_en_de \\
        --system 'RPE=shaw_wmt_en_de --encoder-self-shaw-value-term on' --device cuda

Timings depend on the machine and its load: measure on a quiet one and report the device.
"""
import json
import os
import shlex
import time
from typing import Dict, List, Optional, Sequence, Tuple

import torch

import posmix_fairseq

from ..checkpoint_files import load_fairseq, write_text_atomic
from ..command import build_parser as command_parser, console
from ..paper_tables import TABLES
from ..command import POSITIVE_INT, check_output_file, device_option

SIZE_SUFFIX = {"small": "iwslt_de_en", "base": "wmt_en_de", "big": "wmt_en_de_big"}


def table_systems(table: str, size: str) -> List[Tuple[str, str, List[str]]]:
    """(label, arch, flags) of every system of a posmix-reproduce table at ``size``."""
    if table not in TABLES:
        raise ValueError(f"--table {table!r}: valid tables are {', '.join(TABLES)}")
    return [(s.label, f"{s.variant}_{SIZE_SUFFIX[size]}", shlex.split(s.flags)) for s in TABLES[table].systems]


def parse_system(item: str) -> Tuple[str, str, List[str]]:
    label, sep, spec = item.partition("=")
    words = shlex.split(spec)
    if not sep or not label or not words:
        raise ValueError(f"--system {item!r}: expected LABEL=ARCH [FLAGS ...] or LABEL=CHECKPOINT.pt")
    return label, words[0], words[1:]


def build_from_arch(arch: str, flags: Sequence[str], vocab: int):
    # fairseq loads in seconds: only when a model is built, never on --help
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    posmix_fairseq.register()  # imported before fairseq, the package registered nothing
    # the task imports fairseq: here, after register()
    from ...tasks.translation import PosMixTranslationConfig, PosMixTranslationTask

    if arch not in ARCH_MODEL_REGISTRY:
        raise ValueError(f"arch {arch!r} is not registered (the posmix archs are listed in docs/architectures.md; "
                         "`fairseq-train --help` lists every registered --arch)")
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["unused-data-dir", "--task", "posmix_translation", "--user-dir",
                                                posmix_fairseq.USER_DIR, "--arch", arch, *flags])
    if getattr(args, "length_ratio", None) is None:
        args.length_ratio = 1.0  # no training data: gamma = 1 for position-aware cross-attention
    d = Dictionary()
    for i in range(vocab - d.nspecial):
        d.add_symbol(f"w{i}")
    task = PosMixTranslationTask(PosMixTranslationConfig(data="unused-data-dir"), d, d)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task), d, d


def build_from_checkpoint(path: str):
    from fairseq import tasks  # fairseq loads in seconds: only when a checkpoint is loaded

    posmix_fairseq.register()  # imported before fairseq, the package registered nothing
    state = load_fairseq(path)
    cfg = state["cfg"]
    if not os.path.isdir(str(cfg["task"].data)):
        raise ValueError(f"{path}: its data directory {cfg['task'].data!r} (the dictionaries) is not here")
    task = tasks.setup_task(cfg["task"])
    model = task.build_model(cfg["model"])
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg["model"])
    return model, task.source_dictionary, task.target_dictionary


def manual_batch(src_dict, tgt_dict, batch_size: int, length: int, seed: int = 0):
    """(src_tokens, src_lengths, prev_output_tokens): full-length rows of random words ending in EOS."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(src_dict.nspecial, len(src_dict), (batch_size, length), generator=g)
    src[:, -1] = src_dict.eos()
    prev = torch.randint(tgt_dict.nspecial, len(tgt_dict), (batch_size, length), generator=g)
    prev[:, 0] = tgt_dict.eos()
    return src, torch.full((batch_size,), length, dtype=torch.long), prev


def time_forwards(model, batch, repeats: int, device: torch.device) -> List[float]:
    model.eval().to(device)
    src, lengths, prev = (t.to(device) for t in batch)

    def forward():
        with torch.inference_mode():
            model(src, lengths, prev)
        if device.type == "cuda":
            torch.cuda.synchronize()

    forward()  # warm-up (allocator, thread pool, kernel selection)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        forward()
        seconds.append(time.perf_counter() - start)
    return seconds


def measure(systems, batch_size: int, length: int, repeats: int, vocab: int, device: str, threads: int) -> Dict:
    if min(batch_size, length, repeats, vocab) < 1:
        raise ValueError("--batch-size, --length, --repeats and --vocab must be >= 1")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here")
    torch.set_num_threads(threads)
    out = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({threads} thread(s))",
           "threads": threads, "batch_size": batch_size, "length": length, "repeats": repeats, "vocab": vocab,
           "systems": []}
    for label, arch, flags in systems:
        if arch.endswith(".pt"):
            model, src_dict, tgt_dict = build_from_checkpoint(arch)
        else:
            model, src_dict, tgt_dict = build_from_arch(arch, flags, vocab)
        for role, limit in (("source", model.max_positions()[0]), ("target", model.max_positions()[1])):
            if limit is not None and length > limit:
                raise ValueError(f"--length {length} exceeds the {role} positions of {label} ({limit})")
        seconds = time_forwards(model, manual_batch(src_dict, tgt_dict, batch_size, length), repeats, dev)
        out["systems"].append({"label": label, "arch": arch, "flags": " ".join(flags),
                               "parameters": sum(p.numel() for p in model.parameters()),
                               "seconds": seconds, "total_seconds": sum(seconds)})
        del model
    return out


def main(argv: Optional[List[str]] = None):
    p = command_parser("posmix-forward-time", __doc__)
    p.add_argument("--table", help="the systems of this posmix-reproduce table (e.g. posnet-1)")
    p.add_argument("--size", choices=sorted(SIZE_SUFFIX), default="base", help="--table: model size (default base)")
    p.add_argument("--system", action="append", default=[], metavar="LABEL=ARCH [FLAGS]",
                   help="a system: an arch and its flags, or LABEL=CHECKPOINT.pt (repeatable)")
    p.add_argument("--model-flags", default="", help="flags added to every arch-built system, quoted "
                                                     "(e.g. '--encoder-layers 2 --decoder-layers 2')")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=32, help="sentences per forward")
    p.add_argument("--length", type=POSITIVE_INT, default=50, help="tokens per sentence, source and target (default 50)")
    p.add_argument("--repeats", type=POSITIVE_INT, default=10, help="timed forwards (default 10, as the paper)")
    p.add_argument("--vocab", type=POSITIVE_INT, default=32000, help="dictionary size of arch-built systems")
    p.add_argument("--device", default="cpu", type=device_option, help="cpu or cuda")
    p.add_argument("--threads", type=POSITIVE_INT, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--json", metavar="FILE", help="write the timings here (posmix-plot posnet-fig2 reads it)")
    a = p.parse_args(argv)
    if a.json:
        check_output_file(a.json, "--json")  # before the timings, not after them
    try:
        systems = table_systems(a.table, a.size) if a.table else []
        systems += [parse_system(s) for s in a.system]
        if not systems:
            raise ValueError("give --table NAME or at least one --system")
        extra = shlex.split(a.model_flags)
        systems = [(lbl, arch, flags if arch.endswith(".pt") else flags + extra) for lbl, arch, flags in systems]
        result = measure(systems, a.batch_size, a.length, a.repeats, a.vocab, a.device, a.threads)
    except ValueError as e:
        raise SystemExit(f"posmix-forward-time: {e}")
    print(f"| system | arch | parameters | seconds for {a.repeats} forwards | per forward (min) |\n"
          "|---|---|---|---|---|")
    for s in result["systems"]:
        print(f"| {s['label']} | {s['arch']} {s['flags']} | {s['parameters']:,} | {s['total_seconds']:.3f} | "
              f"{min(s['seconds']):.4f} |")
    print(f"(batch {a.batch_size} x {a.length} tokens, {result['device']})")
    if a.json:
        write_text_atomic(a.json, json.dumps(result, indent=1), option="--json")
    return result


cli = console(main, "posmix-forward-time")


if __name__ == "__main__":
    raise SystemExit(cli())
