"""The recipes' settings: each task's data and each paper's training and decoding settings, every
value with where it comes from.

A value is ``stated`` when the paper states it (the source names the section or table). Values the
paper does not state come from the paper's released code (PosNet: vesterchang/interpret_positional_encoding;
HC: fallcat/stupidNMT) or are ours; the plan lists them apart. Any value can be overridden from the
environment under its variable name (``LR=5e-4``); the plan then shows "environment" as its source.

    python -m posmix_fairseq.harness.recipes.settings --task wmt14_en_de --paper posnet --size base   # the table
"""
import argparse
import os
import shlex
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..paper_tables import SHAW_OWN


@dataclass(frozen=True)
class Setting:
    value: str
    source: str
    stated: bool = True  # the paper states it

    def __str__(self):
        return self.value


class RecipeError(SystemExit):
    pass


def parse_average(spec: str):
    """("best-and-next" | "last" | "none", N) from AVG."""
    parts = spec.split()
    if parts == ["none"]:
        return "none", 0
    if len(parts) != 2 or parts[0] not in ("best-and-next", "last") or not parts[1].isdigit() or int(parts[1]) < 1:
        raise RecipeError(f"AVG={spec!r}: valid values are 'best-and-next N', 'last N' (N >= 1) and 'none'")
    return parts[0], int(parts[1])


def paper(value, where: str) -> Setting:
    return Setting(str(value), where, True)


def code(value, where: str) -> Setting:
    """A value the paper does not state, taken from the paper's released code."""
    return Setting(str(value), f"released code: {where}", False)


def ours(value, why: str) -> Setting:
    return Setting(str(value), f"ours: {why}", False)


GPA, HC, PEA, RECPE, POSNET = "gpa", "hc", "pea", "recpe", "posnet"
PAPER_ALIASES = {"ape": PEA, "rpe": RECPE}  # earlier names of PAPER values, still accepted
PAPER_NAMES = {GPA: "Gated position-based attention (GPA)", HC: "Hard-coded Gaussian attention (HC)",
               PEA: "Analysis of positional encodings (PEA)", RECPE: "Recurrent positional embedding (RecPE)",
               POSNET: "PosNet (Interpreting positional information)"}
POSNET_CODE = "vesterchang/interpret_positional_encoding, posnet_ende.sh"
HC_CODE = "fallcat/stupidNMT"
SIZES = ("tiny", "mini", "small", "base", "big")
PAPER_VARIANTS = {HC: "hc_sa", PEA: "shaw", POSNET: "posnet_embed", RECPE: "rpehead"}  # a paper's default VARIANT
TEST_SIZES = ("tiny", "mini")  # CPU sizes for tests and demonstrations; the papers' settings do not apply

# Vaswani et al.'s schedule, which GPA 5.3 "closely follows": lr = D^-0.5 min(step^-0.5, step warmup^-1.5)
# peaks at D^-0.5 warmup^-0.5 after the warmup; fairseq's inverse_sqrt with --lr at that peak is the same curve.
def vaswani_peak(dim: int, warmup: int = 4000) -> str:
    return f"{dim ** -0.5 * warmup ** -0.5:.2e}"


@dataclass
class TaskSpec:
    name: str
    src: str
    tgt: str
    paper: str                      # default paper
    papers: Tuple[str, ...]         # papers whose settings the task supports
    size: str                       # default size
    what: str
    data: Dict[str, Dict[str, Setting]] = field(default_factory=dict)  # paper -> data settings
    train_pairs: Dict[str, int] = field(default_factory=dict)         # paper -> training pairs it reports
    variant: str = "rposnet"


def _data(moses, vocab, tokenize, lowercase=None, spm_type=None, separate=None, vocab_tgt=None, romanian=None):
    d = {"MOSES": moses, "VOCAB": vocab, "TOKENIZE": tokenize,
         "LOWERCASE": lowercase or ours(0, "the paper does not lowercase"),
         "SPM_TYPE": spm_type or paper("bpe", "byte pair encoding (Sennrich et al., 2016)"),
         "SEPARATE": separate or ours(0, "one joint subword model"),
         "ROMANIAN": romanian or ours(0, "no Romanian side")}
    if vocab_tgt is not None:
        d["VOCAB_TGT"] = vocab_tgt
    return d


