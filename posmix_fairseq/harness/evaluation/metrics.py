"""The metrics, each through its own package.

- BLEU, chrF, chrF++ (chrF with word n-grams of order 2, Popovic 2017; PosNet paper Table 1) and TER:
  ``sacrebleu`` 2.x with sacreBLEU's own defaults (what its command line computes and papers
  report), and its signatures. BLEU's tokenizer is selectable (``13a``, sacreBLEU's default; ``intl``
  as in the HC paper footnote 13; ``zh`` for Chinese as in the GPA paper footnote 3). TER is
  case-insensitive, as sacreBLEU's and TERCom's default (the PEA paper's TER is TERCom's);
  ``ter_case_sensitive`` is sacreBLEU's ``--ter-case-sensitive``. ``lowercase`` is sacreBLEU's
  ``-lc`` for BLEU and ``--chrf-lowercase`` for chrF.
- The COMET family: ``unbabel-comet`` (``comet.load_from_checkpoint`` + ``predict``). The model's class
  and input segments decide what it is given: reference-based COMET (``RegressionMetric``, e.g.
  wmt20-comet-da as in the GPA paper Section 5.1, wmt22-comet-da) sees source, hypothesis and
  reference; CometKiwi (``UnifiedMetric`` trained on ``[mt, src]``, e.g. wmt22-cometkiwi-da) and
  COMET-QE (``ReferencelessRegression``) are reference-free and never see the reference; XCOMET
  (``XCOMETMetric``) sees all three and also returns error spans.
- BLEURT: ``bleurt-pytorch`` (``BleurtForSequenceClassification``); the GPA paper uses BLEURT-20.

Learned metrics are loaded from a local path, or by Hugging Face model name: from the local Hugging Face
cache, else downloaded into it as ``comet-score`` does (``huggingface_hub.snapshot_download``). COMET's
default model is COMET's own, ``Unbabel/wmt22-comet-da``; the signature names the model and, for a hub
model, its revision. Checkpoints are read weights-only: a COMET checkpoint whose pickle needs any type
torch's weights-only loader does not allow is refused before it is opened (its globals are listed without
unpickling it). A missing, unreachable or unloadable model raises ``MetricUnavailable`` with the reason
and the fix (offline: the cache directory and how to fill it). Learned scores are reported x100, as the
GPA paper's tables do.
"""
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Dict, List, Optional

SACREBLEU_METRICS = ("bleu", "chrf", "chrf++", "ter")
LEARNED_METRICS = ("comet", "bleurt")
ALL_METRICS = SACREBLEU_METRICS + LEARNED_METRICS
BLEU_TOKENIZERS = ("13a", "intl", "zh", "none", "char", "ja-mecab", "ko-mecab", "flores101", "flores200")

COMET_DEFAULT = "Unbabel/wmt22-comet-da"  # unbabel-comet's own default (comet-score --model)
COMET_HELP = ("pass --comet-model PATH: a COMET model directory as COMET stores it (DIR/checkpoints/model.ckpt "
              "with DIR/hparams.yaml), its .ckpt file, or a Hugging Face model name (default "
              f"{COMET_DEFAULT}), which is downloaded when the hub is reachable; its encoder (e.g. "
              "xlm-roberta-large) is downloaded or read from the cache the same way")
BLEURT_DEFAULT = "lucadiliello/BLEURT-20"  # BLEURT-20 (GPA paper) as bleurt-pytorch publishes it
BLEURT_HELP = ("pass --bleurt-checkpoint PATH: a bleurt-pytorch model directory (config.json, weights, vocab/"
               f"sentencepiece files) or a Hugging Face model name (default {BLEURT_DEFAULT}), which is "
               "downloaded when the hub is reachable")


class MetricUnavailable(Exception):
    """A metric that cannot be computed here (model not given / not loadable); the message says why."""


