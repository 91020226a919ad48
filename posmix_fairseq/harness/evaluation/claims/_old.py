"""``posmix-claims``: the five papers' headline claims, measured on one real corpus, and the page that
gives each claim its verdict (``docs/reproduction.md``).

    posmix-claims --data-dir DIR --plan                      # every command and the budget; runs nothing
    posmix-claims --data-dir DIR --out claims --results R    # prepare, train, decode, score, write the page
    posmix-claims --data-dir DIR --rows gpa-1,pea-2          # only the systems those rows compare
    posmix-claims --data-dir DIR --results R --render-only   # the page from the finished systems

DIR holds raw parallel text ``{train, val|valid|dev, test*}.{src,tgt}[.gz]`` (Multi30k's raw release; de->en
by default). The study, the same steps for every system:

1. a joint SentencePiece BPE model on the training split; training pairs longer than ``--max-train-len``
   pieces on either side are left out (PEA's length analysis trains with a length cap to test positions
   never seen in training; one cap for every system keeps the grid to one training set);
2. four test sets: the whole test split (``test``), its pairs whose source fits the cap (``seen``), those
   whose source is longer than any training source (``long``), and PEA's concatenated test set
   (``concat``: consecutive pairs joined, as ``posmix-concat-testset`` writes it);
3. ``fairseq-train`` per system until validation stops improving (``--patience`` validations without a
   better validation loss, checked every ``--validate-every`` updates, at most ``--max-update``
   updates); the model decoded averages the best checkpoint and the ones after it (GPA Section 5's rule);
4. ``fairseq-generate`` with beam search on the four test sets; rPosNet is also frozen
   (``posmix-freeze``) and decoded, and its translations compared with the trained model's;
5. ``posmix-score``: BLEU and chrF++ with 95% intervals (paired bootstrap, 1,000 resamples) and paired
   p-values of every system against each claim's baseline;
6. the page: one row per claim, the paper's figure beside ours, and a verdict by the rule in
   :func:`verdict`.

Each step skips what an earlier run finished, so a stopped run continues where it stopped. ``--results``
keeps what a finished system measured (its result and its hypotheses, gzipped; the study's spm.model
and settings): small files a repository can commit, from which a study continues on another machine
and the page is rewritten. ``--jobs 2`` trains two systems at once, each on one thread pinned to its own
core (on a 2-vCPU machine whose vCPUs share a physical core this is no faster than one).
"""
import gzip
import json
import os
import platform
import re
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from .. import pipeline
from ..command import (NON_NEGATIVE_INT, POSITIVE_INT, Number, UsageError, add_language_options,
                       build_parser as command_parser, console)
from .paper_tables import GPA, HC, PEA, POSNET, RECPE

#: 3+3 layers, D = 128: the size of docs/benchmarks.md's early-training tables (the arch's other settings as
#: registered); on a 2-core CPU one system needs over an hour to reach a validation plateau
MINI = ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 "
        "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
        "--decoder-attention-heads 4 --dropout 0.1")
OPTIMISATION = ("--optimizer adam --adam-betas (0.9,0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 300 "
                "--clip-norm 1.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 "
                "--share-all-embeddings --seed 1 --num-workers 0 --no-progress-bar --no-epoch-checkpoints "
                "--best-checkpoint-metric loss")
#: the size that fits the grid on a 2-core CPU: 3+3 layers, D = 64 (see --size and docs/reproduction.md)
SMALL = ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 64 --decoder-embed-dim 64 "
         "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
         "--decoder-attention-heads 4 --dropout 0.1")
#: a size only for checking that the study runs end to end (the tests): 1+1 layers, D = 32
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
        "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --dropout 0.1")
SIZES = {"mini": MINI, "small": SMALL, "tiny": TINY}
#: one update of 4,096 tokens, one thread of a 2-core x86-64 CPU (the plan's estimate)
SIZE_DIM = {"mini": 128, "small": 64, "tiny": 32}
SECONDS_PER_UPDATE = {"mini": 1.8, "small": 0.55, "tiny": 0.05}
SIZE_TEXT = {"mini": "3+3 layers, D = 128, FFN 256, 4 heads, dropout 0.1 (`--size mini`)",
             "small": "3+3 layers, D = 64, FFN 256, 4 heads, dropout 0.1 (`--size small`)",
             "tiny": "1+1 layers, D = 32 (`--size tiny`: a check that the steps run, not a measurement)"}
SHAW_PEA = ("--encoder-self-relative-embedding-heads shared --decoder-self-relative-embedding-heads shared "
            "--encoder-self-shaw-value-term on --decoder-self-shaw-value-term on")  # PEA: trainable a^K and a^V
TEST_SETS = ("test", "seen", "long", "concat")
TEST_SET_TEXT = {"test": "the whole test split", "seen": "test pairs whose source fits the training cap",
                 "long": "test pairs whose source is longer than any training source",
                 "concat": "consecutive test pairs joined (PEA's concatenated test set)"}


@dataclass(frozen=True)
class StudySystem:
    key: str
    label: str
    arch: str
    flags: str = ""
    freeze: bool = False  # also decode its search-time model (posmix-freeze)

    def train_flags(self, size: str = "mini") -> List[str]:
        return ["--arch", self.arch, *SIZES[size].split(), *shlex.split(self.flags)]


#: in the order a study trains them: the systems of the most rows first
SYSTEMS: Dict[str, StudySystem] = {s.key: s for s in [
    StudySystem("transformer", "Transformer (sinusoidal, absolute)", "posmix_transformer_iwslt_de_en"),
    StudySystem("rposnet", "rPosNet", "rposnet_iwslt_de_en", freeze=True),
    StudySystem("shaw", "Shaw relative (PEA's: a^K and a^V)", "shaw_iwslt_de_en", SHAW_PEA),
    StudySystem("hc_sa", "HC-SA", "hc_sa_iwslt_de_en"),
    StudySystem("hc_all", "HC-ALL", "hc_all_iwslt_de_en"),
    StudySystem("nope", "no position encoding", "nope_iwslt_de_en"),
    StudySystem("mprhead", "MPRHead", "mprhead_iwslt_de_en"),
    StudySystem("rposnet_nogate", "rPosNet without gating", "rposnet_iwslt_de_en",
                "--encoder-self-gating off --decoder-self-gating off"),
    StudySystem("aposnet", "aPosNet", "aposnet_iwslt_de_en"),
    StudySystem("sh_x", "SH-X", "sh_x_iwslt_de_en"),
    StudySystem("shaw_konly", "Shaw relative, K only", "shaw_konly_iwslt_de_en"),
    StudySystem("posnet_embed", "PosNet-Embed", "posnet_embed_iwslt_de_en"),
    StudySystem("rpehead", "RPEHead", "rpehead_iwslt_de_en"),
    StudySystem("shaw_sin", "Shaw relative, sinusoidal", "shaw_sin_iwslt_de_en"),
    StudySystem("posnet_attn", "PosNet-Attn", "posnet_attn_iwslt_de_en"),
]}

