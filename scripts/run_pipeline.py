#!/usr/bin/env python
"""The main job: data -> fairseq-preprocess -> fairseq-train -> posmix-freeze -> fairseq-generate ->
sacreBLEU, for a small Transformer and a small rPosNet, then the search-time (frozen) rPosNet made
from the trained one (GPA Sections 4.1-4.2), with a side-by-side table: BLEU on two test sets (the
test split, drawn like the training data, and a set of sentences longer than any in training),
parameters at training and at search, decoding tokens/s (fairseq-generate's own count), and how many
of the frozen model's translations equal the trained model's. A line above the table says what the
corpus stresses and where each system is expected to be weak.

    python scripts/run_pipeline.py                       # embedded synthetic corpus (default)
    python scripts/run_pipeline.py --data-dir DIR -s en -t de          # e.g. Multi30k's raw release

Without --data-dir, a deterministic synthetic corpus is generated (posmix_fairseq.harness.toy_corpus: a
seeded grammar whose target needs word reordering by word category; its long split joins clauses into
sentences longer than any training sentence). With --data-dir, raw parallel text is read
from DIR/{train,val|valid,test*}.{src,tgt}[.gz], a joint SentencePiece BPE model is trained on
the training split, BLEU/chrF are computed on detokenized output against the raw references, and the
second test set is PEA's concatenated test set (consecutive test pairs joined).
Every step runs the real fairseq command line, as a user would.
"""
import json
import os
import re
import time

import posmix_fairseq
from posmix_fairseq.harness import pipeline
from posmix_fairseq.harness.command import (NON_NEGATIVE_INT, POSITIVE_INT, CommandError, UsageError,
                                            add_language_options, build_parser, check_output_dir, replace_file, run)

SMALL = ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 "
         "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
         "--decoder-attention-heads 4 --dropout 0.1").split()
STRESS = {  # what each corpus stresses, printed above the table
    "toy": "Corpus: synthetic, reordering by word category (adjectives after their noun, verbs to the clause "
           "end): where a target word comes from depends on token identity, which content-based attention "
           "(Transformer) reads and position-only self-attention (rPosNet) leaves to cross-attention, so rPosNet "
           "is expected to trail on `test`; `long` holds sentences longer than any in training (length "
           "generalisation, what relative position models are built for).",
    "real": "Corpus: real text; `long` is PEA's concatenated test set (consecutive test pairs joined, mostly longer "
            "than the training sentences). Small models and few updates: early training, not a ranking "
            "(docs/reproduction.md compares the papers' systems over several seeds).",
}
#: the smallest invocation tests/test_entry_points.py starts from (--data-dir needs the languages)
EXAMPLE_ARGUMENTS = {None: ["-s", "en", "-t", "de"]}
SYSTEMS = {  # label -> fairseq-train flags
    "Transformer": ["--arch", "posmix_transformer_iwslt_de_en"],
    "rPosNet": ["--arch", "rposnet_iwslt_de_en"],
}


def log(msg):
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def progress(max_update):
    """A line handler for fairseq-train's output: training progress (updates done, time left) as fairseq
    logs it, so a long run is never silent. fairseq repeats an update count in its epoch summary and
    validation lines: each count is reported once."""
    t0, reported = time.time(), [0]

    def on_line(line):
        m = re.search(r"num_updates\W+(\d+)", line)
        if m and int(m.group(1)) > reported[0]:
            reported[0] = n = int(m.group(1))
            left = (time.time() - t0) / max(n, 1) * max(max_update - n, 0)
            log(f"  update {n}/{max_update}, about {int(left) // 60}m{int(left) % 60:02d}s of training left")
    return on_line


def count_params(train_log):
    m = re.search(r"num\. shared model params: ([\d,]+)", open(train_log).read())
    return int(m.group(1).replace(",", "")) if m else None