MOSES_OURS = ours(1, "Moses normalisation and tokenisation before subwords, as fairseq's translation examples")
TASKS: Dict[str, TaskSpec] = {t.name: t for t in [
    TaskSpec("iwslt14_de_en", "de", "en", GPA, (GPA,), "small",
             "IWSLT14 De->En (TED dev2010, dev2012, tst2010-2012 as the test set)",
             {GPA: _data(ours(1, "Moses tokenisation, as fairseq's prepare-iwslt14.sh"),
                         paper(10000, "GPA Table 1 (one 10k vocabulary)"),
                         paper("13a", "GPA 5.1, footnote 2 (sacreBLEU tok 13a)"),
                         lowercase=paper(1, "GPA 5.1 (lowercased for DE->EN)"))},
             {GPA: 160000}),
    TaskSpec("iwslt16_en_de", "en", "de", HC, (HC,), "small",
             "IWSLT16 En<->De, BLEU on tst2013 (HC footnotes 9 and 13)",
             {HC: _data(code(1, f"{HC_CODE} (Moses tokenizer)"),
                        ours(16000, "the paper does not state the IWSLT16 vocabulary"),
                        paper("intl", "HC footnote 13 (sacreBLEU tok intl)"))},
             {HC: 196884}, variant="hc_sa"),
    TaskSpec("iwslt17_en_ja", "en", "ja", HC, (HC,), "small",
             "IWSLT17 En<->Ja, tst2017 (HC Table 1: 1,452 test pairs)",
             {HC: _data(ours(0, "no Moses step for Japanese; SentencePiece segments the raw text"),
                        paper(32000, "HC footnote 13 (32K sentencepiece vocabulary)"),
                        paper("intl", "HC footnote 13 (sacreBLEU tok intl for every pair it lists)"),
                        spm_type=ours("unigram", "SentencePiece's default model type (footnote 13 names only "
                                                 "SentencePiece)"))},
             {HC: 223108}, variant="hc_sa"),
    TaskSpec("wmt16_en_ro", "en", "ro", HC, (HC,), "base",
             "WMT16 En<->Ro, newstest2016 (HC Table 2, Figs. 3 and 7, Table 3)",
             {HC: _data(paper(1, "HC footnote 13 (Sennrich et al., 2016 preprocessing: Moses)"),
                        code(32000, f"{HC_CODE}, process_enro.sh (32,000 joint BPE merges)"),
                        paper("intl", "HC footnote 13"),
                        romanian=paper(1, "HC footnote 13 (Sennrich et al., 2016: normalise-romanian.py, "
                                          "remove-diacritics.py on the Romanian side)"))},
             {HC: 612422}, variant="hc_sa"),
    TaskSpec("wmt14_en_de", "en", "de", GPA, (GPA, POSNET, RECPE, HC), "base",
             "WMT14 En->De, newstest2014",
             {GPA: _data(MOSES_OURS, paper(44000, "GPA Table 1 (44k)"), paper("13a", "GPA footnote 2")),
              POSNET: _data(paper(1, "PosNet 4.1 (tokenized via the scripts in Moses)"),
                            paper(40000, "PosNet 4.1 (vocabulary size 40,000)"),
                            ours("13a", "sacreBLEU on detokenised text; the released code scores tokenised, "
                                        "compound-split BLEU (scripts/compound_split_bleu.sh)")),
              RECPE: _data(MOSES_OURS, ours(35000, "no shared embeddings and a ~35k joint vocabulary give RecPE's "
                                                 "97.35M Transformer(Base) (97.9M)"),
                         ours("13a", "the paper does not name its BLEU")),
              HC: _data(MOSES_OURS, ours(32000, "the paper does not state it"), paper("intl", "HC footnote 13"))},
             {GPA: 4_000_000, POSNET: 4_430_000, HC: 4_500_966, RECPE: 4_500_000}),
    TaskSpec("wmt14_en_fr", "en", "fr", GPA, (GPA, POSNET, HC), "base",
             "WMT14 En->Fr, newstest2014",
             {GPA: _data(MOSES_OURS, paper(46000, "GPA Table 1 (46k)"), paper("13a", "GPA footnote 2")),
              POSNET: _data(paper(1, "PosNet 4.1"), paper(40000, "PosNet 4.1"),
                            ours("13a", "sacreBLEU on detokenised text (the released code: tokenised BLEU)")),
              HC: _data(MOSES_OURS, ours(32000, "the paper does not state it"), paper("intl", "HC footnote 13"))},
             {GPA: 36_000_000, POSNET: 35_760_000, HC: 10_493_816}),
    TaskSpec("wmt18_en_zh", "en", "zh", GPA, (GPA,), "base",
             "WMT18 En->Zh, newstest2017 (GPA Tables 2 and 7)",
             {GPA: _data(ours(0, "no Moses step for Chinese"), paper(32000, "GPA Table 1 (source 32k)"),
                         paper("zh", "GPA footnote 3 (sacreBLEU tok zh)"),
                         separate=paper(1, "GPA Table 1 (separate source and target vocabularies)"),
                         vocab_tgt=paper(45000, "GPA Table 1 (target 45k)"))},
             {GPA: 17_000_000}),
    TaskSpec("wmt19_de_en", "de", "en", PEA, (PEA,), "base",
             "WMT19 De->En, newstest2018; newstest_all and its concatenation (PEA 4.2)",
             {PEA: _data(ours(1, "PEA 4.1 counts tokens on 'tokenized, subworded text'; Moses tokenises"),
                         paper(50000, "PEA 4.1 (50k joint merge operations; here a 50k SentencePiece BPE vocabulary)"),
                         ours("13a", "sacreBLEU on detokenised text; PEA scores case-sensitive tokenised BLEU "
                                     "and TERCom"))},
             {PEA: 6_000_000}, variant="shaw"),
    TaskSpec("wmt19_zh_en", "zh", "en", PEA, (PEA,), "base",
             "WMT19 Zh->En, newstest2019",
             {PEA: _data(ours(0, "no Moses step for Chinese"), paper(32000, "PEA 4.1 (separate vocabularies of 32k)"),
                         ours("13a", "sacreBLEU on detokenised text"),
                         spm_type=paper("unigram", "PEA 4.1 (unigram language model segmentation)"),
                         separate=paper(1, "PEA 4.1 (separate vocabularies)"))},
             {PEA: 13_700_000}, variant="shaw"),
    TaskSpec("multi30k_en_de", "en", "de", GPA, (GPA,), "small",
             "Multi30k (task 1) En->De, test_2016_flickr: a small public corpus for any arch",
             {GPA: _data(ours(0, "SentencePiece on the raw text"), ours(8000, "Multi30k's 29k pairs"),
                         ours("13a", "sacreBLEU's default"))},
             {GPA: 29000}),
]}

