"""The catalogue: one record per headline claim of the five papers, the paper's own figure for the
comparison the row makes, and the systems a BLEU row compares."""
from dataclasses import dataclass
from typing import List, Optional

from ..paper_tables import GPA, HC, PEA, POSNET, RECPE

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


