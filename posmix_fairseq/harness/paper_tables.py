"""The papers' tables as grids of systems, with the numbers the papers report (transcribed from
the papers' texts, docs/papers.md; a value the available text does not give is absent, never guessed).

Each system is a recipe run: ``VARIANT`` (arch = VARIANT_<size suffix>) or a full ``arch``, plus
fairseq-train flags. ``paper_flags`` apply at paper scale only; ``tiny`` replaces the flags at the tiny
scale where the paper's setting needs more layers than tiny has. Tables of speed and memory name what
they measure (``measures``); their columns are ours, beside the paper's own units.
"""
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

# Each paper's short name, then its citation (docs/papers.md has the full entries and BibTeX).
GPA = "GPA: Schmidt and Di Gangi, WMT 2023, https://aclanthology.org/2023.wmt-1.46"
HC = "HC: You, Sun and Iyyer, ACL 2020, https://aclanthology.org/2020.acl-main.687"
PEA = "PEA: Rosendahl, Tran, Wang and Ney, IWSLT 2019, https://aclanthology.org/2019.iwslt-1.20"
RECPE = "RecPE: Chen, Wang, Utiyama and Sumita, EMNLP-IJCNLP 2019, https://aclanthology.org/D19-1139"
POSNET = "PosNet: Zhang, Liu, Liu and Liang, ACL 2023"

NO_SA = "--encoder-self-mixer none --decoder-self-mixer none"  # HC's '/-SA': self-attention removed


def hc_offsets(lowest_highest: str, middle: str, layers: int = 5) -> str:
    """HC Appendix Table 6: the heads of the lowest and highest layer (l: i-1, c: i, r: i+1), the middle
    layers fixed; one comma list per layer (the 5-layer small IWSLT model)."""
    code = {"l": "-1", "c": "0", "r": "1"}
    ends = ",".join(code[x] for x in lowest_highest)
    mid = ",".join(code[x] for x in middle)
    return ";".join([ends] + [mid] * (layers - 2) + [ends])


