"""Updates per training epoch, as fairseq-train will batch the data: the batch iterator fairseq builds
(``task.get_batch_iterator`` with the run's --max-tokens, size limits and --required-batch-size-multiple),
one shard per GPU, grouped by --update-freq. PEA 4.1 saves (and validates) 8 times per epoch, so the
recipe sets --save-interval-updates / --validate-interval-updates to an eighth of this.

    python -m posmix_fairseq.harness.recipes.epoch DATA [fairseq-train flags] --gpus 2
"""
import argparse
import math
from typing import List, Sequence

import posmix_fairseq
from ..command import POSITIVE_INT

DEFAULT_TOKENS_PER_PAIR = 30  # when nothing can be measured: about WMT's mean sentence length in subwords


def updates_per_epoch(train_argv: Sequence[str], gpus: int = 1) -> int:
    """``train_argv``: fairseq-train's arguments (the data directory first)."""
    # fairseq loads in seconds: only when the data directory is read
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    posmix_fairseq.register()  # the package may have been imported before fairseq (then it registered nothing)

    args = options.parse_args_and_arch(options.get_training_parser(), list(train_argv))
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    subset = cfg.dataset.train_subset
    task.load_dataset(subset, combine=True, epoch=1)
    max_positions = utils.resolve_max_positions(task.max_positions(),
                                                (args.max_source_positions, args.max_target_positions),
                                                cfg.dataset.max_tokens)
    itr = task.get_batch_iterator(
        dataset=task.dataset(subset), max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
        max_positions=max_positions, ignore_invalid_inputs=True,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple, seed=cfg.common.seed,
        num_shards=gpus, shard_id=0, num_workers=0)
    return math.ceil(len(itr) / cfg.optimization.update_freq[0])


def estimate_updates_per_epoch(recipe, update_freq: int, gpus: int, tokens_per_pair: float = 0.0) -> int:
    """Before any data exists: the paper's training pairs x tokens per pair (padding included) over the
    tokens of one update."""
    pairs = recipe.task.train_pairs.get(recipe.paper, 0) or 1
    if recipe.get("MAX_TRAIN"):
        pairs = min(pairs, int(recipe["MAX_TRAIN"]))
    per_pair = tokens_per_pair or DEFAULT_TOKENS_PER_PAIR
    return max(1, math.ceil(pairs * per_pair / (recipe.int("MAX_TOKENS") * gpus * update_freq)))


def main(argv: List[str] = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=POSITIVE_INT, default=1)
    a, rest = p.parse_known_args(argv)
    print(updates_per_epoch(rest, a.gpus))


if __name__ == "__main__":
    main()
