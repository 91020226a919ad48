"""The plan of a recipe run (``PLAN=1``): what a GPU-day would do, checked on the CPU in seconds.

After the commands (printed by :mod:`.stages`), the plan gives:

- the effective batch: tokens x GPUs x update frequency, against the paper's;
- the learning-rate schedule in updates: when it warms up, when and by how much it decays;
- the checkpoints kept and their disk, from the model's parameter count (the model built on torch's
  meta device) and Adam's state (two fp32 moments per parameter), against fairseq's keep-everything;
- the test set's longest sentence in subword pieces against the model's position limits
  (:mod:`.position_limits`), and what generation will do (raise the limits, or leave N sentences
  untranslated); measured on the prepared data when it exists, else on RAW's (or PLAN_TEST_DATA's,
  any raw corpus with a test set) test set with a SentencePiece model trained on a sample, an estimate;
- every setting the paper does not state, with the value chosen and its source;
- the deviations from the paper (SentencePiece where the paper used subword-nmt's BPE);
- the data sources, and how each was checked.
"""
import math
import os
import tempfile
from typing import Dict, List, Optional, Tuple

from ..raw_text import SPLIT_NAMES, find_split, read_lines
from .download import sacrebleu_check, sources
from .prepare_data import Normaliser, train_spm
from .settings import PAPER_NAMES, TRAIN_KEYS, Recipe, parse_average, subword_deviation

ADAM_BYTES = 8        # exp_avg and exp_avg_sq, fp32, per parameter
SAMPLE_LINES = 2000   # training lines for the plan's SentencePiece model
STAND_IN = "a stand-in: not the paper's test set"  # what the test-length check says when it ran on other data
_META_CACHE: Dict[tuple, object] = {}
_SPM_CACHE: Dict[tuple, object] = {}
UNSTATED_KEYS = ("MOSES", "LOWERCASE", "VOCAB", "VOCAB_TGT", "SPM_TYPE", "SEPARATE", "TOKENIZE", "ROMANIAN",
                 "UPDATE_FREQ") + TRAIN_KEYS


def gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.1f} MB"


def dictionary_sizes(recipe: Recipe, data_bin: str) -> Tuple[int, Optional[int], str]:
    """(source entries, target entries or None, how): the binarized dictionaries when they exist, else
    the subword vocabulary plus fairseq's 4 specials."""
    src, tgt = recipe["SRC"], recipe["TGT"]
    paths = [os.path.join(data_bin, f"dict.{lang}.txt") for lang in (src, tgt)]
    if all(os.path.isfile(p) for p in paths):
        sizes = [sum(1 for _ in open(p, encoding="utf-8")) + 4 for p in paths]
        return sizes[0], (sizes[1] if recipe.flag("SEPARATE") else None), "the binarized dictionaries"
    v = int(recipe["VOCAB"]) + 4
    vt = int(recipe["VOCAB_TGT"]) + 4 if recipe.flag("SEPARATE") else None
    return v, vt, "VOCAB (+ fairseq's 4 special symbols)"


def build_model(flags: List[str], vocab: int, vocab_tgt: Optional[int]):
    key = (tuple(flags), vocab, vocab_tgt)
    if key not in _META_CACHE:
        from .meta_model import meta_model  # meta_model imports torch and fairseq (seconds): only here

        _META_CACHE[key] = meta_model(flags, vocab, vocab_tgt)
    return _META_CACHE[key]


# ---- the test set's lengths --------------------------------------------------------------------------

def _stand_in(recipe: Recipe) -> str:
    """PLAN_TEST_DATA: a raw corpus whose test set stands in for the estimate when RAW has none yet."""
    return recipe.get("PLAN_TEST_DATA")


def _test_files(raw: str, src: str, tgt: str, test_name: str):
    names = [test_name] if test_name else SPLIT_NAMES["test"]
    try:
        return find_split(raw, names, src), find_split(raw, names, tgt)
    except FileNotFoundError:
        return None


def _normalised(raw: str, names: Tuple[str, ...], lang: str, recipe: Recipe, limit: int) -> List[str]:
    """A split of RAW normalised as the recipe's prepare stage does (cached)."""
    flags = (recipe.flag("MOSES"), recipe.flag("LOWERCASE"), recipe.flag("ROMANIAN"))
    key = ("text", raw, names, lang, flags, limit)
    if key not in _SPM_CACHE:
        norm = Normaliser(lang, *flags)
        lines = read_lines(find_split(raw, list(names), lang))
        _SPM_CACHE[key] = [norm(x) for x in (lines[:limit] if limit else lines)]
    return _SPM_CACHE[key]


