"""The catalogue: one record per headline claim of the five papers, the paper's own figure for exactly the
comparison the row makes, and what our study compares.

Each row quotes the paper's figures with their setting (data, split, size, table) and ``source``: the lines of
the paper that hold them, as (a label that names the line, the figures on that same line). The tests read the
papers' text and check that each quoted figure is on the line of the system it is quoted for, not only
somewhere in the paper. Where the paper's wording is stronger or weaker than its numbers, the row says so.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ...paper_tables import GPA, HC, PEA, POSNET, RECPE

#: what a claim expects of system against baseline (Δ = system - baseline)
EXPECTATIONS = {
    "no_worse": "no worse than the baseline by more than the margin",
    "same": "equal within ±margin (equivalence)",
    "better": "system better",
    "worse": "system worse",
}

#: scoring set -> (the decoded test set, lines whose source length is above low x cap and at most high x cap)
SCORING_SETS = {
    "test": ("test", None, None),
    "seen": ("seen", None, None),
    "test_short": ("test", None, 0.5),       # test sources up to half the cap
    "test_long": ("test", 0.5, None),        # the rest of the test split
    "long": ("long", None, None),
    "concat": ("concat", 1.0, None),          # PEA's concatenated pairs, only those past the cap
    "long_heldout": ("long_heldout", None, None),
    "long_heldout_near": ("long_heldout", 1.0, 4 / 3),  # up to a third past the cap (PEA's G76:100 after 75)
    "long_heldout_far": ("long_heldout", 4 / 3, None),  # beyond (PEA's G101:)
}
LENGTH_SETS = ("long", "concat", "long_heldout", "long_heldout_near", "long_heldout_far")


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str                      # short name: GPA, HC, PEA, RecPE, PosNet
    text: str                       # the claim, in the paper's terms
    paper_figure: str               # the paper's numbers for this comparison, with their setting
    source: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # (label of a line of the paper, figures on that line)
    system: Optional[str] = None    # None: not a BLEU comparison (see kind)
    baseline: Optional[str] = None
    test: str = "test"              # a scoring set
    test2: Optional[str] = None     # kind == gap: the set the gap is compared against
    expect: str = "no_worse"
    margin: Optional[float] = None  # BLEU, for no_worse / same: fixed here, before the data, never from results
    margin_source: str = ""         # why that margin: the paper's own gap, or the stated "as good as" margin
    paper_relative_change: Optional[float] = None  # % change the paper reports (its claim's size)
    kind: str = "bleu"              # bleu | gap | frozen | params | not_measured
    why_not: str = ""               # kind == not_measured: what it would need
    beyond_papers: bool = False
    derived: bool = False           # a comparison the papers do not state in words (read off their tables)

    @property
    def length_row(self) -> bool:
        return self.test in LENGTH_SETS

    @property
    def scoring_sets(self) -> List[str]:
        """The sets a BLEU row reads: its set, and for a gap row the set the gap is compared against."""
        return [self.test] + ([self.test2] if self.kind == "gap" and self.test2 else [])

    @property
    def hypothesis(self) -> tuple:
        """The null hypothesis a BLEU row tests: rows with the same comparison (the same systems on the same sets,
        claimed in either direction) test one, which Holm's correction counts once."""
        return (self.kind, self.system, self.baseline, *self.scoring_sets)

    def systems(self) -> List[str]:
        if self.kind in ("frozen", "params"):
            return ["rposnet"]
        return [s for s in (self.system, self.baseline) if s] if self.kind in ("bleu", "gap") else []


GPA_BASE = ("rPosNet\t63.9M", ("26.6",)), ("Transformer\t66.5M", ("26.3",))
GPA_SMALL = ("rPosNet\t210M", ("35.1",)), ("Transformer\t221M", ("35.0",))
HC_T2 = ("IWSLT16 En-De\t30.0", ("30.0", "30.3", "21.1", "28.2")),
NOT_IN_TEXT = "its cells are not in our copy of the paper"
#: PEA on references taken from training text (Section 4.2), said in the rows scored on them
BIASED = ("ours are scored on training pairs the cap left out, where PEA warns that long pairs taken from training "
          "data may be \"a very biased selection\"")