# Hyper-parameters of each paper and size. Keys are the recipe variables.
TRAIN_KEYS = ("ARCH_SUFFIX", "MAX_UPDATE", "EFFECTIVE_TOKENS", "MAX_TOKENS", "GPUS", "LR", "SCHEDULER", "WARMUP",
              "WARMUP_INIT_LR", "END_LR", "LR_SHRINK", "LR_PATIENCE", "VALIDATIONS_PER_EPOCH", "ADAM_BETAS",
              "ADAM_EPS", "WEIGHT_DECAY", "LABEL_SMOOTHING", "SHARE", "MAX_POSITIONS", "BEST_METRIC",
              "SAVE_INTERVAL_UPDATES", "AVG", "BEAM", "LENPEN", "MAX_LEN_A", "MAX_LEN_B", "FP16")

VASWANI = "GPA 5.3 'closely follows the configuration of Vaswani et al.'"
GPA_SIZES = {
    "small": dict(ARCH_SUFFIX=paper("iwslt_de_en", "GPA 5.2 (Small: FFN 1024, dropout 0.3)"),
                  MAX_UPDATE=paper(30000, "GPA 5.3 (Small: 30k steps)"),
                  EFFECTIVE_TOKENS=paper(16000, "GPA 5.3 (about 16000 target tokens per step)"),
                  MAX_TOKENS=ours(4000, "16000 tokens in 4 accumulated batches of 4000"),
                  GPUS=paper(1, "GPA 5.3 (Small: one 2080 Ti)"),
                  LR=ours(vaswani_peak(512), f"{VASWANI}: its schedule peaks at D^-0.5 x 4000^-0.5"),
                  SAVE_INTERVAL_UPDATES=paper(300, "GPA 5.3 (checkpoint period 300 steps)"),
                  AVG=paper("best-and-next 30", "GPA 5.3 (30 checkpoints from the best)")),
    "base": dict(ARCH_SUFFIX=paper("wmt_en_de", "GPA 5.2 (Vaswani et al.'s Base)"),
                 MAX_UPDATE=paper(150000, "GPA 5.3 (Base: 150k)"),
                 EFFECTIVE_TOKENS=paper(27000, "GPA 5.3 (about 27000 target tokens per step)"),
                 MAX_TOKENS=ours(4500, "27000 tokens = 4500 x 2 GPUs x 3 accumulated"),
                 GPUS=paper(2, "GPA 5.3 (Base: two 2080 Ti)"),
                 LR=ours(vaswani_peak(512), f"{VASWANI}: its schedule peaks at D^-0.5 x 4000^-0.5"),
                 SAVE_INTERVAL_UPDATES=paper(1000, "GPA 5.3 (1000 steps each)"),
                 AVG=paper("best-and-next 7", "GPA 5.3 (7 checkpoints)")),
    "big": dict(ARCH_SUFFIX=paper("wmt_en_de_big", "GPA 5.2 (Vaswani et al.'s Big)"),
                MAX_UPDATE=paper(300000, "GPA 5.3 (Big: 300k)"),
                EFFECTIVE_TOKENS=paper(27000, "GPA 5.3 (about 27000 target tokens per step)"),
                MAX_TOKENS=ours(3375, "27000 tokens = 3375 x 4 GPUs x 2 accumulated"),
                GPUS=paper(4, "GPA 5.3 (Big: four 2080 Ti)"),
                LR=ours(vaswani_peak(1024), f"{VASWANI}: its schedule peaks at D^-0.5 x 4000^-0.5"),
                SAVE_INTERVAL_UPDATES=paper(600, "GPA 5.3 (600 steps each)"),
                AVG=paper("best-and-next 20", "GPA 5.3 (20 checkpoints)")),
}
GPA_COMMON = dict(SCHEDULER=paper("inverse_sqrt", "GPA 5.3 (a warmup learning rate schedule with 4000 steps)"),
                  WARMUP=paper(4000, "GPA 5.3 (4000 warmup steps)"),
                  WARMUP_INIT_LR=ours(0, "Vaswani et al.'s schedule starts at 0"),
                  ADAM_BETAS=ours("(0.9,0.98)", f"{VASWANI}: beta1 0.9, beta2 0.98"),
                  ADAM_EPS=ours("1e-9", f"{VASWANI}: epsilon 1e-9"),
                  WEIGHT_DECAY=ours(0, f"{VASWANI}: no weight decay"),
                  LABEL_SMOOTHING=ours(0.1, f"{VASWANI}: label smoothing 0.1"),
                  SHARE=ours("all", "one joint vocabulary, so shared embeddings (Table 2's 66.5M needs them)"),
                  BEST_METRIC=paper("nll_loss", "GPA 5.3 (the best checkpoint by validation perplexity)"),
                  BEAM=paper(12, "GPA 5.3 (beam 12)"),
                  LENPEN=ours(1.0, "the paper does not state a length penalty (fairseq's 1.0)"),
                  FP16=ours(0, "the paper does not say; add DEVICE_FLAGS=--fp16 on GPUs"))