#: what a claim expects of system against baseline (BLEU difference d = system - baseline, p its paired p-value)
EXPECTATIONS = {
    "no_worse": "system no worse than the baseline by more than the margin",
    "same": "no difference larger than the margin",
    "better": "system better, p < 0.05",
    "worse": "system worse, p < 0.05",
}


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str                      # short name: GPA, HC, PEA, RecPE, PosNet
    text: str                       # the claim, as the paper makes it
    paper_figure: str               # the paper's numbers and their setting
    system: Optional[str] = None    # None: not a BLEU comparison (see kind)
    baseline: Optional[str] = None
    test: str = "test"
    expect: str = "no_worse"
    margin: float = 0.0             # BLEU points, for no_worse / same
    kind: str = "bleu"              # bleu | frozen | params | not_measured
    why_not: str = ""               # kind == not_measured: what it would need

    def systems(self) -> List[str]:
        if self.kind == "frozen":
            return ["rposnet"]
        if self.kind == "params":
            return ["rposnet"]
        return [s for s in (self.system, self.baseline) if s] if self.kind == "bleu" else []


CLAIMS: List[Claim] = [
    Claim("gpa-1", "GPA", "rPosNet translates as well as the Transformer",
          "26.6 vs 26.3 BLEU (WMT14 En-De, Base, Table 2); 35.1 vs 35.0 (IWSLT14 De-En, Small, Table 3)",
          "rposnet", "transformer", expect="no_worse", margin=0.5),
    Claim("gpa-2", "GPA", "the GeLU gate (Eq. 4) is crucial for rPosNet",
          "26.6 gated vs 25.3 without gating (WMT14 En-De, Base, Table 6)", "rposnet", "rposnet_nogate",
          expect="better"),
    Claim("gpa-3", "GPA", "aPosNet cannot match rPosNet (relative positions matter in the energies)",
          "25.9 vs 26.6 (En-De Base, Table 2); 34.2 vs 35.1 (De-En Small, Table 3)", "rposnet", "aposnet",
          expect="better"),
    Claim("gpa-4", "GPA", "rPosNet's energies can be stored as tables after training: the search-time model "
          "translates identically with fewer parameters (Sections 4.1-4.2)",
          "no figure; Table 4: equal decoding speed (16.8 vs 16.8 tokens/s, CPU)", kind="frozen"),
    Claim("gpa-5", "GPA", "precomputing rPosNet's energies after training saves over 20% of its self-attention "
          "parameters (Section 4.2, Table 8: K^D + 4D^2 -> HK^N + 3D^2 per layer)",
          "23% at Base (D = 512), 24% at Big (D = 1024)", kind="params"),
    Claim("hc-1", "HC", "hard-coded Gaussian self-attention (HC-SA) nearly rivals learned self-attention",
          "30.3 vs 30.0 BLEU (IWSLT16 En-De); at most 1.2 lower on the other pairs (Table 2)", "hc_sa",
          "transformer", expect="no_worse", margin=1.0),
    Claim("hc-2", "HC", "hard-coding cross-attention too (HC-ALL) costs far more than hard-coding self-attention",
          "21.1 vs 30.3 (HC-SA) and 30.0 (BASE) on IWSLT16 En-De (Table 2)", "hc_all", "hc_sa", expect="worse"),
    Claim("hc-3", "HC", "a single learned cross-attention head (SH-X) is only slightly worse than BASE",
          "28.2 vs 30.0 (IWSLT16 En-De); 1.1-3.3 lower elsewhere (Table 2)", "sh_x", "transformer",
          expect="no_worse", margin=2.0),
    Claim("hc-4", "HC", "hard-coded self-attention decodes faster and fits larger batches",
          "28.4 vs 26.8 sentences/s, 10.8K vs 9.2K tokens/batch (WMT16 En-Ro, GPU, Table 3)", kind="not_measured",
          why_not="a GPU (posmix-reproduce --table hc-3 --scale paper)"),
    Claim("pea-1", "PEA", "absolute and relative encodings are equal on lengths seen in training",
          "40.4 vs 40.4 BLEU (WMT De-En newstest2018, Table 1); equal up to G51:75 (Table 2)", "shaw",
          "transformer", test="seen", expect="same", margin=0.5),
    Claim("pea-2", "PEA", "relative encoding is far better on sources longer than any seen in training",
          "absolute trained on <= 75 tokens loses 3.4 BLEU on G76:100 and 6.2 on G101: (Table 2)", "shaw",
          "transformer", test="long", expect="better"),
    Claim("pea-3", "PEA", "relative encoding is better on the concatenated test set's long sentences",
          "about 4% BLEU better on G76:100 and G101: of concat seq (Table 3)", "shaw", "transformer",
          test="concat", expect="better"),
    Claim("pea-4", "PEA", "relative K-only (no a^V) loses nothing", "'equal performance and length "
          "generalization' (Table 4, concat seq)", "shaw_konly", "shaw", test="concat", expect="same", margin=0.5),
    Claim("pea-5", "PEA", "fixed sinusoidal relative embeddings lose nothing",
          "'very similar' to trainable relative (Table 4, concat seq)", "shaw_sin", "shaw", test="concat",
          expect="same", margin=0.5),
    Claim("recpe-1", "RecPE", "MPRHead improves over the Transformer",
          "28.35 vs 27.25 BLEU (WMT14 En-De, Base)", "mprhead", "transformer", expect="better"),
    Claim("recpe-2", "RecPE", "RPEHead improves over the Transformer",
          "28.11 vs 27.25 BLEU (WMT14 En-De, Base)", "rpehead", "transformer", expect="better"),
    Claim("recpe-3", "RecPE", "MPRHead is at least as good as RPEHead",
          "28.35 vs 28.11 BLEU (WMT14 En-De, Base)", "mprhead", "rpehead", expect="no_worse", margin=0.5),
    Claim("recpe-4", "RecPE", "MPRHead helps the Big Transformer too",
          "29.11 vs 28.22 BLEU (WMT14 En-De, Big)", kind="not_measured",
          why_not="a GPU and WMT14 (posmix-reproduce --table recpe-big --scale paper)"),
    Claim("posnet-1", "PosNet", "PosNet-Embed is better than sinusoidal absolute positions (SAPE)",
          "27.68 vs 27.48 BLEU (WMT14 En-De, Base, Table 1)", "posnet_embed", "transformer", expect="better"),
    Claim("posnet-2", "PosNet", "without any position encoding translation collapses",
          "13.49 vs 27.48 BLEU (WMT14 En-De, Base, Table 1)", "nope", "transformer", expect="worse"),
    Claim("posnet-3", "PosNet", "PosNet-Attn is worse than SAPE",
          "23.12 vs 27.48 BLEU (WMT14 En-De, Base, Table 1)", "posnet_attn", "transformer", expect="worse"),
    Claim("posnet-4", "PosNet", "PosNet-Embed keeps its lead at Big size",
          "29.23 vs 28.92 BLEU (WMT14 En-De, Big, Table 2)", kind="not_measured",
          why_not="a GPU and WMT14 (posmix-reproduce --table posnet-2 --scale paper)"),
]
CLAIM_BY_KEY = {c.key: c for c in CLAIMS}
PAPER_CITATIONS = {"GPA": GPA, "HC": HC, "PEA": PEA, "RecPE": RECPE, "PosNet": POSNET}