P01 = ("\\rho < 0.01", ("0.01",))  # RecPE: the dagger, "statistically better than Transformer(Base/Big)"
#: the margin of an "as good as" claim whose paper states no bound, fixed before the data (docs/choices.md)
AS_GOOD_AS = 1.0
AS_GOOD_AS_SOURCE = "stated before the data for \"as good as\" (the paper gives no bound): 1.0 BLEU, 1.0 chrF++"
#: GPA Table 8's count per self-attention layer (K̂D + 4D² trained, HK̂N + 3D² at search, K̂ = 2K + 1) at the
#: paper's sizes: D and H of the Base and Big models, K = 16 at Base and 8 at Big (GPA Section 5)
GPA_TABLE8_SIZES = {"Base": (512, 8, 16), "Big": (1024, 16, 8)}

CLAIMS: List[Claim] = [
    Claim("gpa-1", "GPA", "rPosNet translates as well as the Transformer",
          "26.6 vs 26.3 BLEU (WMT14 En-De, Base, Table 2); 35.1 vs 35.0 (IWSLT14 De-En, Small, Table 3); one run "
          "each, no test", GPA_BASE + GPA_SMALL, "rposnet", "transformer", expect="no_worse", margin=AS_GOOD_AS,
          margin_source=AS_GOOD_AS_SOURCE),
    Claim("gpa-2", "GPA", "the GeLU gate (Eq. 4) is crucial for rPosNet",
          "26.6 gated vs 25.3 without gating (WMT14 En-De, Base, Table 6; COMET 48.6 vs 45.1)",
          (("rPosNet\t×\t60.8M", ("25.3", "45.1")), ("\t1\t63.9M", ("26.6", "48.6"))), "rposnet", "rposnet_nogate",
          expect="better"),
    Claim("gpa-3", "GPA", "aPosNet cannot match rPosNet (relative positions matter in the energies)",
          "25.9 vs 26.6 (WMT14 En-De, Base, Table 2); 34.2 vs 35.1 (IWSLT14 De-En, Small, Table 3)",
          (("aPosNet\t65.0M", ("25.9",)), ("rPosNet\t63.9M", ("26.6",)), ("aPosNet\t212M", ("34.2",)),
           ("rPosNet\t210M", ("35.1",))), "rposnet", "aposnet", expect="better"),
    Claim("gpa-4", "GPA", "rPosNet's energies can be stored as tables after training (Sections 4.1-4.2): the "
          "search-time model translates as the trained one does",
          "no figure: the paper states it without a comparison of translations (Table 4's 16.8 vs 16.8 tokens/s is "
          "rPosNet against the Transformer)",
          (("Transformer Shaw et al. (2018)", ("16.8",)), ("aPosNet rPosNet", ("16.8",))), kind="frozen"),
    Claim("gpa-5", "GPA", "precomputing rPosNet's energies saves over 20% of the self-attention parameters "
          "(Section 4.2, Table 8: K̂D + 4D² per layer while training, HK̂N + 3D² at search, K̂ = 2K + 1)",
          "23% at Base, 24% at Big (N not stated; N = 128 reproduces both)",
          (("pre-computation saves", ("23%", "24%")),), kind="params"),
    Claim("gpa-6", "GPA", "rPosNet is better than hard-coded Gaussian self-attention",
          "26.6 vs 25.3 (GaussianNet, GPA's reimplementation of HC's self-attention; WMT14 En-De, Base, Table 2); "
          "35.1 vs 34.3 (IWSLT14 De-En, Small, Table 3)",
          (("rPosNet\t63.9M", ("26.6",)), ("GaussianNet\t60.2M", ("25.3",)), ("GaussianNet\t196M", ("34.3",)),
           ("rPosNet\t210M", ("35.1",))), "rposnet", "hc_sa", expect="better"),
    Claim("gpa-7", "GPA", "rPosNet is on par with Shaw et al.'s relative attention",
          "26.6 vs 26.3 (WMT14 En-De, Base), 33.8 vs 34.0 (En-Zh, Base; Table 2), 35.1 vs 35.4 (IWSLT14 De-En, "
          "Small, Table 3): \"on par\"; GPA's Shaw has no a^V term, ours (PEA's) has",
          (("rPosNet\t63.9M", ("26.6", "33.8")), ("Shaw et al. (2018)\t66.7M", ("26.3", "34.0")),
           ("Shaw et al. (2018)\t221M", ("35.4",)), ("rPosNet\t210M", ("35.1",))), "rposnet", "shaw", expect="same",
          margin=AS_GOOD_AS, margin_source=AS_GOOD_AS_SOURCE),
    Claim("gpa-8", "GPA", "aPosNet underperforms the Transformer",
          "25.9 vs 26.3 (WMT14 En-De, Base, Table 2); 34.2 vs 35.0 (IWSLT14 De-En, Small, Table 3)",
          (("aPosNet\t65.0M", ("25.9",)), ("Transformer\t66.5M", ("26.3",)), ("aPosNet\t212M", ("34.2",)),
           ("Transformer\t221M", ("35.0",))), "aposnet", "transformer", expect="worse"),
    Claim("hc-1", "HC", "hard-coded Gaussian self-attention (HC-SA) achieves almost identical BLEU to learned "
          "self-attention", "30.3 vs 30.0 (IWSLT16 En-De dev set, Table 2; HC-SA's layout chosen on that set); "
          "HC-SA − BASE from +0.4 to −1.2 on the eight pairs", HC_T2 + (("IWSLT16 De-En\t34.4", ("34.4", "34.8")),
                                                              ("WMT14 En-Fr\t40.3", ("40.3", "39.1"))),
          "hc_sa", "transformer", expect="same", margin=1.2,
          margin_source="the paper's own: HC-SA's largest gap to BASE that HC Table 2 still calls almost identical "
                        "(WMT14 En-Fr)"),
    Claim("hc-2", "HC", "hard-coding cross-attention too (HC-ALL) costs far more than hard-coding self-attention",
          "21.1 vs 30.3 (HC-SA) and 30.0 (BASE) (IWSLT16 En-De dev set, Table 2)", HC_T2, "hc_all", "hc_sa",
          expect="worse"),
    Claim("hc-3", "HC", "a single learned cross-attention head (SH-X) performs 1-3 BLEU worse than BASE",
          "28.2 vs 30.0 (IWSLT16 En-De dev set, Table 2; 28.1 in the paper's prose and Table 7); 1.1-3.3 lower on "
          "the other pairs", HC_T2 + (("SH-X\t28.1", ("28.1",)), ("IWSLT16 De-En\t34.4", ("34.4", "33.3")),
                                      ("WMT14 En-De\t26.8", ("26.8", "23.5"))), "sh_x", "transformer", expect="worse"),
    Claim("hc-4", "HC", "hard-coded self-attention decodes slightly faster and fits larger batches",
          "28.4 vs 26.8 sentences/s (+6%), 10.8K vs 9.2K tokens/batch (+17%) (WMT16 En-Ro, GPU, Table 3); the "
          "paper calls the gains \"admittedly limited\"",
          (("HC-SA\t32.9", ("28.4", "10.8")), ("BASE\t33.0", ("26.8", "9.2")),
           ("more tokens into a single batch", ("17%", "6%"))), kind="not_measured",
          why_not="a GPU (posmix-reproduce --table hc-3 --scale paper)"),
    Claim("hc-5", "HC", "with hard-coded cross-attention (HC-ALL) the BLEU gap to BASE grows with sentence length",
          "Figure 4 (WMT14 En-De test, bins of reference length): \"the BLEU gap worsens as reference length "
          "increases\"; no numbers in the text; ours splits `test` by source length at half the cap, not by "
          "reference length", (), "hc_all", "transformer", test="test_long", test2="test_short",
          expect="worse", kind="gap"),
    Claim("pea-1", "PEA", "absolute and relative encodings are equally strong on lengths seen in training",
          "40.4 vs 40.4 BLEU (De-En newstest2018, Table 1); equal up to G76:100 for models trained on ≤ 100 "
          f"tokens (Table 2 prose; {NOT_IN_TEXT})", (("Positional Encoding De", ("40.4",)),), "shaw", "transformer",
          test="seen", expect="same", margin=AS_GOOD_AS, margin_source=AS_GOOD_AS_SOURCE),
    Claim("pea-2", "PEA", "relative encoding is better on sources longer than any seen in training",
          "relative leads absolute by \"around 8% BLEU\" (points) on G101: (40 sentences), both trained on ≤ 100 "
          f"tokens (Table 2 prose; {NOT_IN_TEXT})", (("very strong lead of around", ("8%",)),), "shaw", "transformer",
          test="long", expect="better"),
    Claim("pea-3", "PEA", "relative encoding is better on the concatenated test set's sentences past the training "
          "lengths", "relative beats absolute \"by 4% BLEU\" (points) on G101: of concat seq (731 pairs); equal up to "
          f"G76:100 (Table 3 prose; {NOT_IN_TEXT})", (("beating the absolute positional encoding baseline by", ("4%",)),),
          "shaw", "transformer", test="concat", expect="better"),
    Claim("pea-4", "PEA", "relative K-only (no a^V) loses nothing",
          "\"yields equal performance and length generalization\" (Section 5, Table 4, concat seq; "
          f"{NOT_IN_TEXT}; the conclusion names a^K as the term dropped)", (), "shaw_konly", "shaw", test="concat",
          expect="same", margin=AS_GOOD_AS, margin_source=AS_GOOD_AS_SOURCE),
    Claim("pea-5", "PEA", "fixed sinusoidal relative embeddings lose nothing",
          "\"very similar to the pure relative positional baseline\", \"slightly weaker for short sentences\", which "
          f"PEA reads as \"most likely noise\" (Table 4; {NOT_IN_TEXT})", (), "shaw_sin", "shaw", test="concat",
          expect="same", margin=AS_GOOD_AS, margin_source=AS_GOOD_AS_SOURCE),
    Claim("pea-6", "PEA", "trained short, relative encoding keeps its quality up to a third past the training "
          "lengths, where absolute loses",
          "relative against absolute, both trained on ≤ 75 tokens, past the training lengths: \"4.4% to 11.9% BLEU\" "
          f"(points; abstract and conclusion; Table 2's cells are not in our copy of the paper); {BIASED}",
          (("4.4% to 11.9% BLEU", ("4.4%", "11.9%")),), "shaw", "transformer", test="long_heldout_near", expect="better"),
    Claim("pea-7", "PEA", "trained short, relative encoding is far better well past the training lengths",
          "relative against absolute, both trained on ≤ 75 tokens, past the training lengths: \"4.4% to 11.9% BLEU\" "
          "(points; abstract and conclusion); on G101: absolute on ≤ 75 loses 6.2 against absolute on ≤ 100 (Table 2 "
          f"lines 4 and 1, prose; {NOT_IN_TEXT}); {BIASED}",
          (("4.4% to 11.9% BLEU", ("4.4%", "11.9%")), ("grows to 6.2% BLEU", ("6.2%",))),
          "shaw", "transformer", test="long_heldout_far", expect="better"),
    Claim("pea-8", "PEA", "the length cap is what costs absolute encoding on long sources (its control: the same "
          "model trained without the cap)",
          "absolute on ≤ 75 tokens loses 3.4 BLEU on G76:100 and 6.2 on G101: against absolute on ≤ 100, equal "
          f"up to 75 (Table 2 lines 4 and 1, prose; {NOT_IN_TEXT})",
          (("loses 3.4% BLEU", ("3.4%",)), ("grows to 6.2% BLEU", ("6.2%",))),
          "transformer_uncapped", "transformer", test="long", expect="better"),
    Claim("recpe-1", "RecPE", "MPRHead improves over the Transformer",
          "28.35 vs 27.25 BLEU (WMT14 En-De newstest2014, Base; significant, p < 0.01)",
          (("+MPRHead\t47.69", ("28.35",)), ("Transformer(Base)", ("27.25",)), P01), "mprhead", "transformer",
          expect="better"),
    Claim("recpe-2", "RecPE", "RPEHead improves over the Transformer",
          "28.11 vs 27.25 BLEU (WMT14 En-De newstest2014, Base; significant, p < 0.01)",
          (("+RPEHead", ("28.11",)), ("Transformer(Base)", ("27.25",)), P01), "rpehead", "transformer", expect="better"),
    Claim("recpe-3", "RecPE", "MPRHead is at least as good as RPEHead",
          "28.35 vs 28.11 BLEU (WMT14 En-De newstest2014, Base): the table's reading, not tested or claimed in words",
          (("+MPRHead\t47.69", ("28.35",)), ("+RPEHead", ("28.11",))), "mprhead", "rpehead", expect="no_worse",
          margin=AS_GOOD_AS, margin_source=AS_GOOD_AS_SOURCE, derived=True),
    Claim("recpe-4", "RecPE", "MPRHead helps the Big Transformer too",
          "29.11 vs 28.22 BLEU (WMT14 En-De newstest2014, Big; significant, p < 0.01)",
          (("+MPRHead\t48.73", ("29.11",)), ("Transformer(Big)", ("28.22",)), P01), kind="not_measured",
          why_not="a GPU and WMT14 (posmix-reproduce --table recpe-big --scale paper)"),
    Claim("recpe-5", "RecPE", "relative position embeddings (Shaw et al.) improve over the Transformer",
          "27.60 vs 27.25 BLEU (WMT14 En-De newstest2014, Base; significant, p < 0.01); PosNet's own runs show the "
          "opposite (row posnet-6)", (("+Relative PEs", ("27.60",)), ("Transformer(Base)", ("27.25",)), P01),
          "shaw", "transformer", expect="better"),
    Claim("recpe-6", "RecPE", "without the encoder's position encoding translation falls apart",
          "10.71 vs 27.25 BLEU (−61%; WMT14 En-De newstest2014, Base, ablation); without the decoder's: 26.73",
          (("-PE of Enc", ("10.71",)), ("-PE of Dec", ("26.73",)), ("Transformer (Base)\t27.25", ("27.25",))),
          "nope_encoder", "transformer", expect="worse", paper_relative_change=-60.7),
    Claim("posnet-1", "PosNet", "PosNet-Embed is better than sinusoidal absolute positions (SAPE)",
          "27.68 vs 27.48 BLEU (WMT14 En-De, Base, Table 1; not marked significant; En-Fr 40.81 vs 40.46 is, "
          "p < 0.05)", (("\tPosNet-Embed\t27.68", ("27.68", "40.81")), ("\tSAPE\t27.48", ("27.48", "40.46")),
           ("significance level p < 0.05", ("0.05",))),
          "posnet_embed", "transformer", expect="better"),
    Claim("posnet-2", "PosNet", "without any position encoding \"the performance decreases drastically\"",
          "13.49 vs 27.48 BLEU (−51%; WMT14 En-De, Base, Table 1)",
          (("w/o PE\t13.49", ("13.49",)), ("\tSAPE\t27.48", ("27.48",))), "nope", "transformer", expect="worse",
          paper_relative_change=-50.9),
    Claim("posnet-3", "PosNet", "PosNet-Attn is worse than SAPE",
          "23.12 vs 27.48 BLEU (WMT14 En-De, Base, Table 1)",
          (("\tPosNet-Attn\t23.12", ("23.12",)), ("\tSAPE\t27.48", ("27.48",))), "posnet_attn", "transformer",
          expect="worse"),
    Claim("posnet-4", "PosNet", "PosNet-Embed keeps its lead at Big size",
          "29.23 vs 28.92 BLEU (WMT14 En-De, Big, Table 2)", (("PosNet\t29.23", ("29.23",)), ("SAPE\t28.92", ("28.92",))),
          kind="not_measured", why_not="a GPU and WMT14 (posmix-reproduce --table posnet-2 --scale paper)"),
    Claim("posnet-5", "PosNet", "learned absolute positions (LAPE) are worse than sinusoidal ones (SAPE)",
          "24.34 vs 27.48 BLEU (WMT14 En-De), 39.75 vs 40.46 (En-Fr) (Base, Table 1; no claim in words)",
          (("\tLAPE\t24.34", ("24.34", "39.75")), ("\tSAPE\t27.48", ("27.48", "40.46"))), "learned_pe", "transformer",
          expect="worse", derived=True),
    Claim("posnet-6", "PosNet", "relative position embeddings (RPE, Shaw et al.) are below SAPE",
          "27.07 vs 27.48 BLEU (WMT14 En-De, Base, Table 1, the paper's own runs; 40.61 vs 40.46 on En-Fr); not "
          "tested; RecPE reports the opposite (row recpe-5)",
          (("\tRPE\t27.07", ("27.07", "40.61")), ("\tSAPE\t27.48", ("27.48", "40.46"))), "shaw", "transformer",
          expect="worse", derived=True),
]
CLAIM_BY_KEY = {c.key: c for c in CLAIMS}
PAPER_CITATIONS = {"GPA": GPA, "HC": HC, "PEA": PEA, "RecPE": RECPE, "PosNet": POSNET}
