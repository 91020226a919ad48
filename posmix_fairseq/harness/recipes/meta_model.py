"""A recipe's model on torch's meta device: its shapes (parameter count, position tables) without
memory or data, built through fairseq's own training parser as ``fairseq-train --arch X`` builds it."""
from typing import Optional, Sequence

import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks.translation import TranslationConfig, TranslationTask

import posmix_fairseq


def dictionary(words: int):
    """A fairseq Dictionary of ``words`` entries, its 4 specials included."""
    d = Dictionary()
    for i in range(max(0, words - d.nspecial)):
        d.add_symbol(f"w{i}")
    return d


def parse_train_args(flags: Sequence[str]):
    """fairseq-train's arguments for ``flags`` (the arch and its options), with the plugin loaded."""
    posmix_fairseq.register()  # --user-dir does not re-import a package imported before fairseq

    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["unused-data-dir", "--task", "translation", "--user-dir",
                                                posmix_fairseq.USER_DIR, *flags])


def meta_model(flags: Sequence[str], vocab: int, target_vocab: Optional[int] = None, length_ratio: float = 1.0):
    """The model of ``flags`` on the meta device, with ``vocab``-entry dictionaries (or separate source /
    target ones). Position-aware cross mixers get ``length_ratio`` unless the flags give one (there is no
    training data to measure it)."""
    args = parse_train_args(flags)
    if getattr(args, "length_ratio", None) is None:
        args.length_ratio = length_ratio
    source = dictionary(vocab)
    target = dictionary(target_vocab) if target_vocab else source
    task = TranslationTask(TranslationConfig(data="unused-data-dir"), source, target)
    with torch.device("meta"):
        return ARCH_MODEL_REGISTRY[args.arch].build_model(args, task)


def num_parameters(module) -> int:
    return sum(p.numel() for p in module.parameters())
