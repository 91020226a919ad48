"""The study's systems and settings: what every system trains with, and the test sets it is decoded on.

Every system trains the same way (sizes, optimisation, batch, stopping rule, checkpoint averaging) and
differs only in its architecture flags; a system is trained with several seeds (``--seed`` is the only
flag that differs between two runs of one system). One system, the uncapped Transformer, trains on every
training pair instead of the length-capped split: PEA's own control (Table 2 trains its absolute model
with and without the length cap).
"""
import shlex
from dataclasses import dataclass
from typing import Dict, List

#: 3+3 layers, D = 128: the size of docs/benchmarks.md's early-training tables
MINI = ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 "
        "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
        "--decoder-attention-heads 4 --dropout 0.1")
#: the size that fits the grid on a 2-core CPU: 3+3 layers, D = 64
SMALL = ("--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 64 --decoder-embed-dim 64 "
         "--encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 "
         "--decoder-attention-heads 4 --dropout 0.1")
#: a size only for checking that the study runs end to end (the tests): 1+1 layers, D = 32
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
        "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --dropout 0.1")
SIZES = {"mini": MINI, "small": SMALL, "tiny": TINY}
SIZE_DIM = {"mini": 128, "small": 64, "tiny": 32}
#: one update of 4,096 tokens on one thread of the 2-core x86-64 CPU (measured)
SECONDS_PER_UPDATE = {"cpu": {"mini": 1.8, "small": 0.6, "tiny": 0.05}}
#: one run's training step on one H200 shared by N runs at once, at the small size (measured 2026-11-30: fairseq's
#: updates/s over 300 updates of the Transformer alone, and of Transformer, rPosNet, Shaw and aPosNet runs 4, 8
#: and 16 at once on a 16-core host; docs/gpu.md). Together the runs make 17.6, 52.6, 82.5 and 96.5 updates/s.
GPU_STEP_SECONDS = {1: 0.057, 4: 0.076, 8: 0.097, 16: 0.166}


def gpu_seconds_per_update(jobs: int) -> float:
    """One run's seconds per update with ``jobs`` runs sharing the GPU: linear between the measured counts, and
    past the largest one the measured throughput shared by more runs (it grew only 17% from 8 to 16)."""
    counts = sorted(GPU_STEP_SECONDS)
    if jobs >= counts[-1]:
        return GPU_STEP_SECONDS[counts[-1]] * jobs / counts[-1]
    for low, high in zip(counts, counts[1:]):
        if low <= jobs <= high:
            return GPU_STEP_SECONDS[low] + (GPU_STEP_SECONDS[high] - GPU_STEP_SECONDS[low]) * (jobs - low) / (high - low)
    raise ValueError(f"jobs must be >= 1, got {jobs}")
SIZE_TEXT = {"mini": "3+3 layers, D = 128, FFN 256, 4 heads, dropout 0.1 (`--size mini`)",
             "small": "3+3 layers, D = 64, FFN 256, 4 heads, dropout 0.1 (`--size small`)",
             "tiny": "1+1 layers, D = 32 (`--size tiny`: a check that the steps run, not a measurement)"}
#: every flag of the optimisation but the seed, which each run adds (``--seed N``)
OPTIMISATION = ("--optimizer adam --adam-betas (0.9,0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 300 "
                "--clip-norm 1.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 "
                "--share-all-embeddings --num-workers 0 --no-progress-bar --no-epoch-checkpoints "
                "--best-checkpoint-metric loss")
#: d_p = D / 8: PosNet-Embed's kernels (P d_p^2 + 2 D d_p per side, P = 256) about the share of the model PosNet's
#: Table 1 adds (+3.41M on 63.08M, 5.4%): 5.8% of the Transformer at D = 64 (docs/choices.md, the claims study)
POSNET_AT_THE_PAPERS_SHARE = "--encoder-posnet-embed-dim {D/8} --decoder-posnet-embed-dim {D/8}"
SHAW_PEA = ("--encoder-self-relative-embedding-heads shared --decoder-self-relative-embedding-heads shared "
            "--encoder-self-shaw-value-term on --decoder-self-shaw-value-term on")  # PEA: trainable a^K and a^V

