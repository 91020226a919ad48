"""The metrics, each through its own package.

- BLEU, chrF, chrF++ (chrF with word n-grams of order 2, Popovic 2017; PosNet paper Table 1) and TER:
  ``sacrebleu`` 2.x, with its signatures. BLEU's tokenizer is selectable (``13a`` default, ``intl``
  as in the HC paper footnote 13, ``zh`` for Chinese as in the GPA paper footnote 3).
- COMET: ``unbabel-comet`` (``comet.load_from_checkpoint`` + ``predict``); the GPA paper uses
  wmt20-comet-da (Section 5.1).
- BLEURT: ``bleurt-pytorch`` (``BleurtForSequenceClassification``); the GPA paper uses BLEURT-20.

Learned metrics are loaded from local paths only: these machines cannot download weights. A missing
or unloadable model raises ``MetricUnavailable`` with a message saying how to provide it; callers
report the metric as skipped and keep the others.
"""
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

SACREBLEU_METRICS = ("bleu", "chrf", "chrf++", "ter")
LEARNED_METRICS = ("comet", "bleurt")
ALL_METRICS = SACREBLEU_METRICS + LEARNED_METRICS
BLEU_TOKENIZERS = ("13a", "intl", "zh", "none", "char", "ja-mecab", "ko-mecab", "flores101", "flores200")

COMET_HELP = ("pass --comet-model PATH: a COMET model directory (with checkpoints/model.ckpt and hparams.yaml) "
              "or its .ckpt file, downloaded on a machine with internet, e.g. `comet-score --model "
              "Unbabel/wmt20-comet-da` once, then the snapshot under ~/.cache/huggingface; its encoder "
              "(xlm-roberta-large) must be in the local Hugging Face cache too")
BLEURT_HELP = ("pass --bleurt-checkpoint PATH: a bleurt-pytorch model directory (config.json, weights, vocab/"
               "sentencepiece files), e.g. lucadiliello/BLEURT-20 downloaded on a machine with internet")


class MetricUnavailable(Exception):
    """A metric that cannot be computed here (model not given / not loadable); the message says why."""


@dataclass
class MetricResult:
    name: str            # e.g. "BLEU"
    score: float
    signature: str = ""
    segment_scores: Optional[List[float]] = None  # learned metrics (for bootstrap)
    extra: Dict[str, float] = field(default_factory=dict)


def sacrebleu_metric(name: str, tokenize: str = "13a", lowercase: bool = False):
    """A sacrebleu Metric object for 'bleu', 'chrf', 'chrf++' or 'ter'."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    if name == "bleu":
        if tokenize not in BLEU_TOKENIZERS:
            raise ValueError(f"--tokenize {tokenize!r}: valid values are {', '.join(BLEU_TOKENIZERS)}")
        return BLEU(tokenize=tokenize, lowercase=lowercase)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    if name == "chrf++":
        return CHRF(word_order=2, lowercase=lowercase)
    if name == "ter":
        return TER(case_sensitive=not lowercase)
    raise ValueError(f"unknown sacrebleu metric {name!r}; valid: {', '.join(SACREBLEU_METRICS)}")


def corpus_score(name: str, hyps: List[str], refs: List[str], tokenize="13a", lowercase=False) -> MetricResult:
    m = sacrebleu_metric(name, tokenize, lowercase)
    s = m.corpus_score(hyps, [refs])
    return MetricResult(name=s.name, score=s.score, signature=str(m.get_signature()))


def resolve_comet_checkpoint(path: str) -> str:
    if os.path.isfile(path):
        return path
    for cand in (os.path.join(path, "checkpoints", "model.ckpt"), os.path.join(path, "model.ckpt")):
        if os.path.isfile(cand):
            return cand
    raise MetricUnavailable(f"--comet-model {path}: no checkpoints/model.ckpt there; {COMET_HELP}")


class CometScorer:
    def __init__(self, path: Optional[str], batch_size: int = 16):
        if not path:
            raise MetricUnavailable(f"no model given; {COMET_HELP}")
        ckpt = resolve_comet_checkpoint(path)
        try:
            from comet import load_from_checkpoint
        except ImportError as e:
            raise MetricUnavailable(f"unbabel-comet is not installed (pip install unbabel-comet==2.2.7): {e}")
        try:
            self.model = load_from_checkpoint(ckpt, local_files_only=True)
        except Exception as e:  # noqa: BLE001  (any loading failure must not lose the other metrics)
            raise MetricUnavailable(f"loading {ckpt} failed ({type(e).__name__}: {e}); {COMET_HELP}")
        self.model.eval()
        self.path = ckpt
        self.batch_size = batch_size

    def __call__(self, hyps: List[str], refs: List[str], srcs: Optional[List[str]]) -> MetricResult:
        if not srcs:
            raise MetricUnavailable("it needs the source sentences; pass --src or a "
                                    "fairseq-generate output with S- lines")
        data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(srcs, hyps, refs)]
        pred = self.model.predict(data, batch_size=self.batch_size, gpus=0, progress_bar=False,
                                  accelerator="cpu", num_workers=1)
        seg = [float(x) for x in pred.scores]
        # reported x100, as the GPA paper's tables do
        return MetricResult(name="COMET", score=100.0 * sum(seg) / len(seg), segment_scores=[100 * x for x in seg],
                            signature=f"comet:{self.path}")


class BleurtScorer:
    def __init__(self, path: Optional[str], batch_size: int = 16):
        if not path:
            raise MetricUnavailable(f"no checkpoint given; {BLEURT_HELP}")
        if not os.path.isdir(path):
            raise MetricUnavailable(f"--bleurt-checkpoint {path}: not a directory; {BLEURT_HELP}")
        try:
            from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer
        except ImportError as e:
            raise MetricUnavailable(f"bleurt-pytorch is not installed: {e}")
        try:
            self.tokenizer = BleurtTokenizer.from_pretrained(path, local_files_only=True)
            self.model = BleurtForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
        except Exception as e:  # noqa: BLE001
            raise MetricUnavailable(f"loading {path} failed ({type(e).__name__}: {e}); {BLEURT_HELP}")
        self.path = path
        self.batch_size = batch_size

    def segment_scores(self, hyps: List[str], refs: List[str]) -> List[float]:
        import torch

        out: List[float] = []
        max_len = min(512, getattr(self.model.config, "max_position_embeddings", 512))
        with torch.inference_mode():
            for i in range(0, len(hyps), self.batch_size):
                enc = self.tokenizer(refs[i:i + self.batch_size], hyps[i:i + self.batch_size], padding="longest",
                                     truncation=True, max_length=max_len, return_tensors="pt")
                out.extend(self.model(**enc).logits.flatten().tolist())
        return out

    def __call__(self, hyps: List[str], refs: List[str], srcs=None) -> MetricResult:
        seg = self.segment_scores(hyps, refs)
        return MetricResult(name="BLEURT", score=100.0 * sum(seg) / len(seg), segment_scores=[100 * x for x in seg],
                            signature=f"bleurt:{self.path}")