@dataclass
class MetricResult:
    name: str            # e.g. "BLEU", "COMET", "CometKiwi"
    score: float
    signature: str = ""
    segment_scores: Optional[List[float]] = None  # learned metrics (for the paired tests)
    details: Dict[str, list] = field(default_factory=dict)  # e.g. XCOMET's error spans per segment


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def sacrebleu_metric(name: str, tokenize: str = "13a", lowercase: bool = False, ter_case_sensitive: bool = False):
    """A sacrebleu Metric object for 'bleu', 'chrf', 'chrf++' or 'ter', with sacreBLEU's defaults."""
    from sacrebleu.metrics import BLEU, CHRF, TER  # sacrebleu loads in tenths of a second: not on --help

    if name == "bleu":
        if tokenize not in BLEU_TOKENIZERS:
            raise ValueError(f"--tokenize {tokenize!r}: valid values are {', '.join(BLEU_TOKENIZERS)}")
        return BLEU(tokenize=tokenize, lowercase=lowercase)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    if name == "chrf++":
        return CHRF(word_order=2, lowercase=lowercase)
    if name == "ter":
        return TER(case_sensitive=ter_case_sensitive and not lowercase)
    raise ValueError(f"unknown sacrebleu metric {name!r}; valid: {', '.join(SACREBLEU_METRICS)}")


def format_signature(items: Dict[str, object], **extra) -> str:
    """sacreBLEU's signature format: ``key:value`` joined by ``|``, the version last."""
    items = {**{k: v for k, v in items.items() if k != "version"}, **extra, "version": items.get("version")}
    return "|".join(f"{k}:{v}" for k, v in items.items() if v is not None)


def resolve_gpus(gpus: Optional[int]) -> int:
    """``--gpus``: None = one GPU when CUDA is visible, else the CPU."""
    import torch  # torch loads in seconds: only for the learned metrics, never for text-only scoring

    if gpus is None:
        return 1 if torch.cuda.is_available() else 0
    if gpus not in (0, 1):
        raise ValueError(f"--gpus {gpus}: valid values are 0 (CPU) and 1 (COMET's multi-GPU prediction starts "
                         "DDP workers that re-run the whole command; use comet-score for that)")
    if gpus == 1 and not torch.cuda.is_available():
        raise ValueError("--gpus 1: no CUDA GPU is visible here (torch.cuda.is_available() is False); use --gpus 0")
    return gpus


# ---- COMET ----------------------------------------------------------------------------------------

def resolve_comet_checkpoint(spec: str) -> str:
    """The model.ckpt of ``spec``: a .ckpt file, a directory as COMET stores it (``DIR/checkpoints/
    model.ckpt``; also ``DIR`` = that checkpoints folder), or a model name in the local Hugging Face
    cache. ``comet.load_from_checkpoint`` reads ``hparams.yaml`` two levels above the checkpoint."""
    if os.path.isfile(spec):
        ckpt = spec
    elif os.path.isdir(spec):
        cands = [os.path.join(spec, "checkpoints", "model.ckpt")]
        if os.path.basename(os.path.normpath(spec)) == "checkpoints":
            cands.append(os.path.join(spec, "model.ckpt"))
        ckpt = next((c for c in cands if os.path.isfile(c)), None)
        if ckpt is None:
            raise MetricUnavailable(f"--comet-model {spec}: no checkpoints/model.ckpt there; {COMET_HELP}")
    elif is_hub_name(spec):
        ckpt = os.path.join(hub_snapshot(spec, "--comet-model"), "checkpoints", "model.ckpt")
    else:
        raise MetricUnavailable(f"--comet-model {spec}: no such file or directory; {COMET_HELP}")
    hparams = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ckpt))), "hparams.yaml")
    if not os.path.isfile(hparams):
        raise MetricUnavailable(f"--comet-model {spec}: COMET reads the model's hparams.yaml from two levels above "
                                f"the checkpoint ({hparams}), and there is none; {COMET_HELP}")
    return ckpt


def is_hub_name(spec: str) -> bool:
    """``Org/name``: a Hugging Face model name rather than a (missing) local path."""
    return spec.count("/") == 1 and not spec.startswith((".", "/", "~")) and not spec.endswith("/")


def hub_cache_dir() -> str:
    from huggingface_hub import constants  # optional: huggingface_hub (comes with COMET and BLEURT)

    return constants.HF_HUB_CACHE


def hub_snapshot(name: str, option: str) -> str:
    """The local snapshot directory of hub model ``name``: from the cache, else downloaded into it (what
    ``comet-score --model NAME`` does). Offline, the error names the cache directory and how to fill it."""
    from huggingface_hub import snapshot_download  # optional: huggingface_hub (comes with COMET and BLEURT)

    try:
        return snapshot_download(repo_id=name, local_files_only=True)
    except Exception:  # noqa: BLE001  (not in the cache: any error of the hub client; then download)
        pass
    try:
        return snapshot_download(repo_id=name)
    except Exception as e:  # noqa: BLE001  (offline, unknown name, gated model...)
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MetricUnavailable(
            f"{option} {name}: not in the Hugging Face cache ({hub_cache_dir()}) and the download failed "
            f"({type(e).__name__}: {reason}). Fill the cache on a machine with internet (`huggingface-cli download "
            f"{name}`, or run comet-score once with the model) and copy it to {hub_cache_dir()} here (or point "
            "HF_HOME / HF_HUB_CACHE at the copy), or pass a local model directory") from None