def last_valid_losses(train_log):
    """(label-smoothed loss, nll) of the last validation, bits/token."""
    found = re.findall(r"valid on 'valid' subset \| loss ([\d.]+) \| nll_loss ([\d.]+)", open(train_log).read())
    return (float(found[-1][0]), float(found[-1][1])) if found else (None, None)


def decoding_speed(generate_log):
    """(tokens/s, sentences/s) from fairseq-generate's own summary line (in its log)."""
    m = re.search(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s, "
                  r"([\d.]+) tokens/s\)", open(generate_log, encoding="utf-8").read())
    return (float(m.group(5)), float(m.group(4))) if m else (None, None)


def model_parameters(checkpoint, data_bin):
    """Parameters of the model a checkpoint builds (trainable or not: the frozen tables count)."""
    import logging

    from fairseq import checkpoint_utils

    posmix_fairseq.register()  # imported before fairseq, the package registered nothing
    logging.getLogger("fairseq").setLevel(logging.WARNING)  # the task's dictionary lines are not the job's output
    models, _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={"data": data_bin})
    return sum(p.numel() for p in models[0].parameters())


def system_flags(name):
    """A label of SYSTEMS, or any registered posmix architecture name."""
    if name in SYSTEMS:
        return SYSTEMS[name]
    from fairseq.models import ARCH_MODEL_REGISTRY

    posmix_fairseq.register()  # imported before fairseq, the package registered nothing
    if ARCH_MODEL_REGISTRY.get(name) is not None and ARCH_MODEL_REGISTRY[name].__module__.startswith(
            posmix_fairseq.__name__):
        return ["--arch", name]
    raise UsageError(f"--systems: {name!r} is neither one of {', '.join(SYSTEMS)} nor a posmix architecture")


def hypotheses(generate_out, n, sp):
    hyps = pipeline.hypotheses(generate_out)
    if len(hyps) != n:
        raise SystemExit(f"{generate_out}: {len(hyps)} hypotheses for {n} test sentences")
    out = [hyps[i] for i in range(n)]
    return [sp.decode(h.split()) for h in out] if sp is not None else out