def _quick_spm(raw: str, lang_pair: Tuple[str, str], recipe: Recipe):
    """Per language, a SentencePiece model of the recipe's kind trained on a sample of RAW's training
    text (cached)."""
    src, tgt = lang_pair
    separate = recipe.flag("SEPARATE")
    key = ("spm", raw, src, tgt, recipe["SPM_TYPE"], recipe["VOCAB"], recipe.get("VOCAB_TGT"), separate,
           recipe.flag("MOSES"), recipe.flag("LOWERCASE"), recipe.flag("ROMANIAN"))
    if key in _SPM_CACHE:
        return _SPM_CACHE[key]
    texts = {lang: _normalised(raw, tuple(SPLIT_NAMES["train"]), lang, recipe, SAMPLE_LINES) for lang in (src, tgt)}
    cover = 0.9995 if {src, tgt} & {"zh", "ja"} else 1.0
    tmp = tempfile.mkdtemp(prefix="posmix-plan-")
    if separate:
        sizes = {src: int(recipe["VOCAB"]), tgt: int(recipe.get("VOCAB_TGT") or recipe["VOCAB"])}
        models = {lang: train_spm(texts[lang], os.path.join(tmp, f"spm.{lang}"), sizes[lang], recipe["SPM_TYPE"], cover)
                  for lang in (src, tgt)}
    else:
        joint = train_spm(texts[src] + texts[tgt], os.path.join(tmp, "spm"), int(recipe["VOCAB"]), recipe["SPM_TYPE"], cover)
        models = {src: joint, tgt: joint}
    _SPM_CACHE[key] = models
    return models


def test_lengths(recipe: Recipe, prep: str) -> Tuple[Optional[List[int]], Optional[List[int]], str]:
    """(source lengths, target lengths, how): subword pieces + EOS per test sentence."""
    src, tgt = recipe["SRC"], recipe["TGT"]
    prepared = [os.path.join(prep, f"test.{lang}") for lang in (src, tgt)]
    if all(os.path.isfile(p) for p in prepared):
        s, t = ([len(x.split()) + 1 for x in read_lines(p)] for p in prepared)
        return s, t, f"exact: the prepared test set {prepared[0]}"
    for raw, label in ((recipe["RAW"], "RAW"), (_stand_in(recipe), f"PLAN_TEST_DATA's ({STAND_IN})")):
        files = _test_files(raw, src, tgt, recipe.get("TEST_SET")) if raw and os.path.isdir(raw) else None
        if not files:
            continue
        models = _quick_spm(raw, (src, tgt), recipe)
        test = recipe.get("TEST_SET")
        names = (test,) if test else ("test",)
        lengths = [[len(models[lang].encode(x, out_type=str)) + 1 for x in _normalised(raw, names, lang, recipe, 0)]
                   for lang in (src, tgt)]
        return lengths[0], lengths[1], (f"estimate: {label} test set {files[0]}, segmented by a {recipe['SPM_TYPE']} "
                                        f"model trained on {SAMPLE_LINES} of its training lines (the real "
                                        "vocabulary is larger, so real pieces are fewer or equal)")
    return None, None, (f"not measured: no {src}-{tgt} test set in RAW ({recipe['RAW']})"
                        + (f" or PLAN_TEST_DATA ({_stand_in(recipe)})" if _stand_in(recipe) else "")
                        + "; run the download stage, give RAW, or name any raw corpus with a test set in "
                          "PLAN_TEST_DATA=DIR for an estimate")


# ---- the report ------------------------------------------------------------------------------------

def batch_section(recipe: Recipe, facts: dict) -> List[str]:
    tokens, gpus, freq = recipe.int("MAX_TOKENS"), facts.get("gpus", recipe.int("GPUS")), facts.get("update_freq", recipe.update_freq())
    eff = tokens * gpus * freq
    paper_eff = recipe.values["EFFECTIVE_TOKENS"]
    lines = [f"- {tokens} tokens x {gpus} GPU(s) x update-freq {freq} = {eff} tokens per update; the paper: "
             f"{paper_eff.value} ({paper_eff.source})"]
    if recipe.values["GPUS"].source != "environment":
        lines.append(f"- GPUs: {recipe['GPUS']} ({recipe.values['GPUS'].source}); at run time the visible GPUs are "
                     "counted and the update frequency is round(EFFECTIVE_TOKENS / (MAX_TOKENS x GPUs)) (set GPUS or "
                     "UPDATE_FREQ to fix them)")
    return lines


