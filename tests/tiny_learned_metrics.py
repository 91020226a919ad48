"""Test fixtures: tiny random-weight models of the COMET family and of BLEURT, built offline with the
packages' own classes, so that the real loading and scoring code of ``posmix-score``
(``comet.load_from_checkpoint`` + ``predict``; ``BleurtForSequenceClassification.from_pretrained`` +
``BleurtTokenizer``) runs in tests. Their scores are meaningless.

- COMET: ``RegressionMetric`` (the class of wmt20-comet-da / wmt22-comet-da), source + hypothesis +
  reference;
- CometKiwi: ``UnifiedMetric`` with ``input_segments=["mt", "src"]`` (the class and inputs of
  wmt22-cometkiwi-da), reference-free;
- XCOMET: ``XCOMETMetric`` (XCOMET-XL's class), scores and error spans;
- BLEURT: ``BleurtForSequenceClassification`` (BLEURT-20's class).

The COMET models share one 2-layer, 32-dim BERT encoder and are stored as COMET stores its models:
``DIR/checkpoints/model.ckpt`` with ``DIR/hparams.yaml``.

    python tests/tiny_learned_metrics.py OUT_DIR   # writes OUT_DIR/{comet,cometkiwi,xcomet,bleurt}
"""
import os
from typing import Dict, Iterable

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-") + \
    ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + ["the", "man", "dog", "is", "in", "der", "die", "das", "ein"]


def _write_vocab(path: str, words: Iterable[str]) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(w + "\n" for w in words)
    return path


def build_tiny_bert_encoder(out_dir: str) -> str:
    from transformers import BertConfig, BertTokenizer

    enc_dir = _write_vocab(out_dir, VOCAB)
    BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=128).save_pretrained(enc_dir)
    # cased, so that lowercasing the text changes what the models see
    BertTokenizer(os.path.join(enc_dir, "vocab.txt"), do_lower_case=False).save_pretrained(enc_dir)
    return enc_dir


def save_comet_model(model, out_dir: str) -> str:
    """``out_dir/checkpoints/model.ckpt`` (a pytorch-lightning checkpoint) and ``out_dir/hparams.yaml``."""
    import pytorch_lightning as pl
    import yaml

    trainer = pl.Trainer(default_root_dir=out_dir, logger=False, enable_checkpointing=False, accelerator="cpu",
                         devices=1, enable_progress_bar=False, enable_model_summary=False)
    trainer.strategy.connect(model)
    ckpt = os.path.join(out_dir, "checkpoints", "model.ckpt")
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    trainer.save_checkpoint(ckpt)
    with open(os.path.join(out_dir, "hparams.yaml"), "w") as f:
        yaml.safe_dump(dict(model.hparams), f)
    return ckpt


def build_tiny_comet(out_dir: str, encoder_dir: str, seed: int = 0) -> str:
    import torch
    from comet.models import RegressionMetric

    torch.manual_seed(seed)
    model = RegressionMetric(encoder_model="BERT", pretrained_model=encoder_dir, load_pretrained_weights=False,
                             local_files_only=True, hidden_sizes=[16], layer="mix", pool="avg", dropout=0.0)
    return save_comet_model(model, out_dir)


def build_tiny_cometkiwi(out_dir: str, encoder_dir: str, seed: int = 1) -> str:
    import torch
    from comet.models import UnifiedMetric

    torch.manual_seed(seed)
    model = UnifiedMetric(encoder_model="BERT", pretrained_model=encoder_dir, load_pretrained_weights=False,
                          local_files_only=True, hidden_sizes=[16], sent_layer="mix", word_layer=2,
                          layer_transformation="softmax", input_segments=["mt", "src"], dropout=0.0)
    return save_comet_model(model, out_dir)


def build_tiny_xcomet(out_dir: str, encoder_dir: str, seed: int = 2) -> str:
    import torch
    from comet.models import XCOMETMetric

    torch.manual_seed(seed)
    model = XCOMETMetric(encoder_model="BERT", pretrained_model=encoder_dir, load_pretrained_weights=False,
                         local_files_only=True, hidden_sizes=[16], word_layer=2, layer_transformation="softmax",
                         dropout=0.0)
    return save_comet_model(model, out_dir)


def build_tiny_bleurt(out_dir: str, seed: int = 0) -> str:
    import torch
    from bleurt_pytorch import BleurtConfig, BleurtForSequenceClassification, BleurtTokenizer

    _write_vocab(out_dir, VOCAB)
    torch.manual_seed(seed)
    config = BleurtConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=128, embedding_size=32)
    BleurtForSequenceClassification(config).eval().save_pretrained(out_dir)
    BleurtTokenizer(os.path.join(out_dir, "vocab.txt")).save_pretrained(out_dir)
    return out_dir


def build_all(out_dir: str) -> Dict[str, str]:
    """{"comet", "cometkiwi", "xcomet": model directories as COMET stores them; "bleurt": a directory}."""
    enc = build_tiny_bert_encoder(os.path.join(out_dir, "bert_encoder"))
    paths = {}
    for name, build in (("comet", build_tiny_comet), ("cometkiwi", build_tiny_cometkiwi), ("xcomet", build_tiny_xcomet)):
        build(os.path.join(out_dir, name), enc)
        paths[name] = os.path.join(out_dir, name)
    paths["bleurt"] = build_tiny_bleurt(os.path.join(out_dir, "bleurt"))
    return paths


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    for k, v in build_all(p.parse_args().out_dir).items():
        print(f"{k}: {v}")