#: the test sets every run is decoded on; ``long_heldout`` is scored for the systems trained on the capped split
TEST_SETS = ("test", "seen", "long", "concat", "long_heldout")
TEST_SET_TEXT = {"test": "the whole test split", "seen": "test pairs whose source fits the training cap",
                 "long": "test pairs whose source is longer than any training source",
                 "concat": "consecutive test pairs joined (PEA's concatenated test set)",
                 "long_heldout": "the training pairs the cap left out whose source is longer than the cap "
                                 "(no capped system trains on them)"}


@dataclass(frozen=True)
class StudySystem:
    key: str
    label: str
    arch: str
    flags: str = ""
    freeze: bool = False   # also decode its search-time model (posmix-freeze)
    seeds: int = 3         # the seeds the study trains by default
    group: int = 2         # the order of training: 0 the Transformer, 1 the GPA and PEA rows' systems, 2 the rest
    uncapped: bool = False  # trains on every training pair (PEA's control), not the length-capped split

    def own_flags(self, dim: int) -> List[str]:
        """The system's own flags at embedding dim ``dim`` (``{D/8}`` in them: dim // 8)."""
        return shlex.split(self.flags.replace("{D/8}", str(max(1, dim // 8))))

    def train_flags(self, size: str) -> List[str]:
        return ["--arch", self.arch, *SIZES[size].split(), *self.own_flags(SIZE_DIM[size])]


SYSTEMS: Dict[str, StudySystem] = {s.key: s for s in [
    StudySystem("transformer", "Transformer (sinusoidal, absolute)", "posmix_transformer_iwslt_de_en", seeds=5,
                group=0),
    StudySystem("rposnet", "rPosNet", "rposnet_iwslt_de_en", freeze=True, group=1),
    StudySystem("shaw", "Shaw relative (PEA's: a^K and a^V)", "shaw_iwslt_de_en", SHAW_PEA, group=1),
    StudySystem("aposnet", "aPosNet", "aposnet_iwslt_de_en", group=1),
    StudySystem("rposnet_nogate", "rPosNet without gating", "rposnet_iwslt_de_en",
                "--encoder-self-gating off --decoder-self-gating off", group=1),
    StudySystem("hc_sa", "HC-SA", "hc_sa_iwslt_de_en", group=1),
    StudySystem("transformer_uncapped", "Transformer trained without the length cap", "posmix_transformer_iwslt_de_en",
                uncapped=True, group=1),
    StudySystem("shaw_konly", "Shaw relative, K only", "shaw_konly_iwslt_de_en", group=1),
    StudySystem("shaw_sin", "Shaw relative, sinusoidal", "shaw_sin_iwslt_de_en", group=1),
    StudySystem("hc_all", "HC-ALL", "hc_all_iwslt_de_en"),
    StudySystem("nope", "no position encoding", "nope_iwslt_de_en"),
    StudySystem("mprhead", "MPRHead", "mprhead_iwslt_de_en"),
    StudySystem("learned_pe", "Transformer, learned absolute positions", "learnedpe_iwslt_de_en"),
    StudySystem("nope_encoder", "no position encoding in the encoder", "posmix_transformer_iwslt_de_en",
                "--encoder-position-encoding none --position-blind encoder"),
    StudySystem("sh_x", "SH-X", "sh_x_iwslt_de_en"),
    StudySystem("rpehead", "RPEHead", "rpehead_iwslt_de_en"),
    StudySystem("posnet_embed", "PosNet-Embed", "posnet_embed_iwslt_de_en", POSNET_AT_THE_PAPERS_SHARE),
    StudySystem("posnet_attn", "PosNet-Attn", "posnet_attn_iwslt_de_en"),
]}


def study_order(keys: List[str], seeds: Dict[str, List[int]]) -> List[tuple]:
    """(system, seed) in the order a study trains them: the Transformer's seeds, then the GPA and PEA rows'
    systems, then the rest; each system's seeds together, so that its rows fill one system at a time."""
    order = sorted(keys, key=lambda k: (SYSTEMS[k].group, list(SYSTEMS).index(k)))
    return [(k, s) for k in order for s in seeds[k]]