POSNET_SIZES = {
    "base": dict(ARCH_SUFFIX=paper("wmt_en_de", "PosNet Table 1 (Transformer base)"), GPUS=code(1, "README (one RTX 3090)")),
    "big": dict(ARCH_SUFFIX=paper("wmt_en_de_big", "PosNet Table 2 (Transformer big)"), GPUS=code(1, "README (one RTX 3090)")),
}
POSNET_COMMON = dict(
    MAX_UPDATE=code(150000, f"{POSNET_CODE} (--max-update 150000)"),
    EFFECTIVE_TOKENS=paper(32768, "PosNet 4.1 (4096 tokens x 8 accumulated batches)"),
    MAX_TOKENS=paper(4096, "PosNet 4.1 (4096 tokens per batch)"),
    LR=code("7e-4", f"{POSNET_CODE} (--lr 7e-4)"), SCHEDULER=code("inverse_sqrt", POSNET_CODE),
    WARMUP=code(4000, POSNET_CODE), WARMUP_INIT_LR=code("1e-7", f"{POSNET_CODE} (--warmup-init-lr 1e-7)"),
    ADAM_BETAS=paper("(0.9,0.98)", "PosNet 4.1"), ADAM_EPS=paper("1e-9", "PosNet 4.1"),
    WEIGHT_DECAY=code(0, f"{POSNET_CODE} (--weight-decay 0.0)"),
    LABEL_SMOOTHING=paper(0.1, "PosNet 4.1"), SHARE=code("all", f"{POSNET_CODE} (--share-all-embeddings)"),
    BEST_METRIC=ours("nll_loss", "validation perplexity, as the other papers"),
    SAVE_INTERVAL_UPDATES=ours(1000, "the released code averages update checkpoints but sets no interval"),
    AVG=code("last 5", f"{POSNET_CODE} (average_checkpoints.py --num-update-checkpoints 5); the paper states no averaging"),
    BEAM=paper(4, "PosNet 4.1 (beam 4)"), LENPEN=paper(0.6, "PosNet 4.1 (length penalty 0.6)"),
    MAX_LEN_A=code(1, f"{POSNET_CODE} (--max-len-a 1 --max-len-b 50)"), MAX_LEN_B=code(50, POSNET_CODE),
    FP16=paper(1, "PosNet 4.1 (FP16 for training and evaluation)"))

PEA_COMMON = dict(
    ARCH_SUFFIX=paper("wmt_en_de", "PEA 4.1 (base: 6 layers, 8 heads, 512/2048)"),
    MAX_UPDATE=ours(150000, "the paper does not state its training length (GPA's Base length)"),
    EFFECTIVE_TOKENS=paper(4700, "PEA 4.1 (batch size 4700 tokens)"), MAX_TOKENS=paper(4700, "PEA 4.1"),
    GPUS=ours(1, "the paper does not state its GPUs; 4700 tokens is one batch"),
    LR=paper("3e-4", "PEA 4.1 (Adam, learning rate 0.0003)"),
    SCHEDULER=paper("validation_plateau", "PEA 4.1 (x0.9 after 6 evaluation checkpoints without improvement)"),
    WARMUP=paper(0, "PEA 4.1 (no warm-up period)"), LR_SHRINK=paper(0.9, "PEA 4.1"), LR_PATIENCE=paper(6, "PEA 4.1"),
    VALIDATIONS_PER_EPOCH=paper(8, "PEA 4.1 (a model checkpoint 8 times per epoch)"),
    ADAM_BETAS=ours("(0.9,0.98)", "the paper does not state them (Vaswani et al.'s)"),
    ADAM_EPS=ours("1e-9", "Vaswani et al.'s"), WEIGHT_DECAY=ours(0, "Vaswani et al.'s"),
    LABEL_SMOOTHING=ours(0.1, "the paper does not state it (Vaswani et al.'s)"),
    SHARE=paper("none", "PEA 4.1 (source, target embeddings and projection not shared)"),
    MAX_POSITIONS=paper(100, "PEA 4.1 (sequences longer than 100 tokens ignored in training)"),
    BEST_METRIC=paper("nll_loss", "PEA 4.1 (improvement in perplexity on the development set)"),
    AVG=ours("none", "the paper states no averaging: the best checkpoint"),
    BEAM=ours(12, "the paper does not state its beam (GPA's 12)"),
    LENPEN=ours(1.0, "fairseq's"), FP16=ours(0, "the paper does not say"))