def verdict(claim: Claim, diff: float, p: float) -> str:
    """The verdict of a BLEU claim from d = system - baseline and its paired p-value:

    - ``no_worse``: holds if d >= -margin; does not hold if d < -margin with p < 0.05; else inconclusive;
    - ``same``: holds if |d| <= margin or p >= 0.05; else does not hold;
    - ``better`` / ``worse``: holds if d has the claimed sign with p < 0.05; does not hold if d has the other
      sign with p < 0.05; else not confirmed (the difference is within the noise of this test set).
    """
    significant = p < 0.05
    if claim.expect == "no_worse":
        if diff >= -claim.margin:
            return "holds"
        return "does not hold at this scale" if significant else "inconclusive at this scale"
    if claim.expect == "same":
        return "holds" if abs(diff) <= claim.margin or not significant else "does not hold at this scale"
    sign = 1 if claim.expect == "better" else -1
    if significant:
        return "holds" if diff * sign > 0 else "does not hold at this scale"
    return "not confirmed at this scale (p >= 0.05)"


# ---- the study's folder -----------------------------------------------------------------------------

class Layout:
    def __init__(self, out: str):
        self.out = os.path.abspath(out)
        self.raw = os.path.join(self.out, "raw")
        self.bpe = os.path.join(self.out, "bpe")
        self.data_bin = os.path.join(self.out, "data-bin")
        self.spm = os.path.join(self.bpe, "spm.model")

    def system_dir(self, key: str) -> str:
        return os.path.join(self.out, "systems", key)

    def gen(self, key: str, test: str, frozen: bool = False) -> str:
        return os.path.join(self.system_dir(key), f"generate.{test}{'.frozen' if frozen else ''}.txt")

    def result(self, key: str) -> str:
        return os.path.join(self.system_dir(key), "result.json")

    @property
    def scores(self) -> str:
        return os.path.join(self.out, "scores.json")


def subset_index(test_sets: Sequence[str], name: str) -> str:
    """fairseq-preprocess names the test prefixes test, test1, test2, ..."""
    i = list(test_sets).index(name)
    return "test" if i == 0 else f"test{i}"


# ---- the steps --------------------------------------------------------------------------------------

