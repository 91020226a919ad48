"""``posmix-bench-gpu``: the GPU measurement of posmix_fairseq in one command, in sections.

    posmix-bench-gpu --quick --json $OUT/bench.json            # ~10 min on an H100 (kernels, sublayer, train, decode)
    posmix-bench-gpu --json bench.json                           # the full run, ~25 min: run it in sections
    posmix-bench-gpu --sections sublayer --set sublayer.dims=[1024] --json d1024.json
    posmix-bench-gpu --merge a.json b.json --json all.json --markdown tables.md     # no device needed
    posmix-bench-gpu --dry-run-cpu --sections sublayer,train,decode                # tiny sizes on the CPU (CI)

Sections (``--sections``, in this order): ``kernels`` (the kernel tests and the rPosNet exactness
suites compiled and run on the GPU), ``sublayer`` (one gated rPosNet / aPosNet sublayer against MHA
through SDPA flash, eager MHA and FlexAttention, forward and forward+backward, with peak memory),
``train`` (fairseq-train at Base size: words/s, peak memory, loss curves), ``decode`` (beam search at
Base size: tokens/s, peak memory, the decoder state at t = 1024) and ``quality`` (Multi30k de->en to
near convergence: BLEU, chrF++; only when named). Each section's module says what it measures.

Every section is written to the ``--json`` file as soon as it ends, and a run skips the sections that
file already holds as run (``--redo`` runs them again; a section that failed there runs again), so a run
cut short by a time limit resumes where it stopped, and sections run in separate calls merge with
``--merge``. The command exits 0 when every section it was asked for ran, 1 otherwise. The Markdown tables (stdout, and
``--markdown``) carry the device name and the torch, Triton and CUDA versions; each section ends with
its targets (value, goal, met or short). ``--dry-run-cpu`` runs tiny sizes on the CPU so that the
script cannot rot: its figures are no GPU results and are marked so.
"""
import argparse
import datetime
import json
import os
import platform
import time

import torch

from ...command import (CommandError, Number, UsageError, build_parser as command_parser, check_input_file,
                        check_output_dir, check_output_file, console, device_option, read_json,
                        replace_file)
from . import decoding, kernel_tests, quality, sublayer, training
from .defaults import suggestions

SECTIONS = ("kernels", "sublayer", "train", "decode", "quality")
DEFAULT_SECTIONS = ("kernels", "sublayer", "train", "decode")
#: expected minutes per section on an H100 (printed before each section; the calls' plan in docs/gpu.md)
BUDGET_MIN = {"quick": dict(kernels=2, sublayer=4, train=3, decode=2, quality=9),
              "full": dict(kernels=2, sublayer=10, train=9, decode=6, quality=17),
              "dry": dict(kernels=0.5, sublayer=0.2, train=0.7, decode=0.2, quality=0.7)}