HC_SIZES = {
    "small": dict(ARCH_SUFFIX=paper("iwslt_small", "HC 4.2 (embedding 288, hidden 507, 4 heads, 5 layers)"),
                  MAX_UPDATE=code(100000, f"{HC_CODE} args.py (--max-steps 100000)"),
                  EFFECTIVE_TOKENS=code(3000, f"{HC_CODE} README (-b 6000 source+target tokens, one GPU)"),
                  MAX_TOKENS=code(3000, f"{HC_CODE} README (6000 source+target tokens: ~3000 a side)"),
                  GPUS=code(1, f"{HC_CODE} README (IWSLT on one 1080 Ti)"),
                  LR=paper("3e-4", "HC 4.2 (learning rate 3e-4)"),
                  SCHEDULER=paper("polynomial_decay", "HC 4.2 (a linear scheduler)"),
                  WARMUP=code(0, f"{HC_CODE} (LinearLRSchedule: no warmup)"),
                  END_LR=code("1e-5", f"{HC_CODE} args.py (--final-learning-rate 1e-5)"),
                  SAVE_INTERVAL_UPDATES=ours(1000, "the released code saves by wall time"),
                  AVG=code("last 5", f"{HC_CODE} README (--average-checkpoints 5)"),
                  BEAM=code(4, f"{HC_CODE} args.py (--beam-width 4)"), LENPEN=code(0.6, f"{HC_CODE} args.py (--length-penalty 0.6)"),
                  MAX_LEN_A=code(1, f"{HC_CODE} README (--max-decode-length 50 --length-basis input_lens)"),
                  MAX_LEN_B=code(50, HC_CODE)),
    "base": dict(ARCH_SUFFIX=paper("wmt_en_de", "HC 4.2 (the standard Transformer base)"),
                 MAX_UPDATE=code(100000, f"{HC_CODE} args.py (--max-steps 100000)"),
                 EFFECTIVE_TOKENS=code(25400, f"{HC_CODE} README (3175 source+target tokens per GPU x 8 GPUs x 2 "
                                              "accumulated: about 25.4k a side)"),
                 MAX_TOKENS=ours(3175, "25.4k a side over 8 GPUs in one batch each (the released code: two of half "
                                       "the size)"), GPUS=code(8, f"{HC_CODE} README (8 1080 Ti)"),
                 LR=ours(vaswani_peak(512), "HC 4.2 uses 'a warmup scheduler with 4,000 warmup steps' for the "
                                            "base model: Vaswani et al.'s peak D^-0.5 x 4000^-0.5"),
                 SCHEDULER=paper("inverse_sqrt", "HC 4.2 (warmup scheduler)"), WARMUP=paper(4000, "HC 4.2"),
                 SAVE_INTERVAL_UPDATES=ours(1000, "the released code saves by wall time"),
                 AVG=code("last 5", f"{HC_CODE} README (--average-checkpoints 5)"),
                 BEAM=code(4, f"{HC_CODE} args.py"), LENPEN=code(0.6, f"{HC_CODE} args.py"),
                 MAX_LEN_A=code(1, HC_CODE), MAX_LEN_B=code(50, HC_CODE)),
}
HC_COMMON = dict(WARMUP_INIT_LR=ours(0, "from 0"), ADAM_BETAS=ours("(0.9,0.98)", "Vaswani et al.'s"),
                 ADAM_EPS=ours("1e-9", "Vaswani et al.'s"), WEIGHT_DECAY=ours(0, "Vaswani et al.'s"),
                 LABEL_SMOOTHING=code(0.1, f"{HC_CODE} args.py (--label-smoothing 0.1)"),
                 SHARE=ours("all", "one joint vocabulary"),
                 BEST_METRIC=ours("nll_loss", "validation perplexity"), FP16=ours(0, "the paper does not say"))

RECPE_COMMON = dict(SHARE=ours("none", "RecPE's 97.35M Transformer(Base) needs unshared embeddings"),
                  AVG=ours("best-and-next 7", "the poster states no training setup: GPA's Base"))

TEST_SETTINGS = {
    "tiny": dict(ARCH_SUFFIX=ours("iwslt_de_en", "tests: 1+1 layers, D=32, 4 heads (RPEHead's 3 recurrent heads fit)"), MAX_UPDATE=ours(6, "tests"),
                 EFFECTIVE_TOKENS=ours(1000, "tests"), MAX_TOKENS=ours(1000, "tests"), GPUS=ours(1, "CPU"),
                 LR=ours("1e-3", "tests"), SCHEDULER=ours("inverse_sqrt", "tests"), WARMUP=ours(1, "tests"),
                 SAVE_INTERVAL_UPDATES=ours(2, "tests"), AVG=ours("best-and-next 2", "tests"),
                 BEAM=ours(2, "tests"), MAX_LEN_A=ours(1, "tests"), MAX_LEN_B=ours(5, "tests")),
    "mini": dict(ARCH_SUFFIX=ours("iwslt_de_en", "CPU demonstrations: 3+3 layers, D=128"), MAX_UPDATE=ours(400, "CPU"),
                 EFFECTIVE_TOKENS=ours(4096, "CPU"), MAX_TOKENS=ours(4096, "CPU"), GPUS=ours(1, "CPU"),
                 LR=ours("1e-3", "CPU"), SCHEDULER=ours("inverse_sqrt", "CPU"), WARMUP=ours(300, "CPU"),
                 SAVE_INTERVAL_UPDATES=ours(50, "CPU"), AVG=ours("best-and-next 3", "CPU"), BEAM=ours(5, "CPU")),
}
TEST_SIZE_FLAGS = {
    "tiny": ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
             "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 4 "
             "--decoder-attention-heads 4 --max-source-positions 128 --max-target-positions 128"),
    "mini": ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 "
             "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
             "--decoder-attention-heads 4 --dropout 0.1"),
}
# Applies to every paper and size unless the paper's table sets it.
DEFAULTS = dict(SCHEDULER=ours("inverse_sqrt", "fairseq's translation examples"), WARMUP=ours(4000, "Vaswani et al."),
                WARMUP_INIT_LR=ours(0, "from 0"), END_LR=ours(0, "fairseq's"), LR_SHRINK=ours(0.9, "-"),
                LR_PATIENCE=ours(6, "-"), VALIDATIONS_PER_EPOCH=ours(0, "validation at every saved checkpoint"),
                ADAM_BETAS=ours("(0.9,0.98)", "Vaswani et al."), ADAM_EPS=ours("1e-9", "Vaswani et al."),
                WEIGHT_DECAY=ours(0, "Vaswani et al."), LABEL_SMOOTHING=ours(0.1, "Vaswani et al."),
                SHARE=ours("all", "one joint vocabulary"), MAX_POSITIONS=ours(0, "the arch's own limits"),
                BEST_METRIC=ours("nll_loss", "validation perplexity"), LENPEN=ours(1.0, "fairseq's"),
                MAX_LEN_A=ours(1, "source length + 50, as PosNet's and HC's released code"),
                MAX_LEN_B=ours(50, "source length + 50, as PosNet's and HC's released code"),
                FP16=ours(0, "add DEVICE_FLAGS=--fp16 on GPUs"))