def log(msg: str) -> None:
    print(f"[claims {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def prepare(opts, lay: Layout) -> dict:
    """BPE, the length-capped training split and the four test sets; returns (and stores) their statistics."""
    info_path = os.path.join(lay.bpe, "prepare.json")
    if os.path.isfile(info_path):
        with open(info_path) as f:
            return json.load(f)
    # sentencepiece (imported by concat_testset) only in the step that encodes text
    from .concat_testset import concatenate_pairs

    texts, sp = bpe_texts(opts, lay)

    def pieces(line):
        return sp.encode(line, out_type=str)

    src_len = [len(pieces(s)) for s in texts[("train", opts.src)]]
    tgt_len = [len(pieces(t)) for t in texts[("train", opts.tgt)]]
    longest = sorted(max(a, b) for a, b in zip(src_len, tgt_len))
    cap = opts.max_train_len or longest[int(0.9 * (len(longest) - 1))]
    keep = [i for i, (a, b) in enumerate(zip(src_len, tgt_len)) if a <= cap and b <= cap]
    test_src, test_tgt = texts[("test", opts.src)], texts[("test", opts.tgt)]
    test_src_len = [len(pieces(s)) for s in test_src]
    concat_src, concat_tgt = concatenate_pairs(test_src, test_tgt)
    subsets = {
        "test": (test_src, test_tgt),
        "seen": tuple([side[i] for i in range(len(test_src)) if test_src_len[i] <= cap] for side in (test_src, test_tgt)),
        "long": tuple([side[i] for i in range(len(test_src)) if test_src_len[i] > cap] for side in (test_src, test_tgt)),
        "concat": (concat_src, concat_tgt),
    }
    if not subsets["long"][0]:
        raise UsageError(f"--max-train-len {cap}: no test source is longer, so nothing tests unseen lengths; "
                         "give a smaller cap")
    os.makedirs(lay.raw, exist_ok=True)

    def write(path, lines):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    for lang, side in ((opts.src, 0), (opts.tgt, 1)):
        write(os.path.join(lay.bpe, f"train.capped.{lang}"),
              [" ".join(pieces(texts[("train", lang)][i])) for i in keep])
        for name, sides in subsets.items():
            write(os.path.join(lay.raw, f"{name}.{lang}"), sides[side])
            write(os.path.join(lay.bpe, f"{name}.{lang}"), [" ".join(pieces(x)) for x in sides[side]])
    concat_len = [len(pieces(s)) for s in concat_src]
    info = {"max_train_len": cap, "train_pairs": len(src_len), "train_pairs_kept": len(keep),
            "longest_train_source": max(src_len[i] for i in keep),
            "test_sizes": {k: len(v[0]) for k, v in subsets.items()},
            "concat_longer_than_cap": sum(n > cap for n in concat_len), "vocab_size": opts.vocab_size}
    with open(info_path, "w") as f:
        json.dump(info, f, indent=2)
    return info


def bpe_texts(opts, lay: Layout):
    """prepare_bpe's BPE files and (raw texts, processor); with a stored results folder's spm.model, that
    model encodes the splits (a study continued elsewhere keeps its segmentation and dictionary)."""
    # sentencepiece only in the step that encodes text (raw_text imports it too)
    import sentencepiece as spm
    from ..raw_text import SPLIT_NAMES, find_split, prepare_bpe, read_lines

    stored = os.path.join(opts.results, "spm.model") if opts.results else None
    if not (stored and os.path.isfile(stored)):
        texts, sp = prepare_bpe(opts.data_dir, opts.src, opts.tgt, lay.bpe, opts.vocab_size)
        if opts.results:
            os.makedirs(opts.results, exist_ok=True)
            shutil.copyfile(lay.spm, stored)
        return texts, sp
    os.makedirs(lay.bpe, exist_ok=True)
    shutil.copyfile(stored, lay.spm)
    sp = spm.SentencePieceProcessor(model_file=lay.spm)
    texts = {(split, lang): read_lines(find_split(opts.data_dir, names, lang))
             for split, names in SPLIT_NAMES.items() for lang in (opts.src, opts.tgt)}
    for (split, lang), lines in texts.items():
        with open(os.path.join(lay.bpe, f"{split}.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines)
    return texts, sp


def preprocess_cmd(opts, lay: Layout) -> List[str]:
    cmd = pipeline.preprocess_command(opts.src, opts.tgt, lay.data_bin, os.path.join(lay.bpe, "train.capped"),
                                      os.path.join(lay.bpe, "valid"), None, workers=1)
    return cmd + ["--testpref", ",".join(os.path.join(lay.bpe, t) for t in TEST_SETS)]


def train_cmd(opts, lay: Layout, system: StudySystem) -> List[str]:
    flags = [*system.train_flags(opts.size), *shlex.split(OPTIMISATION), "--max-tokens", str(opts.max_tokens),
             "--max-update", str(opts.max_update), "--validate-interval-updates", str(opts.validate_every),
             "--save-interval-updates", str(opts.validate_every), "--keep-interval-updates",
             str(opts.patience + 2), "--patience", str(opts.patience), "--log-interval", str(opts.validate_every),
             "--validate-interval", "1000000", "--save-interval", "1000000", *device_flags(opts)]
    return pipeline.train_command(lay.data_bin, os.path.join(lay.system_dir(system.key), "checkpoints"), flags)


def average_cmd(opts, lay: Layout, system: StudySystem) -> List[str]:
    return pipeline.module_command("posmix_fairseq.harness.evaluation.average", "--dir",
                                   os.path.join(lay.system_dir(system.key), "checkpoints"), "--kind", "updates",
                                   "--best-and-next", opts.average, "--output",
                                   os.path.join(lay.system_dir(system.key), "averaged.pt"))


def generate_cmd(opts, lay: Layout, checkpoint: str, test: str) -> List[str]:
    return pipeline.generate_command(lay.data_bin, checkpoint, ["--beam", str(opts.beam), "--max-tokens", "4000",
                                                                "--max-len-b", str(opts.max_len_b), *device_flags(opts)],
                                     gen_subset=subset_index(TEST_SETS, test))


def device_flags(opts) -> List[str]:
    return ["--cpu"] if opts.cpu else []


def _count(pattern: str, text: str) -> Optional[str]:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def training_summary(train_log: str) -> dict:
    text = open(train_log, encoding="utf-8", errors="replace").read()
    valid = [(int(u), float(loss)) for loss, u in re.findall(
        r"valid on 'valid' subset \| loss ([\d.]+) \| .*?num_updates (\d+)", text)]
    best = min(valid, key=lambda x: x[1]) if valid else (None, None)
    last = valid[-1][0] if valid else None
    params = _count(r"num\. shared model params: ([\d,]+)", text)
    return {"validations": valid, "best_update": best[0], "best_valid_loss": best[1], "last_update": last,
            "stopped_by_patience": "early stop since valid performance hasn't improved" in text,
            "params": int(params.replace(",", "")) if params else None}


def decoding_rate(gen_log: str) -> Optional[float]:
    m = re.search(r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)", open(gen_log, encoding="utf-8").read())
    return float(m.group(2)) if m else None


def model_parameters(checkpoint: str, data_bin: str) -> Dict[str, int]:
    """All parameters of the model a checkpoint builds, and those of its self-attention sublayers."""
    # torch and fairseq load in seconds: only the steps that read checkpoints need them (not --help, --plan)
    import logging
    import posmix_fairseq
    from fairseq import checkpoint_utils

    posmix_fairseq.register()
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    models, _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={"data": data_bin})
    named = list(models[0].named_parameters())
    return {"all": sum(p.numel() for _, p in named),
            "self_attention": sum(p.numel() for n, p in named if ".self_attn." in n)}


def run_system(opts, lay: Layout, system: StudySystem, core: Optional[int]) -> dict:
    """Train, average, decode (and freeze) one system; its result.json holds what it cost and measured."""
    if os.path.isfile(lay.result(system.key)) or (opts.results and import_system(opts, lay, system.key)):
        with open(lay.result(system.key)) as f:
            return json.load(f)
    sdir = lay.system_dir(system.key)
    os.makedirs(sdir, exist_ok=True)
    env = {"OMP_NUM_THREADS": str(opts.threads)}
    launcher = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []
    result = {"system": system.key, "label": system.label, "train_flags": shlex.join(train_cmd(opts, lay, system)[
        train_cmd(opts, lay, system).index("--arch"):]),
              "threads": opts.threads, "core": core}

    def run(cmd, **kw):
        return pipeline.run(launcher + cmd, env=env, **kw)

    t0 = time.time()
    train_log = os.path.join(sdir, "train.log")
    run(train_cmd(opts, lay, system), log=train_log)
    result["train_seconds"] = round(time.time() - t0, 1)
    result.update(training_summary(train_log))
    log(f"{system.key}: trained in {result['train_seconds']:.0f} s, best validation at update "
        f"{result['best_update']} of {result['last_update']}")
    averaged = os.path.join(sdir, "averaged.pt")
    run(average_cmd(opts, lay, system), log=os.path.join(sdir, "average.log"))
    result["averaged"] = open(os.path.join(sdir, "average.log")).read().strip().splitlines()[-1]
    t1 = time.time()
    result["decode_tokens_per_second"] = {}
    for test in TEST_SETS:
        gen_log = os.path.join(sdir, f"generate.{test}.log")
        run(generate_cmd(opts, lay, averaged, test), stdout=lay.gen(system.key, test), log=gen_log)
        result["decode_tokens_per_second"][test] = decoding_rate(gen_log)
    result["decode_seconds"] = round(time.time() - t1, 1)
    result["parameters"] = model_parameters(averaged, lay.data_bin)
    if system.freeze:
        frozen = os.path.join(sdir, "search.pt")
        run(pipeline.freeze_command(averaged, frozen), log=os.path.join(sdir, "freeze.log"))
        gen_log = os.path.join(sdir, "generate.test.frozen.log")
        run(generate_cmd(opts, lay, frozen, "test"), stdout=lay.gen(system.key, "test", True), log=gen_log)
        trained, searched = pipeline.hypotheses(lay.gen(system.key, "test")), pipeline.hypotheses(
            lay.gen(system.key, "test", True))
        result["frozen"] = {"same_translations": sum(trained[i] == searched.get(i) for i in trained),
                            "sentences": len(trained), "parameters": model_parameters(frozen, lay.data_bin),
                            "decode_tokens_per_second": decoding_rate(gen_log)}
    for name in os.listdir(os.path.join(sdir, "checkpoints")):  # the averaged model is what is kept
        os.remove(os.path.join(sdir, "checkpoints", name))
    result["seconds"] = round(time.time() - t0, 1)
    with open(lay.result(system.key), "w") as f:
        json.dump(result, f, indent=2)
    if opts.results:
        export_system(opts, lay, system.key)
    log(f"{system.key}: done in {result['seconds']:.0f} s")
    return result


def run_systems(opts, lay: Layout, keys: List[str]) -> None:
    """Systems in order, ``opts.jobs`` at a time; job k runs on core k."""
    queue, lock, failures = list(keys), threading.Lock(), []

    def worker(core):
        while True:
            with lock:
                if not queue or failures:
                    return
                key = queue.pop(0)
            log(f"{key}: training ({SYSTEMS[key].label})" + (f" on core {core}" if core is not None else ""))
            try:
                run_system(opts, lay, SYSTEMS[key], core)
            except BaseException as e:  # the other worker stops taking systems; the error is raised below
                with lock:
                    failures.append((key, e))

    cores = list(range(opts.jobs)) if opts.jobs > 1 else [None]
    threads = [threading.Thread(target=worker, args=(c,)) for c in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        key, e = failures[0]
        raise SystemExit(f"posmix-claims: system {key} failed: {e}")


def score(opts, lay: Layout, keys: List[str]) -> dict:
    """posmix-score per test set: every system's BLEU and chrF++ with its interval, p-values against each
    baseline that a claim names."""
    baselines = [k for k in dict.fromkeys(c.baseline for c in CLAIMS if c.kind == "bleu" and c.baseline)
                 if k in keys]
    others = [k for k in keys if k not in baselines]
    scores = {}
    for test in TEST_SETS:
        out = os.path.join(lay.out, f"scores.{test}.json")
        cmd = pipeline.module_command("posmix_fairseq.harness.evaluation.score",
                                      *[lay.gen(k, test) for k in others])
        if baselines:
            cmd += ["--baseline", *[lay.gen(k, test) for k in baselines]]
        cmd += ["--names", *others, *baselines, "--ref", os.path.join(lay.raw, f"{test}.{opts.tgt}"),
                "--spm-model", lay.spm, "--metrics", "bleu,chrf++", "--json", out, "--quiet"]
        pipeline.run(cmd, log=os.path.join(lay.out, f"score.{test}.log"))
        with open(out) as f:
            scores[test] = json.load(f)
    with open(lay.scores, "w") as f:
        json.dump(scores, f, indent=2)
    return scores


# ---- the results folder: what a study keeps (and a repository can commit) ---------------------------------

def settings(opts) -> dict:
    """What makes two systems' results comparable: a results folder holds one study's settings."""
    return {"src": opts.src, "tgt": opts.tgt, "vocab_size": opts.vocab_size, "max_train_len": opts.max_train_len,
            "max_tokens": opts.max_tokens, "max_update": opts.max_update, "validate_every": opts.validate_every,
            "patience": opts.patience, "average": opts.average, "beam": opts.beam, "max_len_b": opts.max_len_b,
            "size": SIZES[opts.size],
            "optimisation": OPTIMISATION}


def check_results_folder(opts) -> None:
    path = os.path.join(opts.results, "study.json")
    if not os.path.isfile(path):
        return
    with open(path) as f:
        stored = json.load(f)["settings"]
    differ = {k: (stored.get(k), v) for k, v in settings(opts).items() if stored.get(k) != v}
    if differ:
        raise UsageError(f"--results {opts.results} holds a study with other settings ("
                         + "; ".join(f"{k}: {a!r} there, {b!r} here" for k, (a, b) in differ.items())
                         + "): give the same options, or another --results folder")


def hyp_lines(gen_out: str) -> List[str]:
    return [f"H-{i}\t0\t{h}\n" for i, h in sorted(pipeline.hypotheses(gen_out).items())]


def export_system(opts, lay: Layout, key: str) -> None:
    """The system's result.json and its hypotheses (fairseq-generate's H- lines, gzipped) in --results."""
    target = os.path.join(opts.results, key)
    os.makedirs(target, exist_ok=True)
    with open(lay.result(key)) as f:
        result = json.load(f)
    if "command" in result:  # the full command names this machine's paths; the flags are what matters
        words = shlex.split(result.pop("command"))
        result["train_flags"] = shlex.join(words[words.index("--arch"):])
    result["averaged"] = result.get("averaged", "").split(" -> ")[0]  # without the output's path
    with open(os.path.join(target, "result.json"), "w") as f:
        json.dump(result, f, indent=2)
    for test in TEST_SETS:
        for frozen in (False, True):
            gen = lay.gen(key, test, frozen)
            if os.path.isfile(gen):
                name = os.path.basename(gen).replace("generate.", "hyp.") + ".gz"
                with gzip.GzipFile(os.path.join(target, name), "wb", compresslevel=9, mtime=0) as f:
                    f.write("".join(hyp_lines(gen)).encode("utf-8"))  # mtime 0: the same bytes for the same lines


def import_system(opts, lay: Layout, key: str) -> bool:
    """A system finished earlier (its --results entry) restored into the study folder; False if none."""
    source = os.path.join(opts.results, key)
    if not os.path.isfile(os.path.join(source, "result.json")):
        return False
    os.makedirs(lay.system_dir(key), exist_ok=True)
    for name in os.listdir(source):
        if name.startswith("hyp.") and name.endswith(".gz"):
            with gzip.open(os.path.join(source, name), "rt", encoding="utf-8") as f, open(
                    os.path.join(lay.system_dir(key), name[:-3].replace("hyp.", "generate.")), "w",
                    encoding="utf-8") as out:
                out.write(f.read())
    shutil.copyfile(os.path.join(source, "result.json"), lay.result(key))
    return True


def write_study(opts, info: dict, meta: dict) -> None:
    os.makedirs(opts.results, exist_ok=True)
    meta = {k: v for k, v in meta.items() if k != "command"}  # the command line names this machine's paths
    with open(os.path.join(opts.results, "study.json"), "w") as f:
        json.dump({"settings": settings(opts), "prepare": info, "meta": meta}, f, indent=2)


# ---- the page ---------------------------------------------------------------------------------------

def records(scores: dict, test: str) -> List[dict]:
    data = scores.get(test, {})
    for key in ("records", "rows", "scores"):
        if isinstance(data, dict) and isinstance(data.get(key), list):
            return data[key]
    return data if isinstance(data, list) else []


def cell(scores: dict, test: str, system: str, metric: str = "BLEU") -> Optional[dict]:
    for r in records(scores, test):
        if r["system"] == system and r["metric"] == metric:
            return r
    return None


def p_value(scores: dict, test: str, system: str, baseline: str) -> Optional[float]:
    for who, vs in ((system, baseline), (baseline, system)):
        for r in records(scores, test):
            if r["system"] == who and r["metric"] == "BLEU" and r.get("vs") == vs and r.get("p_bootstrap") is not None:
                return r["p_bootstrap"]
    return None


def fmt_score(c: Optional[dict]) -> str:
    if c is None:
        return "—"
    return f"{c['score']:.2f} ± {c['ci95']:.2f}" if c.get("ci95") is not None else f"{c['score']:.2f}"


def row_command(claim: Claim) -> str:
    return f"`posmix-claims --data-dir $MULTI30K --rows {claim.key}`"


def base_size_saving(n: int = 128) -> float:
    """Section 4.2's count at Base size: rPosNet's self-attention parameters trained vs frozen at N
    positions (matrices and tables, as Table 8 counts them), on the meta device: a count needs no weights."""
    # torch and fairseq: the count builds a model (on the meta device)
    from ..recipes.meta_model import meta_model

    counts = []
    for frozen in ([], ["--encoder-frozen-energy-positions", str(n), "--decoder-frozen-energy-positions", str(n)]):
        layer = meta_model(["--arch", "rposnet_wmt_en_de", "--share-all-embeddings", *frozen], 1000).encoder.layers[0]
        counts.append(sum(p.numel() for p in layer.self_attn.parameters() if p.dim() >= 2))
    return 100 * (1 - counts[1] / counts[0])


def claim_row(claim: Claim, scores: dict, results: Dict[str, dict], size: str = "small") -> str:
    label = SYSTEMS[claim.system].label if claim.system in SYSTEMS else ""
    base = SYSTEMS[claim.baseline].label if claim.baseline in SYSTEMS else ""
    if claim.kind == "not_measured":
        return (f"| {claim.key} | {claim.text} | {claim.paper_figure} | — | — | not measured: needs {claim.why_not} "
                f"| — |")
    if claim.kind == "frozen":
        r = results.get("rposnet", {}).get("frozen")
        if not r:
            return f"| {claim.key} | {claim.text} | {claim.paper_figure} | — | — | not run yet | {row_command(claim)} |"
        trained = results["rposnet"]["parameters"]["all"]
        ours = (f"{r['same_translations']}/{r['sentences']} test translations identical; parameters "
                f"{trained:,} → {r['parameters']['all']:,} ({100 * (r['parameters']['all'] / trained - 1):+.1f}%)")
        ok = r["same_translations"] == r["sentences"] and r["parameters"]["all"] < trained
        return (f"| {claim.key} | {claim.text} | {claim.paper_figure} | {ours} | exact (no sampling) | "
                f"{'holds' if ok else 'does not hold'} | {row_command(claim)} |")
    if claim.kind == "params":
        r = results.get("rposnet", {})
        if not r.get("frozen"):
            return f"| {claim.key} | {claim.text} | {claim.paper_figure} | — | — | not run yet | {row_command(claim)} |"
        trained, frozen = r["parameters"]["self_attention"], r["frozen"]["parameters"]["self_attention"]
        saving = 100 * (1 - frozen / trained)
        base = base_size_saving()
        dim = SIZE_DIM[size]
        ours = (f"D = {dim}: {trained:,} → {frozen:,} self-attention parameters ({-saving:+.1f}%: the tables HK^N "
                f"grow with the positions N the model must cover while the D^2 saved shrinks with D); Base size, "
                f"same count: {base:.1f}% saved")
        verdict_text = ("holds" if saving > 20 else
                        f"holds at Base size ({base:.1f}% saved); does not hold at D = {dim} ({-saving:+.1f}%)"
                        if base > 20 else "does not hold")
        return (f"| {claim.key} | {claim.text} | {claim.paper_figure} | {ours} | exact count (no sampling) | "
                f"{verdict_text} | {row_command(claim)} |")
    s, b = cell(scores, claim.test, claim.system), cell(scores, claim.test, claim.baseline)
    p = p_value(scores, claim.test, claim.system, claim.baseline)
    if s is None or b is None or p is None:
        return f"| {claim.key} | {claim.text} | {claim.paper_figure} | — | — | not run yet | {row_command(claim)} |"
    diff = s["score"] - b["score"]
    margin = f"; margin {claim.margin:g}" if claim.expect in ("no_worse", "same") else ""
    ours = (f"{label} {fmt_score(s)} vs {base} {fmt_score(b)} BLEU on `{claim.test}`: "
            f"Δ = {diff:+.2f}, p = {p:.3f}")
    return (f"| {claim.key} | {claim.text} | {claim.paper_figure} | {ours} | {EXPECTATIONS[claim.expect]}{margin} | "
            f"{verdict(claim, diff, p)} | {row_command(claim)} |")


def systems_table(scores: dict, results: Dict[str, dict], keys: List[str]) -> List[str]:
    lines = ["| system | " + " | ".join(f"BLEU `{t}`" for t in TEST_SETS) + " | chrF++ `test` | parameters | "
             "self-attention parameters | updates (best / run) | stopped by | best valid loss (change over its last "
             "3 validations) | train time | decode time (4 sets) |",
             "|---|" + "---|" * (len(TEST_SETS) + 8)]
    for k in keys:
        r = results.get(k)
        if not r:
            continue
        bleu = " | ".join(fmt_score(cell(scores, t, k)) for t in TEST_SETS)
        stop = "patience" if r.get("stopped_by_patience") else "--max-update"
        lines.append(f"| {SYSTEMS[k].label} | {bleu} | {fmt_score(cell(scores, 'test', k, 'chrF2++'))} | "
                     f"{r['parameters']['all']:,} | {r['parameters']['self_attention']:,} | "
                     f"{r['best_update']} / {r['last_update']} | {stop} | {plateau(r)} | "
                     f"{r['train_seconds'] / 60:.1f} min | "
                     f"{r['decode_seconds'] / 60:.1f} min |")
    return lines


def plateau(result: dict) -> str:
    """The best validation loss and how much the loss fell over the last three validations before the best
    (a run stopped by the update cap while still falling has not reached its plateau)."""
    losses = [loss for _, loss in result.get("validations", [])]
    if not losses:
        return "—"
    best = losses.index(min(losses))
    before = losses[max(0, best - 3)]
    return f"{losses[best]:.3f} ({losses[best] - before:+.3f})"


def render(opts, lay: Layout, info: dict, scores: dict, results: Dict[str, dict], keys: List[str]) -> str:
    rows_by_paper: Dict[str, List[str]] = {}
    for c in CLAIMS:
        rows_by_paper.setdefault(c.paper, []).append(claim_row(c, scores, results, opts.size))
    meta = results.get("__meta__", {})
    sizes = info["test_sizes"]
    out = [
        "# The papers' claims, measured",
        "",
        "Each row is one headline claim of the five papers, read from the papers themselves, beside what our "
        "code measures on real data. Generated by `posmix-claims` (the command below); do not edit by hand.",
        "",
        f"- **Generated**: {meta.get('date', time.strftime('%Y-%m-%d'))} on {meta.get('machine', machine())}.",
        f"- **Command**: `{canonical_command(opts)}` (`$MULTI30K`: below; about "
        f"{total_hours(results):.1f} h of training and decoding for the systems here, one after another)",
        f"- **Data**: {opts.data_name} {opts.src}→{opts.tgt}: {info['train_pairs']:,} training pairs, of which "
        f"{info['train_pairs_kept']:,} have both sides within {info['max_train_len']} SentencePiece pieces (the "
        f"length cap every system trains with: the 90th percentile of the longer side); joint BPE "
        f"{info['vocab_size']:,}. Test sets: `test` {sizes['test']} pairs (the test split), `seen` "
        f"{sizes['seen']} (source within the cap), `long` {sizes['long']} (source longer than any training "
        f"source), `concat` {sizes['concat']} (consecutive pairs joined; {info['concat_longer_than_cap']} "
        "of them longer than the cap).",
        f"- **Scale**: every system at {SIZE_TEXT[opts.size]}, Adam, lr 1e-3, inverse-sqrt schedule, {opts.max_tokens} tokens per "
        f"batch, one seed. Training stops when the validation loss has not improved for {opts.patience} "
        f"validations ({opts.validate_every} updates apart) or at {opts.max_update} updates; the model "
        f"decoded is the average of the best checkpoint and the {opts.average - 1} after it (GPA Section 5). "
        f"Beam {opts.beam}. The papers train 30-300 times longer on 5-150 times more data at D = 512-1024.",
        "- **Intervals**: BLEU (sacreBLEU, 13a) ± the half-width of its 95% bootstrap interval (1,000 "
        "resamples); p is the paired bootstrap p-value of the difference (sacreBLEU's paired test). A verdict "
        "follows the rule in its row: *holds*, *does not hold at this scale* (the opposite, p < 0.05), "
        "*not confirmed at this scale* (the claimed direction, but within this test set's noise), "
        "*inconclusive*, or *not measured* (the paper's setting needs a GPU).",
        "- **Each row's command** trains only the systems that row compares "
        "(`$MULTI30K`: a folder of Multi30k's raw `{train,val,test_2016_flickr}.{de,en}`; users fetch it from the "
        "multi30k/dataset repository, `data/task1/raw`).",
        "",
        progress_line(results, keys),
        "",
        "How the study's settings were chosen, and where the papers leave a choice open: "
        "[choices](choices.md#the-claims-study-posmix-claims-reproduction).",
        "",
    ]
    for paper, rows in rows_by_paper.items():
        out += [f"## {paper}", "", PAPER_CITATIONS[paper], "",
                "| row | claim | the paper | ours | rule | verdict | command |", "|---|---|---|---|---|---|---|",
                *rows, ""]
    out += ["## Every system on every test set", "",
            "BLEU ± 95% interval on each test set; what each run cost (wall time on the machine above, one run "
            "at a time on one torch thread unless a row's system says otherwise).", "",
            *systems_table(scores, results, keys), ""]
    if "rposnet" in results and results["rposnet"].get("frozen"):
        fr = results["rposnet"]["frozen"]
        out += [f"rPosNet frozen (`posmix-freeze`): {fr['same_translations']}/{fr['sentences']} translations of "
                f"`test` identical to the trained model's; {fr['parameters']['all']:,} parameters.", ""]
    return "\n".join(out) + "\n"


def progress_line(results: Dict[str, dict], keys: List[str]) -> str:
    """How many rows are measured, how many wait for systems not trained yet, how many need a GPU."""
    done = set(k for k in results if k != "__meta__")
    gpu = [c for c in CLAIMS if c.kind == "not_measured"]
    ready = [c for c in CLAIMS if c.kind != "not_measured" and set(c.systems()) <= done]
    with_intervals = [c for c in ready if c.kind == "bleu"]
    pending = sorted(set(k for c in CLAIMS for k in c.systems()) - done, key=list(SYSTEMS).index)
    line = (f"**{len(ready)} of {len(CLAIMS)} rows measured** ({len(with_intervals)} with intervals); "
            f"{len(CLAIMS) - len(ready) - len(gpu)} wait for systems not trained yet; {len(gpu)} need a GPU "
            "and the papers' data.")
    if pending:
        line += (" Systems still to train (the command above continues with them, keeping the finished ones): "
                 + ", ".join(SYSTEMS[k].label for k in pending) + ".")
    return line


def canonical_command(opts) -> str:
    """The command that regenerates the page, without this machine's paths: the options that differ from
    their defaults, the data as $MULTI30K."""
    parser = build_parser()
    words = ["posmix-claims", "--data-dir", "$MULTI30K"]
    for action in parser._actions:
        if not action.option_strings or action.option_strings[0] in ("--src", "--tgt") or action.dest in ("data_dir", "out", "page", "results", "render_only", "plan",
                                                        "help", "version", "quiet", "debug", "cpu", "threads",
                                                        "jobs", "seconds_per_update", "rows", "systems"):
            continue
        value = getattr(opts, action.dest, None)
        if value != action.default:
            words += [action.option_strings[-1], str(value)]
    return " ".join(words + ["--results", "examples/claims/results", "--page", "docs/reproduction.md"])


def total_hours(results: Dict[str, dict]) -> float:
    return sum(r.get("seconds", 0) for k, r in results.items() if k != "__meta__") / 3600


def machine() -> str:
    cores = os.cpu_count()
    cpu = platform.processor() or platform.machine()
    try:
        import torch  # only to name its version; the page can be written without torch

        versions = f"torch {torch.__version__}"
    except ImportError:  # render-only on a machine without torch
        versions = "torch not installed"
    return f"{cpu}, {cores} cores, no GPU, Python {platform.python_version()}, {versions}"


# ---- the command ------------------------------------------------------------------------------------

def selected_systems(opts) -> List[str]:
    if opts.rows and opts.systems:
        raise UsageError("--rows and --systems both choose the systems: give one")
    if opts.rows:
        keys = []
        for k in opts.rows.split(","):
            if k not in CLAIM_BY_KEY:
                raise UsageError(f"--rows: no row {k!r}; rows: {', '.join(CLAIM_BY_KEY)}")
            if CLAIM_BY_KEY[k].kind == "not_measured":
                raise UsageError(f"--rows {k}: {CLAIM_BY_KEY[k].why_not.split(' (')[0]} is needed; "
                                 f"run {CLAIM_BY_KEY[k].why_not.split('(')[-1].rstrip(')')}")
            keys += CLAIM_BY_KEY[k].systems()
        wanted = set(keys)
        return [k for k in SYSTEMS if k in wanted]
    if opts.systems:
        keys = opts.systems.split(",")
        for k in keys:
            if k not in SYSTEMS:
                raise UsageError(f"--systems: no system {k!r}; systems: {', '.join(SYSTEMS)}")
        return keys
    return list(SYSTEMS)


def plan(opts, lay: Layout, keys: List[str]) -> str:
    lines = [f"# posmix-claims plan: {len(keys)} systems, {opts.jobs} at a time, in {lay.out}",
             "# 1. BPE, length cap and test sets (python): "
             f"{opts.data_dir} -> {lay.bpe}, {lay.raw}",
             "# 2. " + shlex.join(preprocess_cmd(opts, lay))]
    for k in keys:
        s = SYSTEMS[k]
        lines += [f"# system {k}: {s.label}", shlex.join(train_cmd(opts, lay, s)), shlex.join(average_cmd(opts, lay, s))]
        lines += [shlex.join(generate_cmd(opts, lay, os.path.join(lay.system_dir(k), "averaged.pt"), t))
                  + f" > {lay.gen(k, t)}" for t in TEST_SETS]
        if s.freeze:
            lines.append(shlex.join(pipeline.freeze_command(os.path.join(lay.system_dir(k), "averaged.pt"),
                                                            os.path.join(lay.system_dir(k), "search.pt"))))
    lines.append("# then posmix-score per test set (BLEU, chrF++, 95% intervals, paired p-values) and the page")
    per_update = opts.seconds_per_update or SECONDS_PER_UPDATE[opts.size]
    budget = opts.max_update * len(keys) * per_update / max(opts.jobs, 1)
    lines.append(f"# at most {opts.max_update} updates per system; at {per_update:g} s per update "
                 f"(--seconds-per-update) that is at most {budget / 3600:.1f} h of training")
    return "\n".join(lines)


def build_parser():
    p = command_parser("posmix-claims", __doc__)
    p.add_argument("--data-dir", metavar="DIR", help="raw parallel text: {train,val|valid|dev,test*}.{SRC,TGT}[.gz]")
    p.add_argument("--data-name", default="Multi30k (task 1)", help="the data's name on the page")
    add_language_options(p, source_default="de", target_default="en", dests=("src", "tgt"),
                         what=" (the suffix of --data-dir's files)")
    p.add_argument("--out", default="claims", metavar="DIR", help="the study's folder (relative to the current "
                   "directory)")
    p.add_argument("--rows", help="comma list of rows (e.g. gpa-1,hc-2): only the systems they compare")
    p.add_argument("--systems", help=f"comma list of systems: {', '.join(SYSTEMS)}")
    p.add_argument("--plan", action="store_true", help="print every command and the budget; run nothing")
    p.add_argument("--render-only", action="store_true", help="score and write the page from finished systems")
    p.add_argument("--page", metavar="FILE", help="write the page here (default: OUT/reproduction.md)")
    p.add_argument("--results", metavar="DIR",
                   help="keep each finished system's result and hypotheses here (small files a repository can "
                        "commit); systems found here are not trained again, and a study continued on another "
                        "machine encodes with the spm.model kept here")
    p.add_argument("--vocab-size", type=POSITIVE_INT, default=4000, help="joint SentencePiece BPE vocabulary")
    p.add_argument("--max-train-len", type=NON_NEGATIVE_INT, default=0,
                   help="length cap of the training pairs in pieces (0: the 90th percentile of the longer side)")
    p.add_argument("--max-tokens", type=POSITIVE_INT, default=4096, help="tokens per batch")
    p.add_argument("--max-update", type=POSITIVE_INT, default=2500, help="the most updates a system trains")
    p.add_argument("--validate-every", type=POSITIVE_INT, default=100, help="updates between validations / checkpoints")
    p.add_argument("--patience", type=POSITIVE_INT, default=3,
                   help="stop after this many validations without a better validation loss")
    p.add_argument("--average", type=POSITIVE_INT, default=4, help="average the best checkpoint and the N-1 after it")
    p.add_argument("--beam", type=POSITIVE_INT, default=5, help="beam size of fairseq-generate")
    p.add_argument("--max-len-b", type=POSITIVE_INT, default=200, help="fairseq-generate's --max-len-b (its default: 200)")
    p.add_argument("--size", choices=sorted(SIZES), default="small",
                   help="small: 3+3 layers, D = 64 (the grid that fits a 2-core CPU); mini: 3+3, D = 128; "
                        "tiny: 1+1, D = 32 (checks that the steps run)")
    p.add_argument("--jobs", type=POSITIVE_INT, default=1, help="systems trained at once, each pinned to its own core (on "
                   "a 2-vCPU machine whose vCPUs share a core, two jobs train no faster than one)")
    p.add_argument("--threads", type=NON_NEGATIVE_INT, default=0, help="torch threads per run (0: cores / jobs)")
    p.add_argument("--seconds-per-update", type=Number(float, 0), default=0.0,
                   help="--plan's estimate of one update's time (0: the size's time measured on a 2-core CPU, "
                        "one thread: small 0.55 s, mini 1.8 s)")
    p.add_argument("--cpu", action="store_true", default=None, help="train on the CPU (default: when no GPU)")
    return p


def check_options(opts) -> None:
    """What the parser's ranges cannot say: options that bound each other."""
    if opts.average > opts.patience + 1:
        raise UsageError(f"--average must be in 1..--patience + 1 = {opts.patience + 1}: the best checkpoint and "
                         f"the ones after it that training keeps (got {opts.average})")
    if opts.validate_every > opts.max_update:
        raise UsageError(f"--validate-every {opts.validate_every} is more than --max-update {opts.max_update}")


def main(argv: Optional[List[str]] = None):
    opts = build_parser().parse_args(argv)
    check_options(opts)
    keys = selected_systems(opts)
    if opts.threads == 0:
        opts.threads = max(1, (os.cpu_count() or 1) // opts.jobs)
    lay = Layout(opts.out)
    info_path = os.path.join(lay.bpe, "prepare.json")
    needs_data = not (opts.render_only and os.path.isfile(info_path))
    if needs_data and not opts.data_dir:
        raise UsageError("--data-dir is required: a folder of raw parallel text (e.g. Multi30k's data/task1/raw)"
                         + (f"; --render-only needs it too while {lay.out} holds no prepared study"
                            if opts.render_only else ""))
    if opts.data_dir and not os.path.isdir(opts.data_dir):
        raise UsageError(f"--data-dir {opts.data_dir}: no such directory")
    if opts.results:
        check_results_folder(opts)
    if opts.cpu is None:
        opts.cpu = not _has_gpu()
    if opts.plan:
        print(plan(opts, lay, keys))
        return 0
    if needs_data:
        log(f"prepare: {opts.data_dir} ({opts.src}->{opts.tgt})")
        info = prepare(opts, lay)
        log(f"  length cap {info['max_train_len']} pieces: {info['train_pairs_kept']:,} of {info['train_pairs']:,} "
            f"training pairs; test sets {info['test_sizes']}")
    with open(info_path) as f:
        info = json.load(f)
    if opts.results and not os.path.isfile(os.path.join(opts.results, "spm.model")):
        os.makedirs(opts.results, exist_ok=True)
        shutil.copyfile(lay.spm, os.path.join(opts.results, "spm.model"))
    meta_path = os.path.join(lay.out, "meta.json")
    if not opts.render_only:
        if not os.path.isfile(os.path.join(lay.data_bin, "dict." + opts.src + ".txt")):
            pipeline.run(preprocess_cmd(opts, lay), log=os.path.join(lay.out, "preprocess.log"))
        with open(meta_path, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "machine": machine(),
                       "command": "posmix-claims " + shlex.join(sys.argv[1:] if argv is None else argv)}, f)
        if opts.results:
            write_study(opts, info, json.load(open(meta_path)))
        run_systems(opts, lay, keys)
    done = []
    for k in keys:
        if os.path.isfile(lay.result(k)):
            if opts.results and not os.path.isfile(os.path.join(opts.results, k, "result.json")):
                export_system(opts, lay, k)  # finished in a study folder before it had a results folder
            done.append(k)
        elif opts.results and import_system(opts, lay, k):
            done.append(k)
    if not done:
        raise UsageError(f"{lay.out}: no finished system to score" + (f" (nor in {opts.results})" if opts.results else ""))
    results = {}
    for k in done:
        with open(lay.result(k)) as f:
            results[k] = json.load(f)
    stored_meta = os.path.join(opts.results, "study.json") if opts.results else None
    if os.path.isfile(meta_path):
        with open(meta_path) as f:
            results["__meta__"] = json.load(f)
    elif stored_meta and os.path.isfile(stored_meta):
        with open(stored_meta) as f:
            results["__meta__"] = json.load(f)["meta"]
    if opts.results:
        write_study(opts, info, results.get("__meta__", {}))
    scores = score(opts, lay, done)
    page = render(opts, lay, info, scores, results, done)
    target = opts.page or os.path.join(lay.out, "reproduction.md")
    with open(target, "w", encoding="utf-8") as f:
        f.write(page)
    log(f"page: {target}")
    return 0


def _has_gpu() -> bool:
    try:
        import torch  # only to ask for a GPU: --help starts without it
    except ImportError:
        return False
    return torch.cuda.is_available()


cli = console(main, "posmix-claims")


if __name__ == "__main__":
    raise SystemExit(cli())