def slug(label: str) -> str:
    """A system's label as it names the system's files (``scores.<slug>.json``, the recipe's NAME)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower()


@dataclass
class System:
    label: str
    variant: str = ""
    flags: str = ""
    arch: str = ""              # full arch name (paper scale); else VARIANT + the size's suffix
    paper_flags: str = ""
    tiny_flags: Optional[str] = None


@dataclass
class Table:
    name: str
    title: str
    paper: str
    recipe: str                 # examples/<recipe>/run.sh
    env: Dict[str, str]         # recipe variables at paper scale (PAPER, SIZE, ...)
    systems: List[System]
    reported: Dict[str, Dict[str, float]] = field(default_factory=dict)  # label -> column -> value
    stages: str = "train average generate score"
    note: str = ""
    # what is measured besides the scores: "speed" (posmix-decode-speed, SPEED_SETTING in env), "train_memory"
    # (peak GPU memory of training, from fairseq's log), "train_speed" (training tokens/s, from the log),
    # "contrastive" (LingEval97 accuracy per error type)
    measures: Tuple[str, ...] = ()
    baseline: str = ""          # the system the others are tested against (default: the first)

    def baseline_of(self, labels: List[str]) -> Optional[str]:
        """The baseline among ``labels`` (the systems that ran): ``baseline``, else the first."""
        if not labels:
            return None
        return self.baseline if self.baseline in labels else labels[0]


def S(label, variant="", flags="", **kw):
    return System(label, variant, flags, **kw)


GATING = lambda v: f"--encoder-self-gating {v} --decoder-self-gating {v}"  # noqa: E731
MIX = lambda e, d, c: f"--encoder-self-mixer {e} --decoder-self-mixer {d} --decoder-cross-mixer {c}"  # noqa: E731
LC_OFF = "--encoder-self-lightconv-glu off --decoder-self-lightconv-glu off"
GLOBAL = "--encoder-self-lightconv-global-context on --decoder-self-lightconv-global-context on"
# Shaw et al.'s own layout (a^K and a^V, shared by the heads), which PEA uses (its Section 3.2); the shaw_*
# archs are GPA's reading (docs/choices.md)
SHAW_OWN = ("--encoder-self-relative-embedding-heads shared --decoder-self-relative-embedding-heads shared "
            "--encoder-self-shaw-value-term on --decoder-self-shaw-value-term on")


def _r(cols, rows):
    return {label: {c: v for c, v in zip(cols, vals) if v is not None} for label, vals in rows.items()}


GPA3 = ["En-De BLEU", "En-De BLEURT", "En-De COMET", "En-Fr BLEU", "En-Fr BLEURT", "En-Fr COMET",
        "En-Zh BLEU", "En-Zh BLEURT", "En-Zh COMET"]
TABLES: Dict[str, Table] = {t.name: t for t in [
    Table("gpa-2", "GPA Table 2: Base models on En->De, En->Fr, En->Zh", GPA, "wmt14_en_de",
          {"PAPER": "gpa", "SIZE": "base"},
          [S("Transformer", "posmix_transformer"), S("Shaw et al. (2018)", "shaw"), S("FourierNet", "fouriernet"),
           S("GaussianNet", "hc_sa"), S("LinearNet", "linearnet"), S("LightConv", "lightconvnet"),
           S("gLinearNet", "glinearnet"), S("aPosNet", "aposnet"), S("rPosNet", "rposnet")],
          _r(GPA3, {"Transformer": [26.3, 71.1, 47.6, 37.8, 69.0, 61.1, 33.8, 64.3, 42.5],
                    "Shaw et al. (2018)": [26.3, 71.4, 48.6, 37.8, 69.2, 61.6, 34.0, 64.6, 43.5],
                    "FourierNet": [22.8, 66.0, 31.8, 34.9, 64.2, 49.3, 31.5, 61.6, 34.9],
                    "GaussianNet": [25.3, 68.1, 39.5, 36.7, 66.9, 55.7, 32.6, 62.6, 36.8],
                    "LinearNet": [25.3, 69.8, 44.3, 37.0, 67.7, 58.2, 33.1, 63.3, 40.2],
                    "LightConv": [26.0, 70.6, 46.7, 37.4, 68.6, 60.3, 33.0, 63.5, 41.1],
                    "gLinearNet": [26.1, 70.8, 46.7, 37.8, 69.1, 61.3, 33.5, 64.0, 42.4],
                    "aPosNet": [25.9, 70.6, 46.1, 37.7, 69.0, 61.4, 33.6, 63.7, 42.2],
                    "rPosNet": [26.6, 71.4, 48.6, 37.9, 69.4, 61.8, 33.8, 64.2, 43.1]}),
          note="En->Fr and En->Zh: the same grid with examples/wmt14_en_fr and examples/wmt18_en_zh."),
    Table("gpa-5", "GPA Table 5: rPosNet in each attention sublayer (En->De, Base)", GPA, "wmt14_en_de",
          {"PAPER": "gpa", "SIZE": "base"},
          [S(f"enc-self {e} / dec-self {d} / dec-cross {c}", "posmix_transformer",
             MIX(*["rposnet" if x == "rPosNet" else "mha" for x in (e, d, c)]))
           for e, d, c in [("MHA", "MHA", "MHA"), ("rPosNet", "MHA", "MHA"), ("MHA", "rPosNet", "MHA"),
                           ("MHA", "MHA", "rPosNet"), ("rPosNet", "rPosNet", "MHA"), ("rPosNet", "MHA", "rPosNet"),
                           ("MHA", "rPosNet", "rPosNet"), ("rPosNet", "rPosNet", "rPosNet")]],
          {f"enc-self {e} / dec-self {d} / dec-cross {c}": {"En-De BLEU": b, "En-De BLEURT": bl, "En-De COMET": co}
           for (e, d, c), (b, bl, co) in zip(
               [("MHA", "MHA", "MHA"), ("rPosNet", "MHA", "MHA"), ("MHA", "rPosNet", "MHA"), ("MHA", "MHA", "rPosNet"),
                ("rPosNet", "rPosNet", "MHA"), ("rPosNet", "MHA", "rPosNet"), ("MHA", "rPosNet", "rPosNet"),
                ("rPosNet", "rPosNet", "rPosNet")],
               [(26.3, 71.1, 47.6), (26.4, 71.2, 48.1), (26.1, 71.1, 47.2), (24.6, 69.2, 43.8), (26.6, 71.4, 48.6),
                (24.8, 69.8, 45.2), (24.3, 69.0, 42.8), (24.9, 69.3, 43.5)])},
          note="Rows 1-8 of Table 5 in order; rPosNet sublayers use the arch's default gating (on for rPosNet)."),
    Table("gpa-6", "GPA Table 6: each attention with and without gating (En->De, Base)", GPA, "wmt14_en_de",
          {"PAPER": "gpa", "SIZE": "base"},
          [S(f"{label} gating {g}", v, GATING(g)) for label, v in
           [("Transformer", "posmix_transformer"), ("Shaw et al. (2018)", "shaw"), ("Rel. Self-Attention", "relattn"),
            ("aPosNet", "aposnet"), ("rPosNet", "rposnet")] for g in ("off", "on")],
          _r(["Params", "En-De BLEU", "En-De BLEURT", "En-De COMET"], {
              "Transformer gating off": [66.5, 26.3, 71.1, 47.6], "Transformer gating on": [69.7, 26.6, 71.6, 49.6],
              "Shaw et al. (2018) gating off": [66.7, 26.3, 71.4, 48.6], "Shaw et al. (2018) gating on": [69.9, 26.7, 71.8, 49.5],
              "Rel. Self-Attention gating off": [63.6, 25.7, 70.4, 46.4], "Rel. Self-Attention gating on": [66.7, 26.5, 71.3, 49.0],
              "aPosNet gating off": [61.8, 25.4, 69.4, 42.6], "aPosNet gating on": [65.0, 25.9, 70.6, 46.1],
              "rPosNet gating off": [60.8, 25.3, 70.1, 45.1], "rPosNet gating on": [63.9, 26.6, 71.4, 48.6]})),
    Table("gpa-7", "GPA Table 7: from LightConv to rPosNet (En->Zh, Base)", GPA, "wmt18_en_zh",
          {"PAPER": "gpa", "SIZE": "base"},
          [S("Transformer", "posmix_transformer"), S("Shaw et al. (2018)", "shaw"),
           S("Light Convolution", "lightconvnet", LC_OFF), S("LightConv", "lightconvnet"),
           S("+ GeLU Gating", "lightconvnet", f"{LC_OFF} {GATING('on')}"),
           S("+ Global Context", "lightconvnet", f"{LC_OFF} {GATING('on')} {GLOBAL}"), S("rPosNet", "rposnet")],
          _r(["Params (M)", "En-Zh BLEU", "En-Zh BLEURT", "En-Zh COMET"], {
              "Transformer": [107, 33.8, 64.3, 42.5], "Shaw et al. (2018)": [None, 34.0, 64.5, 43.8],
              "Light Convolution": [101, 33.2, 63.4, 40.6], "LightConv": [None, 33.0, 63.5, 41.1],
              "+ GeLU Gating": [104, 33.5, 63.7, 42.4],
              "+ Global Context": [104, 33.6, 63.9, 42.4], "rPosNet": [104, 33.8, 64.2, 43.1]}),
          note="Rows 1-7 of Table 7. The text extraction merged row 4 (LightConv, with GLU) into row 5; Appendix E's "
               "prose restores both: row 5 is row 4 + 0.5 BLEU, 0.2 BLEURT, 1.3 COMET and row 6 is row 5 + 0.1 BLEU, "
               "0.2 BLEURT, + 0 COMET, so row 5 is 33.5 / 63.7 / 42.4 and row 4 is 33.0 / 63.5 / 41.1 (Table 2's "
               "LightConv En-Zh row). Row 4's and Shaw's parameter counts are not in the text ('10/M' is garbled)."),
    Table("hc-1", "HC main results (the paper's Table 2; its Table 1 lists dataset statistics)", HC, "iwslt16_en_de",
          {"PAPER": "hc", "SIZE": "small"},
          [S("BASE", "posmix_transformer"), S("HC-SA", "hc_sa"), S("HC-ALL", "hc_all"), S("SH-X", "sh_x")],
          _r(["IWSLT16 En-De", "IWSLT16 De-En", "IWSLT17 En-Ja", "IWSLT17 Ja-En", "WMT16 En-Ro", "WMT16 Ro-En",
              "WMT14 En-De", "WMT14 En-Fr"], {
              "BASE": [30.0, 34.4, 20.9, 11.6, 33.0, 33.1, 26.8, 40.3], "HC-SA": [30.3, 34.8, 20.7, 10.9, 32.9, 32.8, 26.3, 39.1],
              "HC-ALL": [21.1, 25.7, 10.6, 6.1, 25.5, 26.2, 21.7, 35.6], "SH-X": [28.2, 33.3, 18.5, 10.1, 30.4, 31.7, 23.5, 37.1]}),
          note="BLEU with sacreBLEU tok intl (footnote 13); the other language pairs: the recipes iwslt17_en_ja, "
               "wmt16_en_ro, wmt14_en_de/en_fr with PAPER=hc."),
    Table("hc-fig7", "HC Fig. 7: learned cross-attention heads in one layer vs spread over layers (WMT16 En-Ro, IWSLT small model)",
          HC, "wmt16_en_ro", {"PAPER": "hc", "SIZE": "small"},
          [S("1 head, last layer", "sh_x", "--decoder-cross-heads 0,0,0,0,1", tiny_flags="--decoder-layers 2 --decoder-cross-heads 0,1")]
          + [S(f"{n} heads, last layer", "sh_x", "--decoder-cross-heads 0,0,0,0," + str(n),
               tiny_flags=f"--decoder-layers 2 --decoder-cross-heads 0,{n}" if n == 2 else None) for n in (2, 3, 4)]
          + [S(f"{n} heads, 1 per layer", "sh_x", "--decoder-cross-heads " + ",".join(["0"] * (5 - n) + ["1"] * n),
               tiny_flags="--decoder-layers 2 --decoder-cross-heads 1,1" if n == 2 else None) for n in (2, 3, 4)],
          note="The figure's values are not in the available text. At tiny scale (2 decoder layers) only the "
               "1-head, 2-heads-one-layer and 2-heads-two-layers systems run."),
    Table("pea-1", "PEA Table 1: absolute vs relative positions (WMT De->En newstest2018, Zh->En newstest2019)",
          PEA, "wmt19_de_en", {"PAPER": "pea", "SIZE": "base"},
          [S("Absolute", "posmix_transformer"), S("Relative", "shaw", SHAW_OWN)],
          _r(["De-En BLEU", "De-En TER", "Zh-En BLEU", "Zh-En TER"],
             {"Absolute": [40.4, 46.7, 24.0, 64.0], "Relative": [40.4, 46.9, 25.0, 62.9]}),
          note="The paper scores tokenised text with TERCom; here sacreBLEU on detokenised text. Zh->En: examples/wmt19_zh_en."),
    Table("pea-2", "PEA Table 2: BLEU by source-length group G0:25 ... G101:inf (newstest_all)", PEA, "wmt19_de_en",
          {"PAPER": "pea", "SIZE": "base", "TEST_SET": "newstest_all"},
          [S("Absolute", "posmix_transformer"), S("Relative", "shaw", SHAW_OWN), S("LSTM", "lstmpe"),
           S("Absolute, trained <= 75", "posmix_transformer", "--max-source-positions 75 --max-target-positions 75",
             tiny_flags="--max-source-positions 16 --max-target-positions 16"),
           S("Relative, trained <= 75", "shaw", SHAW_OWN + " --max-source-positions 75 --max-target-positions 75",
             tiny_flags=SHAW_OWN + " --max-source-positions 16 --max-target-positions 16")],
          _r(["G101:inf BLEU"], {"Absolute": [21.5]}), stages="train average generate score lengthbins",
          note="Only the G101:inf BLEU of the absolute model (21.5) is stated in the available text; the table "
               "itself is not. At tiny scale the '<= 75' systems train on <= 16 positions."),
    Table("pea-3", "PEA Table 3: the concatenated test set by source-length group", PEA, "wmt19_de_en",
          {"PAPER": "pea", "SIZE": "base", "TEST_SET": "newstest_all"},
          [S("Absolute", "posmix_transformer"), S("Relative", "shaw", SHAW_OWN),
           S("Absolute, trained <= 75", "posmix_transformer", "--max-source-positions 75 --max-target-positions 75",
             tiny_flags="--max-source-positions 16 --max-target-positions 16"),
           S("Relative, trained <= 75", "shaw", SHAW_OWN + " --max-source-positions 75 --max-target-positions 75",
             tiny_flags=SHAW_OWN + " --max-source-positions 16 --max-target-positions 16")],
          stages="train average generate score concat", note="The table's values are not in the available text."),
    Table("pea-4", "PEA Table 4: relative-position variants on the concatenated test set", PEA, "wmt19_de_en",
          {"PAPER": "pea", "SIZE": "base", "TEST_SET": "newstest_all"},
          [S("Relative", "shaw", SHAW_OWN), S("Relative sinusoidal", "shaw_sin"), S("Relative K-only", "shaw_konly"),
           S("Relative + absolute", "shaw_abs")],
          stages="train average generate score concat", note="The table's values are not in the available text."),
    Table("recpe", "RecPE results: RPEHead/MPRHead on WMT14 En-De (newstest2014)", RECPE, "wmt14_en_de",
          {"PAPER": "recpe", "SIZE": "base"},
          [S("Transformer(Base)", "posmix_transformer"), S("+Relative PEs", "shaw_abs"), S("+RPEHead", "rpehead"),
           S("+MPRHead", "mprhead")],
          _r(["WMT14 En-De BLEU", "#Param (M)"], {"Transformer(Base)": [27.25, 97.35], "+Relative PEs": [27.60, 97.42],
                                                "+RPEHead": [28.11, 97.84], "+MPRHead": [28.35, 97.72]}),
          note="Big: Transformer 28.22, +MPRHead 29.11 (SIZE=big). NIST Zh-En results are not reproduced (no public data)."),
    Table("posnet-1", "PosNet Table 1: Transformer base on WMT14 En-De / En-Fr (newstest2014)", POSNET, "wmt14_en_de",
          {"PAPER": "posnet", "SIZE": "base"},
          [S("w/o PE", "nope"), S("SAPE", "posmix_transformer"), S("LAPE", "learnedpe"), S("RPE", "shaw", SHAW_OWN),  # PosNet 5.2: "we follow the configuration in Shaw et al."
           S("Adaptive-T5", "at5bias"), S("PosNet-Attn", "posnet_attn"), S("PosNet-Embed", "posnet_embed")],
          _r(["En-De BLEU", "En-De chrF++", "En-Fr BLEU", "En-Fr chrF++", "#Params En-De (M)"], {
              "w/o PE": [13.49, 43.99, 22.59, 51.45, 63.08], "SAPE": [27.48, 53.97, 40.46, 62.09, 63.08],
              "LAPE": [24.34, 52.15, 39.75, 61.50, 64.13], "RPE": [27.07, 53.65, 40.61, 62.26, 63.37],
              "Adaptive-T5": [27.02, 53.53, 40.36, 62.08, 63.08], "PosNet-Attn": [23.12, 49.91, 36.14, 59.17, 64.11],
              "PosNet-Embed": [27.68, 54.05, 40.81, 62.33, 66.49]}),
          note="PosNet-Embed En-Fr is marked significantly better than SAPE (p < 0.05) in the paper."),
]}

GPA_GRID = [S("Transformer", "posmix_transformer"), S("Shaw et al. (2018)", "shaw"), S("FourierNet", "fouriernet"),
            S("GaussianNet", "hc_sa"), S("LinearNet", "linearnet"), S("LightConv", "lightconvnet"),
            S("gLinearNet", "glinearnet"), S("aPosNet", "aposnet"), S("rPosNet", "rposnet")]
GPA3 = ["Params (M)", "BLEU", "BLEURT", "COMET"]
HC_LINGEVAL = ["np-agreement", "subj-verb-agreement", "subj-adequacy", "polarity-particle-nicht-del",
               "polarity-particle-kein-del", "polarity-affix-del", "polarity-particle-nicht-ins",
               "polarity-particle-kein-ins", "polarity-affix-ins", "auxiliary", "verb-particle", "compound",
               "transliteration"]
HC_SPEED = [S("BASE", "posmix_transformer"), S("HC-SA", "hc_sa"), S("SH-X", "sh_x"),
            S("BASE/-SA", "posmix_transformer", NO_SA), S("SH-X/-SA", "sh_x", NO_SA)]
RECPE_ABLATION = [
    S("Transformer (Base)", "posmix_transformer"),
    S("-PE of Dec", "posmix_transformer", "--decoder-position-encoding none"),
    S("-PE of Enc", "posmix_transformer", "--encoder-position-encoding none"),
    S("RPEHead (base)", "rpehead"),
    S("RPEHead -RPE&PE of Dec", "rpehead", "--decoder-position-encoding none"),
    S("RPEHead -RPE&PE of Enc", "rpehead", "--encoder-position-encoding none"),
    S("MPRHead (base)", "mprhead"),
    S("MPRHead -RPE&PE of Dec", "mprhead", "--decoder-position-encoding none"),
    S("MPRHead -RPE/PE of Enc", "mprhead", "--encoder-position-encoding none"),
    S("MPRHead -RPE&PE of Enc&Dec", "mprhead", "--encoder-position-encoding none --decoder-position-encoding none")]

TABLES.update({t.name: t for t in [
    Table("gpa-3-big", "GPA Table 3 (left): Big models on En->De", GPA, "wmt14_en_de", {"PAPER": "gpa", "SIZE": "big"},
          GPA_GRID, _r([f"En-De {c}" for c in GPA3], {
              "Transformer": [221, 27.1, 72.3, 50.4], "Shaw et al. (2018)": [221, 27.3, 72.7, 51.5],
              "FourierNet": [208, 24.0, 67.6, 36.5], "GaussianNet": [196, 26.3, 69.4, 42.3],
              "LinearNet": [199, 26.6, 71.3, 48.0], "LightConv": [209, 26.8, 71.7, 49.1],
              "gLinearNet": [212, 27.1, 72.2, 49.9], "aPosNet": [212, 26.8, 71.4, 47.7], "rPosNet": [210, 27.3, 72.2, 50.4]})),
    Table("gpa-3-small", "GPA Table 3 (right): Small models on De->En (IWSLT14)", GPA, "iwslt14_de_en",
          {"PAPER": "gpa", "SIZE": "small"}, GPA_GRID, _r([f"De-En {c}" for c in GPA3], {
              "Transformer": [36.8, 35.0, 69.3, 37.6], "Shaw et al. (2018)": [37.0, 35.4, 69.7, 38.8],
              "FourierNet": [33.6, 32.5, 66.9, 28.2], "GaussianNet": [30.4, 34.3, 68.4, 34.1],
              "LinearNet": [32.0, 34.0, 68.3, 33.9], "LightConv": [33.6, 34.4, 68.9, 35.5],
              "gLinearNet": [35.2, 34.5, 69.0, 36.3], "aPosNet": [35.2, 34.2, 68.5, 34.7], "rPosNet": [34.1, 35.1, 69.5, 38.2]})),
    Table("gpa-4", "GPA Table 4: CPU decoding speed on En->De (ten runs)", GPA, "wmt14_en_de",
          {"PAPER": "gpa", "SIZE": "base", "SPEED_SETTING": "gpa-4"},
          [S("Transformer", "posmix_transformer"), S("Shaw et al. (2018)", "shaw"), S("aPosNet", "aposnet"),
           S("rPosNet", "rposnet")],
          _r(["tokens/s", "tokens/s +-"], {"Transformer": [16.8, 0.61], "Shaw et al. (2018)": [16.5, 0.60],
                                           "aPosNet": [17.0, 0.69], "rPosNet": [16.8, 0.61]}),
          stages="train average generate score speed", measures=("speed",),
          note="posmix-decode-speed --setting gpa-4: CPU, ten runs, beam 12; one sentence per batch and one thread are "
               "ours. The paper calls its +- a variance; ours prints the standard deviation and the variance."),
    Table("hc-3", "HC Table 3: decoding speed and memory on WMT16 En-Ro (base)", HC, "wmt16_en_ro",
          {"PAPER": "hc", "SIZE": "base", "SPEED_SETTING": "hc"}, HC_SPEED,
          _r(["BLEU", "sent/sec", "tokens/batch (K)"], {
              "BASE": [33.0, 26.8, 9.2], "HC-SA": [32.9, 28.4, 10.8], "SH-X": [30.3, 34.9, 11.7],
              "BASE/-SA": [27.0, 30.1, 11.8], "SH-X/-SA": [15.0, 37.6, 13.3]}),
          stages="train average generate score speed", measures=("speed", "train_memory"),
          note="sent/sec: posmix-decode-speed --setting hc (GPU, batch 256, five runs). The paper's tokens/batch is the "
               "largest batch that fits a 2080 Ti; ours is the peak GPU memory of training at the recipe's batch "
               "(fairseq's gb_free, sampled at each log line): lower memory, larger possible batch."),
    Table("hc-4", "HC Table 4: LingEval97 accuracy per error type (En->De)", HC, "wmt14_en_de",
          {"PAPER": "hc", "SIZE": "base"},
          [S("BASE", "posmix_transformer"), S("HC-SA", "hc_sa"), S("HC-ALL", "hc_all")],
          {"BASE": dict(zip(HC_LINGEVAL, [54.2, 87.5, 87.3, 94.0, 91.4, 91.6, 92.6, 94.8, 91.9, 89.1, 74.7, 88.1, 97.6])),
           "HC-SA": dict(zip(HC_LINGEVAL, [53.5, 85.8, 85.0, 91.4, 88.3, 90.8, 92.5, 96.7, 90.6, 87.5, 72.7, 89.5, 97.9])),
           "HC-ALL": dict(zip(HC_LINGEVAL, [53.5, 82.5, 80.3, 83.2, 79.9, 83.1, 89.8, 98.7, 84.3, 85.6, 70.2, 80.5, 93.4]))},
          stages="train average generate score contrastive", measures=("contrastive",),
          note="Accuracy = the reference scores a lower per-token cross entropy than its contrastive variant (HC "
               "footnote 17). The paper does not name the models it scores; these are its WMT14 En-De ones."),
    Table("hc-5", "HC Table 5: three implementations of HC-SA (IWSLT16 En-De)", HC, "iwslt16_en_de",
          {"PAPER": "hc", "SIZE": "small"},
          [S("Original", "hc_sa"),
           S("Conv (window=3)", "hc_sa", "--encoder-self-gaussian-impl conv --decoder-self-gaussian-impl conv"),
           S("Indexing", "hc_sa", "--encoder-self-gaussian-impl index --decoder-self-gaussian-impl index")],
          _r(["En-De BLEU", "En-Ro BLEU"], {"Original": [30.3, 32.4], "Conv (window=3)": [30.1, 32.3],
                                            "Indexing": [29.8, 31.4]}),
          note="En-Ro: the same grid with examples/wmt16_en_ro (the paper's En-Ro original, 32.4, is not Table 2's "
               "32.9; which En-Ro setting it used is not stated)."),
    Table("hc-6", "HC Appendix Table 6: head offsets of the lowest and highest layers (IWSLT16 En-De)", HC,
          "iwslt16_en_de", {"PAPER": "hc", "SIZE": "small"},
          [S(f"enc ({e[0]}, {e[1]}) / dec ({d[0]}, {d[1]})", "hc_sa",
             f"--encoder-self-gaussian-offsets={hc_offsets(e, 'lr')} --decoder-self-gaussian-offsets={hc_offsets(d, 'lc')}",
             tiny_flags=f"--encoder-self-gaussian-offsets={hc_offsets(e, 'lr', 2)} "
                        f"--decoder-self-gaussian-offsets={hc_offsets(d, 'lc', 2)}")
           for e, d in (("ll", "ll"), ("ll", "cc"), ("ll", "lc"), ("lr", "lc"))],
          {"enc (l, l) / dec (l, l)": {"BLEU": 27.4}, "enc (l, l) / dec (c, c)": {"BLEU": 27.8},
           "enc (l, l) / dec (l, c)": {"BLEU": 28.1}, "enc (l, r) / dec (l, c)": {"BLEU": 30.3}},
          note="Our reading of 'each cell shows settings we used in the lowest and highest layer': a cell gives the "
               "head offsets (l: i-1, c: i, r: i+1) of those two layers; the middle layers keep (l, r) in the "
               "encoder and (l, c) in the decoder. The last row is HC-SA. Tiny scale: 2 layers, both ends."),
    Table("hc-7", "HC Appendix Table 7: decoding speed and memory on IWSLT16 En-De (small)", HC, "iwslt16_en_de",
          {"PAPER": "hc", "SIZE": "small", "SPEED_SETTING": "hc"}, HC_SPEED,
          _r(["BLEU", "sent/sec", "tokens/batch (K)"], {
              "BASE": [30.0, 43.1, 14.1], "HC-SA": [30.3, 44.0, 15.1], "SH-X": [28.1, 50.1, 16],
              "BASE/-SA": [22.8, 46.1, 16.1], "SH-X/-SA": [14.9, 54.9, 17]}),
          stages="train average generate score speed", measures=("speed", "train_memory"),
          note="As hc-3; the paper measures on the IWSLT16 En-De development set, ours on the recipe's test set."),
    Table("posnet-2", "PosNet Table 2: Transformer big on WMT14 En-De / En-Fr (newstest2014)", POSNET, "wmt14_en_de",
          {"PAPER": "posnet", "SIZE": "big"},
          [S("SAPE", "posmix_transformer"), S("RPE", "shaw", SHAW_OWN), S("PosNet-Embed", "posnet_embed")],
          _r(["En-De BLEU", "En-De chrF++", "En-Fr BLEU", "En-Fr chrF++"], {
              "SAPE": [28.92, 54.86, 42.45, 63.59], "RPE": [28.77, 54.69, 42.25, 62.41],
              "PosNet-Embed": [29.23, 55.12, 42.66, 63.70]}),
          note="The table's 'PosNet' row is PosNet-Embed (Section 4.2: 'the PosNet-Embed achieves better performance' "
               "at big). En-Fr: the same grid with examples/wmt14_en_fr."),
    Table("posnet-3", "PosNet Table 3: GPU memory of Transformer base training (WMT14 En-De / En-Fr)", POSNET,
          "wmt14_en_de", {"PAPER": "posnet", "SIZE": "base"},
          [S("w/o PE", "nope"), S("SAPE", "posmix_transformer"), S("LAPE", "learnedpe"), S("RPE", "shaw", SHAW_OWN),
           S("Adaptive-T5", "at5bias"), S("PosNet", "posnet_embed")],
          _r(["En-De GB", "En-Fr GB"], {"w/o PE": [6.3, 9.4], "SAPE": [6.4, 9.4], "LAPE": [6.4, 9.4], "RPE": [6.8, 10.6],
                                        "Adaptive-T5": [6.4, 9.4], "PosNet": [6.8, 9.6]}),
          stages="train", measures=("train_memory",),
          note="Ours: the peak GPU memory of training at the recipe's batch (4096 tokens, FP16), from fairseq's "
               "gb_free sampled at each log line. The paper does not say how it measured; 'PosNet' is read as "
               "PosNet-Embed. En-Fr: examples/wmt14_en_fr."),
    Table("recpe-big", "RecPE results: Transformer(Big) and +MPRHead on WMT14 En-De", RECPE, "wmt14_en_de",
          {"PAPER": "recpe", "SIZE": "big"}, [S("Transformer(Big)", "posmix_transformer"), S("+MPRHead", "mprhead")],
          _r(["WMT14 En-De BLEU", "#Param (M)"], {"Transformer(Big)": [28.22, 272.6], "+MPRHead": [29.11, 289.1]})),
    Table("recpe-ablation", "RecPE ablation: positions removed from the encoder or decoder (newstest2014)", RECPE,
          "wmt14_en_de", {"PAPER": "recpe", "SIZE": "base"}, RECPE_ABLATION,
          _r(["newstest2014 BLEU", "#Speed (K tokens/s)"], {
              "Transformer (Base)": [27.25, 11.7], "-PE of Dec": [26.73, 11.7], "-PE of Enc": [10.71, 11.7],
              "RPEHead (base)": [28.11, 10.5], "RPEHead -RPE&PE of Dec": [27.54, 11.2],
              "RPEHead -RPE&PE of Enc": [11.16, 10.7], "MPRHead (base)": [28.35, 9.9],
              "MPRHead -RPE&PE of Dec": [27.74, 11.2], "MPRHead -RPE/PE of Enc": [10.89, 10.7],
              "MPRHead -RPE&PE of Enc&Dec": [10.43, 11.7]}),
          measures=("train_speed",),
          note="#Speed is training speed; ours is fairseq's words per second of training (wps), from the log. "
               "'-RPE&PE' removes the side's position encoding (RPEHead's and MPRHead's are the recurrent ones)."),
]})

# The papers in the order of docs/papers.md, and each table's own number in its paper (RecPE's poster
# numbers none of its tables: they are named by their heading).
PAPERS = [GPA, HC, PEA, RECPE, POSNET]
PAPER_NUMBERS = {
    "gpa-2": "Table 2", "gpa-3-big": "Table 3 (left)", "gpa-3-small": "Table 3 (right)", "gpa-4": "Table 4",
    "gpa-5": "Table 5", "gpa-6": "Table 6", "gpa-7": "Table 7",
    "hc-1": "Table 2", "hc-3": "Table 3", "hc-4": "Table 4", "hc-5": "Table 5", "hc-6": "Appendix Table 6",
    "hc-7": "Appendix Table 7", "hc-fig7": "Fig. 7",
    "pea-1": "Table 1", "pea-2": "Table 2", "pea-3": "Table 3", "pea-4": "Table 4",
    "recpe": "main results (unnumbered)", "recpe-big": "main results (unnumbered)",
    "recpe-ablation": "ablation (unnumbered)",
    "posnet-1": "Table 1", "posnet-2": "Table 2", "posnet-3": "Table 3",
}
_UNNUMBERED_ORDER = ["main results", "ablation"]  # RecPE's poster: its sections' order
#: earlier --table names, still accepted (the papers' short names are PEA and RecPE: docs/papers.md)
TABLE_ALIASES = {**{f"ape-{n}": f"pea-{n}" for n in range(1, 5)},
                 "rpe": "recpe", "rpe-big": "recpe-big", "rpe-ablation": "recpe-ablation"}


def paper_short_name(table: Table) -> str:
    """The paper's short name (GPA, HC, PEA, RecPE, PosNet)."""
    return table.paper.split(":", 1)[0]


def paper_order(table: Table) -> Tuple:
    """Sort key: the paper (docs/papers.md's order), then its tables by number, figures after tables,
    (left) before (right)."""
    number = PAPER_NUMBERS[table.name]
    if "unnumbered" in number:
        kind, n = 2, _UNNUMBERED_ORDER.index(number.split(" (", 1)[0])
    else:
        kind = 1 if number.startswith("Fig.") else 0
        n = int(number.split("(", 1)[0].split()[-1])
    return PAPERS.index(table.paper), kind, n, "(right)" in number


if set(PAPER_NUMBERS) != set(TABLES):
    raise RuntimeError(f"PAPER_NUMBERS and TABLES differ: {sorted(set(PAPER_NUMBERS) ^ set(TABLES))}")
TABLES = dict(sorted(TABLES.items(), key=lambda item: paper_order(item[1])))