class RecipeError(SystemExit):
    """A recipe setting or stage that cannot run: the message names the setting and its valid values."""


def parse_average(spec: str):
    """("best-and-next" | "last" | "none", N) from AVG."""
    parts = spec.split()
    if parts == ["none"]:
        return "none", 0
    if len(parts) != 2 or parts[0] not in ("best-and-next", "last") or not parts[1].isdigit() or int(parts[1]) < 1:
        raise RecipeError(f"AVG={spec!r}: valid values are 'best-and-next N', 'last N' (N >= 1) and 'none'")
    return parts[0], int(parts[1])


def paper_settings(paper_name: str, size: str) -> Dict[str, Setting]:
    """The training and decoding settings of a paper at a size (before environment overrides)."""
    if size in TEST_SIZES:
        return dict(DEFAULTS, **TEST_SETTINGS[size])
    if paper_name == GPA:
        if size not in GPA_SIZES:
            raise ValueError(f"SIZE={size}: GPA has sizes {', '.join(GPA_SIZES)}")
        return dict(DEFAULTS, **GPA_COMMON, **GPA_SIZES[size])
    if paper_name == POSNET:
        if size not in POSNET_SIZES:
            raise ValueError(f"SIZE={size}: PosNet reports base (Table 1) and big (Table 2) models")
        return dict(DEFAULTS, **POSNET_COMMON, **POSNET_SIZES[size])
    if paper_name == PEA:
        if size != "base":
            raise ValueError(f"SIZE={size}: PEA trains base models only (its Section 4.1)")
        return dict(DEFAULTS, **PEA_COMMON)
    if paper_name == HC:
        if size not in HC_SIZES:
            raise ValueError(f"SIZE={size}: HC uses its small IWSLT model (small) and the Transformer base (base)")
        return dict(DEFAULTS, **HC_COMMON, **HC_SIZES[size])
    if paper_name == RECPE:
        if size not in ("base", "big"):
            raise ValueError(f"SIZE={size}: RecPE reports base and big models")
        rpe = {k: Setting(v.value, "ours: the RecPE poster states no training setup; GPA's " + size, False)
               for k, v in dict(GPA_COMMON, **GPA_SIZES[size]).items()}
        return {**DEFAULTS, **rpe, **RECPE_COMMON}
    raise ValueError(f"PAPER={paper_name}: valid values are {', '.join(PAPER_NAMES)}")


# The papers' subwords where they state them. The recipes segment with SentencePiece (prepare_data.py: its
# BPE or unigram model, VOCAB pieces); the papers' BPE is Sennrich et al.'s (2016) subword-nmt, learned as a
# number of merge operations: a deviation, listed in the plan and the recipe's README beside our setting.
PAPER_SUBWORDS: Dict[Tuple[str, str], str] = {
    ("iwslt14_de_en", GPA): "BPE (Sennrich et al., 2016), one 10k vocabulary (GPA 5.1, Table 1)",
    ("wmt14_en_de", GPA): "BPE (Sennrich et al., 2016), a 44k vocabulary (GPA 5.1, Table 1)",
    ("wmt14_en_fr", GPA): "BPE (Sennrich et al., 2016), a 46k vocabulary (GPA 5.1, Table 1)",
    ("wmt18_en_zh", GPA): "BPE (Sennrich et al., 2016), separate 32k (En) and 45k (Zh) vocabularies (GPA 5.1, Table 1)",
    ("wmt14_en_de", POSNET): "BPE (Sennrich et al., 2016) after Moses tokenisation, vocabulary 40,000 (PosNet 4.1)",
    ("wmt14_en_fr", POSNET): "BPE (Sennrich et al., 2016) after Moses tokenisation, vocabulary 40,000 (PosNet 4.1)",
    ("wmt19_de_en", PEA): "BPE (Sennrich et al., 2016) with 50k joint merge operations (PEA 4.1)",
    ("wmt16_en_ro", HC): ("Sennrich et al.'s (2016) preprocessing (HC footnote 13): joint BPE with 32,000 merge "
                          "operations (released code: fallcat/stupidNMT, process_enro.sh)"),
}