def hub_revision(path: str) -> Optional[str]:
    """The revision (commit) of a Hugging Face cache snapshot path, None for other paths."""
    parts = os.path.abspath(path).split(os.sep)
    if "snapshots" in parts[:-1] and any(p.startswith("models--") for p in parts):
        return parts[parts.index("snapshots") + 1]
    return None


def refuse_unsafe_pickle(ckpt: str, option: str) -> None:
    """Refuses a checkpoint whose pickle needs a type torch's weights-only loader does not allow (listed
    from the pickle's opcodes, never unpickled): loading it could run code."""
    import torch  # torch loads in seconds: only for the learned metrics, never for text-only scoring

    try:
        needed = torch.serialization.get_unsafe_globals_in_checkpoint(ckpt)
    except Exception as e:  # noqa: BLE001  (not a torch zip file at all)
        raise MetricUnavailable(f"{option} {ckpt}: not a readable checkpoint ({type(e).__name__}: {e})") from None
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in torch.serialization.get_safe_globals()
               if not isinstance(g, tuple)}
    refused = [g for g in needed if g not in allowed]
    if refused:
        raise MetricUnavailable(f"{option} {ckpt}: refused to load: its pickle needs {', '.join(refused)}, which "
                                "weights-only loading does not allow (loading it could run code; COMET's own loader "
                                "refuses it too). Use a checkpoint from COMET's releases")


def comet_model_name(ckpt: str) -> str:
    """The model's name: ``Org/name`` for a Hugging Face cache snapshot, else the directory that holds
    ``checkpoints/``, else the checkpoint's file name."""
    parts = os.path.abspath(ckpt).split(os.sep)  # abspath, not realpath: cache snapshots are symlinks
    for p in parts:
        if p.startswith("models--"):
            return p[len("models--"):].replace("--", "/")
    if len(parts) >= 3 and parts[-2] == "checkpoints":
        return parts[-3]
    return os.path.splitext(parts[-1])[0]


def comet_input_segments(model) -> List[str]:
    """What the model reads: ``UnifiedMetric``/``XCOMETMetric`` say it in ``hparams.input_segments``;
    ``ReferencelessRegression`` reads source and hypothesis; the others (``RegressionMetric``,
    ``RankingMetric``) source, hypothesis and reference."""
    from comet.models import ReferencelessRegression, UnifiedMetric  # optional: unbabel-comet (--metrics comet)

    if isinstance(model, UnifiedMetric):
        return list(model.hparams.input_segments)
    if isinstance(model, ReferencelessRegression):
        return ["mt", "src"]
    return ["mt", "src", "ref"]


def comet_kind(model, segments: List[str]) -> str:
    from comet.models import UnifiedMetric, XCOMETMetric  # optional: unbabel-comet (--metrics comet)

    if isinstance(model, XCOMETMetric):
        return "XCOMET"
    if "ref" not in segments:
        return "CometKiwi" if isinstance(model, UnifiedMetric) else "COMET-QE"
    return "COMET"