def device_info(device):
    info = dict(device=str(device), torch=torch.__version__, python=platform.python_version(),
                cuda=torch.version.cuda,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    else:
        info["name"] = f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    try:
        import triton  # optional: Triton (GPU hosts only)
        info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        info["triton"] = None
    return info


#: the sections whose settings --set overrides, the settings they read beyond their defaults (with an example of
#: their kind), and the settings that may be 0 (0: none or all)
CONFIGURED = {"sublayer": sublayer, "train": training, "decode": decoding, "quality": quality}
OPTIONAL = {"sublayer": {"force_triton": False, "implementations": ["dense"], "heads": 8},
            "decode": {"models": ["Transformer"]}, "train": {"systems": ["rPosNet dense"]},
            "quality": {"systems": ["rPosNet"]}}
MAY_BE_ZERO = {"warmup", "max_train", "test_lines"}


def check_setting(item: str, section: str, name: str, value):
    """``value`` for ``section.name`` when it is of the kind of the setting's defaults and in its range (a number
    finite and > 0, or >= 0 where 0 means none or all; a list non-empty, of such numbers or of text), else a
    usage error (exit status 2) naming the item and what is valid."""
    if section not in CONFIGURED:
        raise UsageError(f"--set {item!r}: section {section} has no settings; sections with settings: "
                         f"{', '.join(CONFIGURED)}")
    defaults = dict(OPTIONAL.get(section, {}))
    for mode in ("full", "quick", "dry"):
        defaults.update({k: v for k, v in CONFIGURED[section].default_config(mode).items() if v != [] or k not in defaults})
    if name not in defaults:
        raise UsageError(f"--set {item!r}: {section} has no setting {name!r}; valid: {', '.join(sorted(defaults))}")
    example = defaults[name]
    if isinstance(example, list) and (not isinstance(value, list) or not value):
        raise UsageError(f"--set {item!r}: {section}.{name} takes a non-empty JSON list, e.g. {json.dumps(example)}")
    first = (example or [""])[0] if isinstance(example, list) else example
    for x in value if isinstance(example, list) else [value]:
        if isinstance(first, (bool, str)):
            if type(x) is not type(first):
                raise UsageError(f"--set {item!r}: {section}.{name} takes {'true or false' if isinstance(first, bool) else 'text'}"
                                 f", e.g. {json.dumps(example)}")
            continue
        number = Number(type(first), 0, low_open=name not in MAY_BE_ZERO)
        if type(x) not in (int, float) or (number.kind is int and type(x) is not int):
            raise UsageError(f"--set {item!r}: {section}.{name}: {json.dumps(x)}: {number.describe()}")
        try:
            number(str(x))
        except argparse.ArgumentTypeError as e:
            raise UsageError(f"--set {item!r}: {section}.{name}: {e}") from None
    return value


def parse_set(items):
    """``--set section.key=JSON`` overrides -> {section: {key: value}}, each checked (:func:`check_setting`)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or section not in SECTIONS:
            raise UsageError(f"--set {item!r}: write SECTION.KEY=VALUE with SECTION one of {', '.join(SECTIONS)}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(section, {})[name] = check_setting(item, section, name, parsed)
    return out


def load(path, option="--json"):
    results = read_json(path, option, "a posmix-bench-gpu results file")
    if not isinstance(results, dict) or not isinstance(results.get("sections"), dict):
        raise CommandError(f"{option} {path}: not a posmix-bench-gpu results file (no \"sections\")")
    return results


def save(path, results):
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        replace_file(path, json.dumps(results, indent=1))


#: the identity of a row per section: rows of one section from several files are joined (later
#: files win for the same row) and the section's targets are computed again
ROW_KEYS = dict(sublayer=("D", "N", "implementation"), train=("system", "precision"),
                decode=("output", "beam", "batch", "model"), quality=("system",))


def merge(paths):
    """One result from several files: sections of different names side by side; one section from
    several files (e.g. ``sublayer`` at D = 512 and at D = 1024, ``quality`` one system a call) has
    its rows joined and its targets computed again; each section keeps the meta of its run."""
    modules = dict(sublayer=sublayer, train=training, decode=decoding, quality=quality)
    merged = dict(meta=None, sections={})
    for path in paths:
        r = load(path, "--merge")
        merged["meta"] = merged["meta"] or r["meta"]
        for name, section in r["sections"].items():
            section = dict(section, meta=section.get("meta") or r["meta"])
            old = merged["sections"].get(name)
            if old and name in ROW_KEYS and "rows" in old and "rows" in section:
                key = ROW_KEYS[name]
                rows = {tuple(row.get(k) for k in key): row for row in old["rows"] + section["rows"]}
                section = dict(section, rows=list(rows.values()),
                               elapsed_s=old.get("elapsed_s", 0) + section.get("elapsed_s", 0))
                if name == "decode":
                    section["state_bytes"] = {**old.get("state_bytes", {}), **section.get("state_bytes", {})}
                    section["targets"] = decoding.targets(section["rows"], section["state_bytes"], section["config"])
                elif name == "sublayer":
                    section["targets"] = sublayer.targets(section["rows"])
                    section["winners"] = sublayer.winners(section["rows"])
                    section["config"] = dict(section["config"], dims=sorted({row["D"] for row in section["rows"]}))
                else:
                    section["targets"] = modules[name].targets(section["rows"])
            merged["sections"][name] = section
    return merged


def section_markdown(name, section):
    module = dict(kernels=kernel_tests, sublayer=sublayer, train=training, decode=decoding, quality=quality)[name]
    meta = section.get("meta") or {}
    lines = [f"\n## {name} ({meta.get('mode', '?')} mode, {section.get('elapsed_s', 0):.0f} s on "
             f"{meta.get('name', '?')})"]
    if "error" in section and name != "kernels":
        lines.append(f"\nfailed: {section['error']}")
    else:
        lines.append(module.markdown(section))
    if section.get("targets"):
        lines += ["\nTargets:\n", "| target | value | goal | met |", "|---|---|---|---|"]
        for t in section["targets"]:
            value = t["value"]
            value = f"{value:.3g}" if isinstance(value, float) else value
            met = {True: "met", False: "SHORT", None: "-"}[t["met"]]
            shown = value if value is not None else f"no figure ({t['note']})" if t.get("note") else "-"
            lines.append(f"| {t['target']} | {shown} | {t['goal']} | {met} |")
    return "\n".join(lines)


def markdown(results):
    meta = results["meta"]
    head = (f"# posmix-bench-gpu: {meta['name']}\n\ntorch {meta['torch']}, Triton {meta.get('triton')}, CUDA "
            f"{meta.get('cuda')}, Python {meta['python']}; {meta['date']}; mode {meta['mode']}")
    if meta["mode"] == "dry":
        head += "\n\n**CPU dry run at tiny sizes: a check that the benchmark runs, not a measurement.**"
    parts = [head] + [section_markdown(n, results["sections"][n]) for n in SECTIONS if n in results["sections"]]
    parts.append(suggestions(results))
    return "\n".join(parts) + "\n"


def run_section(name, mode, device, dtype, args, overrides, log):
    work = args.work
    if name == "kernels":
        return kernel_tests.run(mode, device, log)
    if name == "sublayer":
        return sublayer.run(mode, device, dtype, log, overrides)
    if name == "train":
        return training.run(mode, device, log, work, overrides)
    if name == "decode":
        return decoding.run(mode, device, dtype, log, overrides)
    multi30k = args.multi30k or os.environ.get("POSMIX_MULTI30K")
    return quality.run(mode, device, log, work, multi30k, overrides, args.quality_prepare_only)


def parse_args(argv=None):
    ap = command_parser("posmix-bench-gpu", __doc__)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller sizes: about 10 minutes on an H100")
    mode.add_argument("--dry-run-cpu", action="store_true", help="tiny sizes on the CPU (CI): not a measurement")
    ap.add_argument("--sections", default=None,
                    help=f"comma list of {', '.join(SECTIONS)} (default: {', '.join(DEFAULT_SECTIONS)})")
    ap.add_argument("--json", default=None, metavar="FILE", help="results file: written after every section, resumed from")
    ap.add_argument("--markdown", default=None, metavar="FILE", help="also write the Markdown tables here")
    ap.add_argument("--redo", action="store_true", help="run the sections even if --json already holds them")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="merge these results (no run) into --json/--markdown")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "posmix-bench-gpu"), metavar="DIR",
                    help="scratch folder: corpora, checkpoints, generate outputs")
    ap.add_argument("--multi30k", default=None, metavar="DIR",
                    help="quality: the raw Multi30k folder (default $POSMIX_MULTI30K)")
    ap.add_argument("--quality-prepare-only", action="store_true",
                    help="quality: prepare the binarized data in --work and stop (no GPU needed)")
    ap.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                    help="override a section setting, VALUE as JSON: sublayer.dims=[1024], train.updates=300, "
                         "train.precisions=[\"fp16\"], decode.beams=[12], quality.systems=[\"rPosNet\"], ...")
    ap.add_argument("--device", default=None, type=device_option, help="default: cuda (cpu with --dry-run-cpu)")
    return ap.parse_args(argv)


def failed_sections(results, names):
    """The sections of ``names`` that ``results`` lacks or holds as failed (an error, or a suite not ok)."""
    sections = results["sections"]
    return [n for n in names if n not in sections or "error" in sections[n]
            or any(s.get("ok") is False for s in sections[n].get("suites", []))]


def main(argv=None) -> int:
    """The ``posmix-bench-gpu`` command: its exit status, 0 when every section asked for ran (or the
    merge was written), 1 otherwise."""
    args = parse_args(argv)
    for path in args.merge or []:
        check_input_file(path, "--merge")
    if args.json and os.path.exists(args.json) and not args.merge:
        check_input_file(args.json, "--json")
    for flag, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path:
            check_output_file(path, flag, parent_must_exist=False)
    check_output_dir(args.work, "--work")
    if args.multi30k and not os.path.isdir(args.multi30k):
        raise CommandError(f"--multi30k {args.multi30k}: " + ("is a file; give the raw Multi30k folder"
                                                              if os.path.exists(args.multi30k) else "no such directory"))
    if args.merge:
        run(args)
        return 0
    return 1 if failed_sections(run(args), section_names(args)) else 0


def section_names(args):
    """The sections ``--sections`` names (an error names the valid ones)."""
    names = [s.strip() for s in (args.sections or ",".join(DEFAULT_SECTIONS)).split(",") if s.strip()]
    bad = [s for s in names if s not in SECTIONS]
    if bad:
        raise UsageError(f"--sections: {', '.join(bad)} unknown; valid: {', '.join(SECTIONS)}")
    return names


def run(args) -> dict:
    """Run (or merge) what ``args`` (a list of command-line arguments, or their namespace) asks for;
    the results."""
    if not isinstance(args, argparse.Namespace):
        args = parse_args(args)
    if args.merge:
        results = merge(args.merge)
        save(args.json, results)
        text = markdown(results)
        print(text)
        if args.markdown:
            replace_file(args.markdown, text)
        return results
    mode = "dry" if args.dry_run_cpu else "quick" if args.quick else "full"
    device = torch.device(args.device or ("cpu" if mode == "dry" or args.quality_prepare_only else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("posmix-bench-gpu: no CUDA device here; --dry-run-cpu runs the tiny CPU check")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    names = section_names(args)
    overrides = parse_set(args.set)
    os.makedirs(args.work, exist_ok=True)
    meta = dict(device_info(device), mode=mode)
    results = dict(meta=meta, sections={})
    if args.json and os.path.exists(args.json):
        results = load(args.json)
        results["meta"] = results.get("meta") or meta
    total = sum(BUDGET_MIN[mode][n] for n in names)
    print(f"posmix-bench-gpu: {meta['name']}; torch {meta['torch']}, Triton {meta['triton']}, CUDA {meta['cuda']}; "
          f"mode {mode}; sections {', '.join(names)} (expected about {total:g} min on an H100)", flush=True)

    def log(message):
        print(message, flush=True)

    for name in [n for n in SECTIONS if n in names]:
        if name in results["sections"] and not args.redo:
            if not failed_sections(results, [name]):
                print(f"[{name}] already in {args.json}: skipped (--redo runs it again)", flush=True)
                continue
            print(f"[{name}] failed in the run that wrote {args.json}: running it again", flush=True)
        print(f"[{name}] start, expected about {BUDGET_MIN[mode][name]:g} min", flush=True)
        start = time.perf_counter()
        try:
            section = run_section(name, mode, device, dtype, args, overrides.get(name), log)
        except Exception as exc:  # noqa: BLE001  (the next sections still run; the error is recorded)
            section = dict(error=f"{type(exc).__name__}: {exc}", targets=[])
        section.update(elapsed_s=time.perf_counter() - start, meta=meta)
        results["sections"][name] = section
        save(args.json, results)
        print(section_markdown(name, section), flush=True)
        print(f"[{name}] done in {section['elapsed_s']:.0f} s", flush=True)
    text = markdown(results)
    if args.markdown:
        replace_file(args.markdown, text)
    failed = failed_sections(results, names)
    print(f"\nposmix-bench-gpu: finished; {'failed sections: ' + ', '.join(failed) if failed else 'all sections ran'}"
          + (f"; results in {args.json}" if args.json else ""))
    return results


cli = console(main, "posmix-bench-gpu")