def subword_deviation(recipe: "Recipe") -> str:
    """Ours against the paper's subwords where the paper states BPE ("" where it states none, or SentencePiece)."""
    theirs = PAPER_SUBWORDS.get((recipe["TASK"], recipe.paper))
    if not theirs or recipe.size in TEST_SIZES:
        return ""
    sizes = (f"separate vocabularies of {recipe['VOCAB']} / {recipe.get('VOCAB_TGT') or recipe['VOCAB']} pieces"
             if recipe.flag("SEPARATE") else f"one joint vocabulary of {recipe['VOCAB']} pieces")
    return (f"subwords: SentencePiece {recipe['SPM_TYPE']}, {sizes} (prepare_data.py); the paper: {theirs}. "
            "SentencePiece's BPE is not subword-nmt's: the segmentation differs at the same vocabulary size")


def task_overrides(task: str, paper_name: str, size: str) -> Dict[str, Setting]:
    """Task-specific training settings (Multi30k's own small setting)."""
    if task == "multi30k_en_de" and size == "small":
        return dict(MAX_UPDATE=ours(20000, "Multi30k's 29k pairs"), EFFECTIVE_TOKENS=ours(4096, "Multi30k"),
                    MAX_TOKENS=ours(4096, "Multi30k"), GPUS=ours(1, "one GPU"), LR=ours("5e-4", "fairseq's IWSLT example"),
                    BEAM=ours(5, "Multi30k"), AVG=ours("best-and-next 5", "Multi30k"))
    return {}


@dataclass
class Recipe:
    """Every setting of one recipe run (``values``), resolved from the task, the paper, the size and
    the environment."""
    task: TaskSpec
    values: Dict[str, Setting]

    def __getitem__(self, key: str) -> str:
        return self.values[key].value

    def get(self, key: str, default: str = "") -> str:
        return self.values[key].value if key in self.values else default

    def int(self, key: str) -> int:
        return int(float(self.values[key].value))

    def flag(self, key: str) -> bool:
        return self.get(key, "0") not in ("", "0", "false", "no", "off")

    @property
    def paper(self) -> str:
        return self["PAPER"]

    @property
    def size(self) -> str:
        return self["SIZE"]

    def update_freq(self) -> int:
        return int(self.values["UPDATE_FREQ"].value)

    def effective_tokens(self) -> int:
        return self.int("MAX_TOKENS") * self.int("GPUS") * self.update_freq()


ENV_KEYS = ("SRC", "TGT", "PAPER", "SIZE", "VARIANT", "ARCH", "NAME", "RAW", "OUT", "STAGES", "MAX_TRAIN", "MAX_EVAL",
            "TEST_SET", "TRAIN_FLAGS", "DEVICE_FLAGS", "GEN_FLAGS", "GEN_MAX_TOKENS", "COMET_MODEL", "BLEURT_CHECKPOINT",
            "LOG_INTERVAL", "SEED", "LENGTH_BINS", "LENGTH_BY", "CONCAT_BINS", "LINGEVAL97", "LINGEVAL97_URL",
            "UPDATE_FREQ", "MOSES", "LOWERCASE", "VOCAB", "VOCAB_TGT", "SPM_TYPE", "SEPARATE", "TOKENIZE", "ROMANIAN",
            "SIZE_FLAGS", "SPEED_SETTING", "SPEED_FLAGS", "SCORE_FLAGS", "GPUS", "PLAN_TEST_DATA", "MTDATA") + TRAIN_KEYS