class CometScorer:
    """One model of the COMET family; ``name`` is its column (COMET, CometKiwi, COMET-QE, XCOMET)."""

    def __init__(self, spec: Optional[str], batch_size: int = 16, gpus: int = 0, lowercased: bool = False):
        spec = spec or COMET_DEFAULT
        try:
            # optional: unbabel-comet (--metrics comet)
            from comet import load_from_checkpoint
        except ImportError as e:
            raise MetricUnavailable(f"unbabel-comet is not installed (pip install unbabel-comet==2.2.7): {e}")
        ckpt = resolve_comet_checkpoint(spec)
        refuse_unsafe_pickle(ckpt, "--comet-model")
        try:
            self.model = load_from_checkpoint(ckpt)  # the encoder's files: from the cache or downloaded
        except Exception as e:  # noqa: BLE001  (any loading failure is reported with its reason)
            raise MetricUnavailable(f"loading {ckpt} failed ({type(e).__name__}: {e}); offline, the model's encoder "
                                    f"must be in the Hugging Face cache ({hub_cache_dir()}); {COMET_HELP}")
        self.model.eval()
        self.path = ckpt
        self.model_name = comet_model_name(ckpt)
        self.segments = comet_input_segments(self.model)
        self.name = comet_kind(self.model, self.segments)
        self.batch_size = batch_size
        self.gpus = gpus
        self.signature_items = {
            "model": self.model_name, "class": type(self.model).__name__, "inputs": "+".join(self.segments),
            "case": "lc" if lowercased else "mixed", "batch": batch_size, "device": "gpu" if gpus else "cpu",
            "scale": "x100", "version": f"comet-{package_version('unbabel-comet')}"}
        if hub_revision(ckpt):
            self.signature_items["model"] = f"{self.model_name}@{hub_revision(ckpt)}"

    @property
    def reference_free(self) -> bool:
        return "ref" not in self.segments

    def __call__(self, hyps: List[str], refs: List[str], srcs: Optional[List[str]]) -> MetricResult:
        if "src" in self.segments and not srcs:
            raise MetricUnavailable(f"{self.name} ({self.model_name}) reads the sources; pass --src or a "
                                    "fairseq-generate output with S- lines")
        columns = {"mt": hyps, "src": srcs, "ref": refs}
        data = [dict(zip(self.segments, row)) for row in zip(*(columns[s] for s in self.segments))]
        pred = self.model.predict(data, batch_size=self.batch_size, gpus=self.gpus, progress_bar=False,
                                  accelerator="gpu" if self.gpus else "cpu")
        seg = [100.0 * float(x) for x in pred.scores]
        details = {}
        meta = pred.get("metadata")
        if meta is not None and "error_spans" in meta:
            details["error_spans"] = list(meta["error_spans"])
        return MetricResult(name=self.name, score=sum(seg) / len(seg), segment_scores=seg,
                            signature=format_signature(self.signature_items), details=details)


# ---- BLEURT ---------------------------------------------------------------------------------------

class BleurtScorer:
    name = "BLEURT"
    reference_free = False

    def __init__(self, path: Optional[str], batch_size: int = 16, gpus: int = 0, lowercased: bool = False):
        path = path or BLEURT_DEFAULT
        try:
            # optional: bleurt-pytorch (--metrics bleurt)
            from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer
        except ImportError as e:
            raise MetricUnavailable(f"bleurt-pytorch is not installed: {e}")
        name = path
        if not os.path.isdir(path) and is_hub_name(path):
            path = hub_snapshot(path, "--bleurt-checkpoint")
        if not os.path.isdir(path):
            raise MetricUnavailable(f"--bleurt-checkpoint {path}: not a directory; {BLEURT_HELP}")
        try:
            self.tokenizer = BleurtTokenizer.from_pretrained(path, local_files_only=True)
            self.model = BleurtForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
        except Exception as e:  # noqa: BLE001
            raise MetricUnavailable(f"loading {path} failed ({type(e).__name__}: {e}); {BLEURT_HELP}")
        self.device = "cuda" if gpus else "cpu"
        self.model.to(self.device)
        self.path = path
        self.batch_size = batch_size
        self.signature_items = {
            "model": (f"{name}@{hub_revision(path)}" if hub_revision(path)
                      else os.path.basename(os.path.normpath(path))),
            "case": "lc" if lowercased else "mixed",
            "batch": batch_size, "device": "gpu" if gpus else "cpu", "scale": "x100",
            "version": f"bleurt-pytorch-{package_version('bleurt-pytorch')}"}

    def segment_scores(self, hyps: List[str], refs: List[str]) -> List[float]:
        import torch  # torch loads in seconds: only for the learned metrics, never for text-only scoring

        out: List[float] = []
        max_len = min(512, getattr(self.model.config, "max_position_embeddings", 512))
        with torch.inference_mode():
            for i in range(0, len(hyps), self.batch_size):
                enc = self.tokenizer(refs[i:i + self.batch_size], hyps[i:i + self.batch_size], padding="longest",
                                     truncation=True, max_length=max_len, return_tensors="pt").to(self.device)
                out.extend(self.model(**enc).logits.flatten().float().cpu().tolist())
        return out

    def __call__(self, hyps: List[str], refs: List[str], srcs=None) -> MetricResult:
        seg = [100.0 * x for x in self.segment_scores(hyps, refs)]
        return MetricResult(name=self.name, score=sum(seg) / len(seg), segment_scores=seg,
                            signature=format_signature(self.signature_items))