def table_text(results: dict, max_update: int) -> str:
    """The job's table: a row per system, BLEU on both test sets."""
    def cell(value, fmt):
        return "—" if value is None else format(value, fmt)

    header = (f"| system | BLEU test | BLEU long | chrF test | valid loss | valid nll (bits) | params (training) | "
              f"params (search) | train time ({max_update} updates) | decoding tokens/s | "
              f"same translations as trained |")
    rows = [header, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        train_seconds = r.get("train_seconds")
        rows.append(f"| {name} | {r['bleu_test']:.2f} | {r['bleu_long']:.2f} | {r['chrf']:.2f} | "
                    f"{cell(r.get('valid_loss'), '.3f')} | "
                    f"{cell(r.get('valid_nll'), '.3f')} | {cell(r.get('params_train'), ',')} | "
                    f"{r['params_search']:,} | {cell(train_seconds and round(train_seconds), ',')}"
                    f"{'' if train_seconds is None else ' s'} | {cell(r['decode_tokens_per_second'], '.1f')} | "
                    f"{r.get('same_translations', '—')} |")
    return "\n".join(rows)


def check_raw_data(data_dir, src, tgt):
    """Every split of the raw corpus in ``data_dir`` is there, before any work (a CommandError names what is not)."""
    from posmix_fairseq.harness.raw_text import SPLIT_NAMES, find_split  # sentencepiece: only with --data-dir

    if not os.path.isdir(data_dir):
        raise CommandError(f"--data-dir {data_dir}: " + ("is a file; give the folder of the raw corpus"
                                                         if os.path.exists(data_dir) else "no such directory"))
    for names in SPLIT_NAMES.values():
        for lang in (src, tgt):
            try:
                find_split(data_dir, names, lang)
            except FileNotFoundError as e:
                raise CommandError(f"--data-dir {e}") from None


def main(argv=None):
    p = build_parser("run_pipeline.py", __doc__)
    p.add_argument("--data-dir", metavar="DIR", help="raw parallel text (default: the embedded synthetic corpus)")
    add_language_options(p, source_default="src", target_default="tgt", dests=("src", "tgt"),
                         what=" (with --data-dir: the suffix of its files)")
    p.add_argument("--out", default=os.path.join("runs", "quickstart"), metavar="DIR",
                   help="the job's folder, relative to the current directory (default: runs/quickstart)")
    p.add_argument("--max-update", type=POSITIVE_INT, default=600)
    p.add_argument("--max-tokens", type=POSITIVE_INT, default=4096)
    p.add_argument("--vocab-size", type=POSITIVE_INT, default=8000, help="SentencePiece vocabulary (real data only)")
    p.add_argument("--max-train-sentences", type=NON_NEGATIVE_INT, default=0, help="use only the first N training pairs")
    p.add_argument("--beam", type=POSITIVE_INT, default=5)
    p.add_argument("--seed", type=POSITIVE_INT, default=1,
                   help="fairseq-train's --seed for every system (the README's spread is over seeds 1-3 on two "
                        "instruction sets)")
    p.add_argument("--no-freeze", action="store_true",
                   help="skip posmix-freeze (by default every system with aPosNet/rPosNet energies is frozen and decoded)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma list of {', '.join(SYSTEMS)} or posmix arch names (e.g. hc_sa_iwslt_de_en)")
    args = p.parse_args(argv)
    systems = {name: system_flags(name) for name in args.systems.split(",")}
    if args.data_dir and (args.src, args.tgt) == ("src", "tgt"):
        p.error("--data-dir needs -s/--source-lang and -t/--target-lang (the language suffixes of its files, e.g. "
                "-s en -t de)")
    check_output_dir(args.out, "--out")
    if args.data_dir:
        check_raw_data(args.data_dir, args.src, args.tgt)

    out = os.path.abspath(args.out)
    raw, data_bin = os.path.join(out, "raw"), os.path.join(out, "data-bin")
    os.makedirs(raw, exist_ok=True)
    t_start = time.time()
    sp = None
    from posmix_fairseq.harness.raw_text import read_lines

    if args.data_dir:
        log(f"data: {args.data_dir} ({args.src}->{args.tgt}), SentencePiece BPE {args.vocab_size}")
        from posmix_fairseq.harness.evaluation.concat_testset import concatenate_pairs
        from posmix_fairseq.harness.raw_text import prepare_bpe

        texts, sp = prepare_bpe(args.data_dir, args.src, args.tgt, raw, args.vocab_size, args.max_train_sentences)
        joined = concatenate_pairs(texts[("test", args.src)], texts[("test", args.tgt)])
        for lang, lines in zip((args.src, args.tgt), joined):
            replace_file(os.path.join(raw, f"long.{lang}"),
                         "".join(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines))
        references = {"test": texts[("test", args.tgt)], "long": joined[1]}
        stress = STRESS["real"]
    else:
        from posmix_fairseq.harness.toy_corpus import write_corpus

        log("data: embedded synthetic reordering corpus (20,000 train / 500 valid / 500 test pairs, 300 long pairs)")
        write_corpus(raw, seed=1, src=args.src, tgt=args.tgt, long_split=True)
        references = {t: read_lines(os.path.join(raw, f"{t}.{args.tgt}")) for t in ("test", "long")}
        stress = STRESS["toy"]

    log("fairseq-preprocess")
    pipeline.preprocess(args.src, args.tgt, data_bin, f"{raw}/train", f"{raw}/valid", f"{raw}/test,{raw}/long",
                        workers=2, log=os.path.join(out, "preprocess.log"))

    import sacrebleu

    def decode(name, checkpoint):
        # fairseq-generate's defaults but the beam (its default, 5, unless --beam) and the batch size: what a
        # user runs, so the frozen-vs-trained check holds for the lengths fairseq-generate allows (max-len-b 200)
        outputs, scores = {}, {"params_search": model_parameters(checkpoint, data_bin)}
        for test, subset in (("test", "test"), ("long", "test1")):
            log(f"fairseq-generate {name} on {test} (beam {args.beam})")
            stem = f"{name.replace(' ', '_')}.{test}"
            gen_out, gen_log = os.path.join(out, f"generate.{stem}.txt"), os.path.join(out, f"generate.{stem}.log")
            pipeline.generate(data_bin, checkpoint, gen_out, ["--beam", str(args.beam), "--max-tokens", "4000", "--cpu"],
                              gen_subset=subset, log=gen_log)
            hyps = hypotheses(gen_out, len(references[test]), sp)
            replace_file(os.path.join(out, f"hyp.{stem}.txt"), "".join(h + "\n" for h in hyps))
            outputs[test] = gen_out
            scores[f"bleu_{test}"] = sacrebleu.corpus_bleu(hyps, [references[test]]).score
            if test == "test":
                scores["chrf"] = sacrebleu.corpus_chrf(hyps, [references[test]]).score
                scores["decode_tokens_per_second"] = decoding_speed(gen_log)[0]
        return outputs, scores

    results = {}
    for name, flags in systems.items():
        save_dir = os.path.join(out, "checkpoints", name)
        train_log = os.path.join(out, f"train.{name}.log")
        log(f"fairseq-train {name} ({' '.join(flags)}), {args.max_update} updates")
        t0 = time.time()
        pipeline.train(data_bin, save_dir, [
            *flags, *SMALL,
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "300", "--clip-norm", "1.0", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens), "--max-update", str(args.max_update),
            "--no-epoch-checkpoints", "--no-progress-bar", "--log-interval", "100",
            "--seed", str(args.seed), "--num-workers", "0", "--cpu"], log=train_log, on_line=progress(args.max_update),
            env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        train_time = time.time() - t0
        checkpoint = os.path.join(save_dir, "checkpoint_last.pt")
        gen_outs, scores = decode(name, checkpoint)
        valid_loss, valid_nll = last_valid_losses(train_log)
        results[name] = dict(scores, params_train=count_params(train_log), valid_loss=valid_loss,
                             valid_nll=valid_nll, train_seconds=train_time, updates=args.max_update)
        if args.no_freeze:
            continue
        frozen = os.path.join(save_dir, "checkpoint_search.pt")
        log(f"posmix-freeze {name}")
        if not pipeline.freeze(checkpoint, frozen, log=os.path.join(out, f"freeze.{name}.log")):
            log(f"  {name} has no position-only energies (aPosNet / rPosNet): nothing to freeze")
            continue
        frozen_outs, frozen_scores = decode(f"{name} frozen", frozen)
        same = total = 0
        for test in ("test", "long"):
            trained_hyps, frozen_hyps = pipeline.hypotheses(gen_outs[test]), pipeline.hypotheses(frozen_outs[test])
            same += sum(trained_hyps[i] == frozen_hyps.get(i) for i in trained_hyps)
            total += len(trained_hyps)
        results[f"{name} frozen"] = dict(frozen_scores, same_translations=f"{same}/{total}")

    table = table_text(results, args.max_update)
    replace_file(os.path.join(out, "results.md"), stress + "\n\n" + table + "\n")
    replace_file(os.path.join(out, "results.json"), json.dumps(results, indent=2))
    print()
    print(stress)
    print()
    print(table)
    print(f"\nsacreBLEU on `test` ({len(references['test'])} sentences) and `long` ({len(references['long'])}); "
          f"decoding tokens/s as fairseq-generate reports it on `test` (beam {args.beam}, CPU); everything in {out}; "
          f"seed {args.seed}; total {time.time() - t_start:.0f} s. One seed is one draw: the README gives the spread "
          f"over seeds. The papers' claims on real data, over several seeds: docs/reproduction.md")


if __name__ == "__main__":
    raise SystemExit(run(main, "run_pipeline.py"))