def resolve(task_name: str, environ: Optional[Dict[str, str]] = None, root: str = "") -> Recipe:
    """The recipe of ``task_name`` with the environment's overrides (``environ``, default os.environ)."""
    env = dict(os.environ if environ is None else environ)
    if task_name not in TASKS:
        raise ValueError(f"TASK={task_name}: valid tasks are {', '.join(TASKS)}")
    spec = TASKS[task_name]
    given = {k: v for k, v in env.items() if k in ENV_KEYS and v != ""}
    src, tgt = given.get("SRC", spec.src), given.get("TGT", spec.tgt)
    if {src, tgt} != {spec.src, spec.tgt} and not given.get("RAW"):
        raise ValueError(f"SRC={src} TGT={tgt}: {task_name} is {spec.src}<->{spec.tgt}; other languages need RAW=DIR")
    paper_name = given.get("PAPER", spec.paper)
    alias = paper_name if paper_name in PAPER_ALIASES else ""
    if alias:  # an earlier name: the paper's short name now (docs/papers.md)
        paper_name = given["PAPER"] = PAPER_ALIASES[alias]
    if paper_name not in PAPER_NAMES:
        raise ValueError(f"PAPER={paper_name}: valid values are {', '.join(PAPER_NAMES)}")
    if paper_name not in spec.papers:
        raise ValueError(f"PAPER={paper_name}: {task_name} has the settings of {', '.join(spec.papers)}")
    size = given.get("SIZE", spec.size)
    if size not in SIZES:
        raise ValueError(f"SIZE={size}: valid values are {', '.join(SIZES)}")
    values: Dict[str, Setting] = {}
    values.update(spec.data[paper_name])
    values.update(paper_settings(paper_name, size))
    values.update(task_overrides(task_name, paper_name, size))
    if size in TEST_SIZES:
        values["SIZE_FLAGS"] = ours(TEST_SIZE_FLAGS[size], f"the {size} test size")
    if values["MAX_POSITIONS"].value not in ("0", "") and size not in TEST_SIZES:
        n = values["MAX_POSITIONS"]
        values["SIZE_FLAGS"] = Setting(f"--max-source-positions {n.value} --max-target-positions {n.value} "
                                       "--skip-invalid-size-inputs-valid-test", n.source, n.stated)
    values.setdefault("SIZE_FLAGS", ours("", "the arch's own sizes"))
    values["TASK"] = paper(task_name, spec.what)
    values["SRC"], values["TGT"] = ours(src, "the task's"), ours(tgt, "the task's")
    values["PAPER"], values["SIZE"] = ours(paper_name, "default"), ours(size, "default")
    variant = given.get("VARIANT", spec.variant if paper_name == spec.paper else PAPER_VARIANTS.get(paper_name, "rposnet"))
    values["VARIANT"] = ours(variant, "default")
    values["ARCH"] = ours(f"{variant}_{values['ARCH_SUFFIX'].value}", "VARIANT_<size suffix>")
    if paper_name == PEA and variant == "shaw" and not {"VARIANT", "ARCH", "TRAIN_FLAGS"} & set(given):
        values["TRAIN_FLAGS"] = paper(SHAW_OWN, "PEA Section 3.2: Shaw et al.'s relative positions as they define them "
                                                "(a^K and a^V, shared by the heads); the shaw archs are GPA's layout")
    root = os.path.abspath(root or os.getcwd())  # the caller's directory: a recipe writes nothing into the checkout
    values["RAW"] = ours(os.path.join(root, "data", task_name, "raw"), "default")
    values["OUT"] = ours(os.path.join(root, "runs", task_name), "default")
    values["STAGES"] = ours("download prepare preprocess train average generate score", "default")
    values["MTDATA"] = ours("0", "the download stage fetches every corpus itself; MTDATA=1 fetches the corpora mtdata "
                                 "indexes through it (download.py --mtdata; pip install mtdata)")
    for key, value in given.items():  # the environment wins
        values[key] = Setting(value, "environment", False)
    if alias:
        values["PAPER"] = Setting(paper_name, f"environment (PAPER={alias}, the earlier name of {paper_name})", False)
    if "UPDATE_FREQ" not in given:
        values["UPDATE_FREQ"] = _update_freq(values)
    if "NAME" not in given:
        values["NAME"] = ours(values["ARCH"].value, "the arch")
    if values["SEPARATE"].value == "1" and "VOCAB_TGT" not in values:
        values["VOCAB_TGT"] = values["VOCAB"]
    if values["FP16"].value == "1" and "--fp16" not in given.get("DEVICE_FLAGS", "") and "--cpu" not in given.get("DEVICE_FLAGS", ""):
        values["DEVICE_FLAGS"] = Setting((given.get("DEVICE_FLAGS", "") + " --fp16").strip(), values["FP16"].source,
                                         values["FP16"].stated)
    return Recipe(spec, values)


def _update_freq(values: Dict[str, Setting]) -> Setting:
    """Batches accumulated per update: the paper's effective batch over MAX_TOKENS x GPUS."""
    target, tokens, gpus = (int(float(values[k].value)) for k in ("EFFECTIVE_TOKENS", "MAX_TOKENS", "GPUS"))
    freq = max(1, round(target / (tokens * gpus)))
    srcs = {values[k].source for k in ("EFFECTIVE_TOKENS", "MAX_TOKENS", "GPUS")}
    stated = all(values[k].stated for k in ("EFFECTIVE_TOKENS", "MAX_TOKENS", "GPUS"))
    return Setting(str(freq), f"EFFECTIVE_TOKENS / (MAX_TOKENS x GPUS) = {target} / ({tokens} x {gpus})"
                   + ("" if stated else f" ({'; '.join(sorted(s for s in srcs if s.startswith('ours')))})".replace(" ()", "")),
                   stated)


def shell_exports(recipe: Recipe) -> str:
    return "\n".join(f"{k}={shlex.quote(v.value)}" for k, v in sorted(recipe.values.items()))


def settings_table(recipe: Recipe, only_unstated: bool = False) -> List[str]:
    rows = []
    for key in sorted(recipe.values):
        s = recipe.values[key]
        if only_unstated and s.stated:
            continue
        rows.append(f"  {key:22s} {s.value!s:28s} {s.source}")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default=os.environ.get("TASK"), required=not os.environ.get("TASK"))
    p.add_argument("--shell", action="store_true", help="print VAR=value lines for the recipe's shell")
    a, rest = p.parse_known_args(argv)
    env = dict(os.environ)
    for kv in rest:
        k, _, v = kv.lstrip("-").partition("=")
        env[k.upper()] = v
    try:
        recipe = resolve(a.task, env)
    except ValueError as e:
        raise SystemExit(f"recipe: {e}")
    print(shell_exports(recipe) if a.shell else "\n".join(settings_table(recipe)))
    if not a.shell and subword_deviation(recipe):
        print(f"\ndeviation from the paper: {subword_deviation(recipe)}")
    return recipe


if __name__ == "__main__":
    main()
