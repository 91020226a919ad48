"""Tiny random-weight COMET and BLEURT models, built offline with the packages' own classes.

They exist so that the real loading and scoring code of ``posmix-score`` (``comet.load_from_checkpoint``
+ ``predict``; ``BleurtForSequenceClassification.from_pretrained`` + ``BleurtTokenizer``) runs in tests
and on machines that cannot download wmt20-comet-da or BLEURT-20. Their scores are meaningless.
See ../shared/notes/stack.md ("Metrics").

    python -m posmix_fairseq.evaluation.tiny_learned_metrics OUT_DIR   # writes OUT_DIR/{comet,bleurt}
"""
import os
from typing import Iterable

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-") + \
    ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + ["the", "man", "dog", "is", "in", "der", "die", "das", "ein"]


def _write_vocab(path: str, words: Iterable[str]) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(w + "\n" for w in words)
    return path


def build_tiny_comet(out_dir: str, seed: int = 0) -> str:
    """A RegressionMetric (the class of wmt20-comet-da) over a 2-layer, 32-dim BERT; returns the
    checkpoint path ``out_dir/checkpoints/model.ckpt`` (``out_dir/hparams.yaml`` beside it)."""
    import pytorch_lightning as pl
    import torch
    from comet.models import RegressionMetric
    from transformers import BertConfig, BertTokenizer

    enc_dir = _write_vocab(os.path.join(out_dir, "encoder"), VOCAB)
    BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=128).save_pretrained(enc_dir)
    BertTokenizer(os.path.join(enc_dir, "vocab.txt")).save_pretrained(enc_dir)
    torch.manual_seed(seed)
    model = RegressionMetric(encoder_model="BERT", pretrained_model=enc_dir, load_pretrained_weights=False,
                             local_files_only=True, hidden_sizes=[16], layer="mix", pool="avg", dropout=0.0)
    trainer = pl.Trainer(default_root_dir=out_dir, logger=False, enable_checkpointing=False, accelerator="cpu",
                         devices=1, enable_progress_bar=False, enable_model_summary=False)
    trainer.strategy.connect(model)
    ckpt = os.path.join(out_dir, "checkpoints", "model.ckpt")
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    trainer.save_checkpoint(ckpt)
    import yaml

    with open(os.path.join(out_dir, "hparams.yaml"), "w") as f:
        yaml.safe_dump(dict(model.hparams), f)
    return ckpt


def build_tiny_bleurt(out_dir: str, seed: int = 0) -> str:
    """A BleurtForSequenceClassification (BLEURT-20's class) with a 2-layer, 32-dim encoder."""
    import torch
    from bleurt_pytorch import BleurtConfig, BleurtForSequenceClassification, BleurtTokenizer

    _write_vocab(out_dir, VOCAB)
    torch.manual_seed(seed)
    config = BleurtConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=128, embedding_size=32)
    BleurtForSequenceClassification(config).eval().save_pretrained(out_dir)
    BleurtTokenizer(os.path.join(out_dir, "vocab.txt")).save_pretrained(out_dir)
    return out_dir


def main():
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    a = p.parse_args()
    print("COMET:", build_tiny_comet(os.path.join(a.out_dir, "comet")))
    print("BLEURT:", build_tiny_bleurt(os.path.join(a.out_dir, "bleurt")))


if __name__ == "__main__":
    main()