def schedule_section(recipe: Recipe, facts: dict) -> List[str]:
    lr, mu, sched = float(recipe["LR"]), recipe.int("MAX_UPDATE"), recipe["SCHEDULER"]
    warm = recipe.int("WARMUP")
    lines = []
    if sched == "inverse_sqrt":
        init = float(recipe["WARMUP_INIT_LR"])
        lines.append(f"- inverse_sqrt: linear warmup from {init:g} to {lr:g} over updates 1-{warm}, then "
                     f"{lr:g} x sqrt({warm} / update)")
        points = [u for u in (2 * warm, 4 * warm, 10 * warm, mu // 2, mu) if warm < u <= mu]
        lines.append("- learning rate at " + ", ".join(f"update {u}: {lr * math.sqrt(warm / u):.3g}" for u in sorted(set(points)))
                     + f" (the end is x{math.sqrt(warm / mu):.3f} of the peak)")
    elif sched == "polynomial_decay":
        end = float(recipe["END_LR"])
        lines.append(f"- polynomial_decay (power 1, linear): {lr:g}" + (f" after {warm} warmup updates" if warm else
                     " from update 1") + f", falling linearly to {end:g} at update {mu}; {(lr + end) / 2:.3g} at {mu // 2}")
    elif sched == "validation_plateau":
        shrink, patience = float(recipe["LR_SHRINK"]), recipe.int("LR_PATIENCE")
        interval = facts.get("validate_interval") or facts.get("save_interval") or 0
        per_epoch = recipe.int("VALIDATIONS_PER_EPOCH")
        upe, how = facts.get("updates_per_epoch", (0, ""))
        n_val = mu // interval if interval else 0
        max_decays = max(0, (n_val - 1) // patience)
        lines.append(f"- validation_plateau: constant {lr:g}; a validation (and checkpoint) every {interval} updates"
                     + (f" = {per_epoch} per epoch of {upe} updates ({how})" if upe else ""))
        lines.append(f"- x{shrink:g} at the {patience}th consecutive validation without improvement of the best "
                     f"perplexity: the earliest decay at update {interval * (patience + 1)} (validation {patience + 1}; "
                     f"the first sets the best); {n_val} validations in {mu} updates allow at most {max_decays} decays, "
                     f"down to {lr * shrink ** max_decays:.3g}")
        if upe:
            epochs = mu / upe
            lines.append(f"- fairseq's reduce_lr_on_plateau would step once per epoch: its earliest decay after epoch "
                         f"{patience + 2} (update {(patience + 2) * upe}); this run trains {epochs:.1f} epochs"
                         + (", so it would never decay" if epochs < patience + 2 else ""))
    else:
        lines.append(f"- {sched}")
    return lines


def checkpoint_disk(recipe: Recipe, facts: dict, params: int) -> dict:
    """Bytes of the checkpoints a run keeps (``kept``) and would keep with fairseq's keep-everything
    (``keep_all``), with the sizes they are made of."""
    fp16 = "--fp16" in recipe.get("DEVICE_FLAGS").split() or "--memory-efficient-fp16" in recipe.get("DEVICE_FLAGS").split()
    weight = 2 if fp16 else 4
    full, stripped = params * (weight + ADAM_BYTES), params * weight
    interval = facts.get("save_interval") or 0
    saves = recipe.int("MAX_UPDATE") // interval if interval else 0
    kind, n = parse_average(recipe["AVG"])
    kept = min(saves, 2 * n) if kind == "best-and-next" else min(saves, n)
    return dict(fp16=fp16, full=full, stripped=stripped, interval=interval, saves=saves, kind=kind, n=n, kept_count=kept,
                kept=kept * stripped + 2 * full + (full if kind == "none" else stripped), keep_all=saves * full + 2 * full)


def checkpoint_section(recipe: Recipe, facts: dict, params: int) -> List[str]:
    d = checkpoint_disk(recipe, facts, params)
    fp16, full, stripped, interval, saves = d["fp16"], d["full"], d["stripped"], d["interval"], d["saves"]
    kind, n, kept = d["kind"], d["n"], d["kept_count"]
    lines = [f"- model: {params:,} parameters ({gb(stripped)} of {'fp16' if fp16 else 'fp32'} weights; with Adam's two "
             f"fp32 moments a full checkpoint is {gb(full)})",
             f"- interval checkpoints: every {interval} updates, {saves} in {recipe['MAX_UPDATE']} updates; averaging: "
             f"{recipe['AVG']} ({recipe.values['AVG'].source})",
             f"- kept (--task translation_window --average-window {n} --average-from "
             f"{'last' if kind == 'last' else 'best'}): at most {kept} interval checkpoints, without optimizer state, "
             f"+ checkpoint_last.pt and checkpoint_best.pt with it + checkpoint_final.pt "
             f"({'a copy of the best' if kind == 'none' else 'the average'}): about "
             f"{gb(d['kept'])}",
             f"- fairseq's --keep-interval-updates -1 would keep all {saves} with optimizer state: about "
             f"{gb(d['keep_all'])}"]
    return lines


def length_section(recipe: Recipe, model, prep: str) -> List[str]:
    # both import torch (seconds), generate fairseq too: only when a plan reports lengths
    from .generate import plan_generation
    from .position_limits import configured_limits, position_limits

    limits = position_limits(model)
    configured = configured_limits(model)
    src_len, tgt_len, how = test_lengths(recipe, prep)
    lines = []
    for side in ("source", "target"):
        lim = limits[side]
        lines.append(f"- {side}: " + (f"a position table stops it at {lim.tokens} tokens ({lim.option}, {lim.module})"
                                      if lim else f"no position table: it extrapolates (trained with at most "
                                                  f"{configured[side]} positions)"))
    lines.append(f"- test set lengths ({how})")
    if src_len is None:
        return lines
    ms, mt = max(src_len), max(tgt_len)
    lines.append(f"- longest test sentence: source {ms - 1} pieces ({ms} tokens with EOS), target {mt - 1} pieces "
                 f"({mt} tokens); {len(src_len)} test pairs")
    for side, lengths in (("source", src_len), ("target", tgt_len)):
        over = sum(1 for n in lengths if n > configured[side])
        if over:
            lines.append(f"- {over} of {len(lengths)} test {side}s ({100 * over / len(lengths):.1f}%) are longer than "
                         f"the {configured[side]} positions of training")
    plan = plan_generation(limits, src_len, float(recipe["MAX_LEN_A"]), int(recipe["MAX_LEN_B"]))
    lines.append(f"- generation: {plan.summary()}")
    if limits["target"]:
        cut = sum(1 for n in tgt_len if n > limits["target"].tokens)
        if cut:
            lines.append(f"- {cut} references are longer than the target table ({limits['target'].tokens}): their "
                         f"translations stop at {limits['target'].tokens - 1} tokens")
    return lines


def sources_section(recipe: Recipe) -> List[str]:
    src, tgt = recipe["SRC"], recipe["TGT"]
    try:
        entries = sources(recipe["TASK"], recipe.paper, src, tgt)
    except ValueError as e:
        return [f"- {e}"]
    lines = []
    for e in entries:
        checked = sacrebleu_check(e, src, tgt) if e.kind == "sacrebleu" else e.checked
        lines.append(f"- {e.describe()}" + (f"; checked: {checked}" if checked else ""))
    return lines


def relevant_keys(recipe: Recipe) -> List[str]:
    """The settings in effect: a scheduler's own options only with that scheduler."""
    sched = recipe["SCHEDULER"]
    unused = set()
    if sched != "validation_plateau":
        unused |= {"LR_SHRINK", "LR_PATIENCE", "VALIDATIONS_PER_EPOCH"}
    if sched != "polynomial_decay":
        unused.add("END_LR")
    if sched != "inverse_sqrt":
        unused.add("WARMUP_INIT_LR")
    if recipe.get("MAX_POSITIONS") in ("", "0"):
        unused.add("MAX_POSITIONS")
    if not recipe.flag("SEPARATE"):
        unused.add("VOCAB_TGT")
    return [k for k in UNSTATED_KEYS if k not in unused]


def plan_report(recipe: Recipe, stages) -> str:
    facts = dict(stages.facts)
    if "gpus" not in facts:
        stages.schedule()
        facts = dict(stages.facts)
    out = ["", f"## Plan: {recipe['TASK']}, {PAPER_NAMES[recipe.paper]}, size {recipe.size}, arch {recipe['ARCH']}"
           + (f" ({recipe['TRAIN_FLAGS']})" if recipe.get("TRAIN_FLAGS") else "")]
    out += ["", "Effective batch:"] + batch_section(recipe, facts)
    out += ["", "Learning-rate schedule (in updates):"] + schedule_section(recipe, facts)
    vocab, vocab_tgt, vocab_how = dictionary_sizes(recipe, stages.data_bin)
    try:
        model = build_model(stages.model_flags(), vocab, vocab_tgt)
    except (ValueError, SystemExit) as e:
        out += ["", f"The model cannot be built: {e}"]
        return "\n".join(out)
    from .meta_model import num_parameters  # meta_model imports torch and fairseq (seconds): only here

    params = num_parameters(model)
    out += ["", f"Checkpoints and disk (dictionaries: {vocab_how}):"] + checkpoint_section(recipe, facts, params)
    out += ["", "Test sentences against the model's position limits:"] + length_section(recipe, model, stages.prep)
    out += ["", "Settings the paper does not state (value, source):"]
    for key in relevant_keys(recipe):
        s = recipe.values.get(key)
        if s is not None and not s.stated:
            out.append(f"- {key} = {s.value}: {s.source}")
    deviation = subword_deviation(recipe)
    if deviation:
        out += ["", "Deviations from the paper:", f"- {deviation}"]
    out += ["", "Data sources:"] + sources_section(recipe)
    return "\n".join(out) + "\n"
