"""Loading a checkpoint and its task through fairseq's public API, as ``fairseq-generate`` does
(``options.get_generation_parser`` -> ``tasks.setup_task`` -> ``checkpoint_utils.load_model_ensemble``),
so every analysis works with every architecture and takes fairseq-generate's own flags."""
import contextlib
import logging
import os
import pickle
import zipfile
from typing import List, Sequence

import torch

import posmix_fairseq

from .checkpoint_files import CheckpointFileError
from .command import silence_library_noise


@contextlib.contextmanager
def quiet_fairseq_logging():
    """fairseq's INFO lines (dictionary sizes, examples loaded, batching) are for fairseq-train's log,
    not for an analysis's user: fairseq logs only warnings from here on. Hydra, while fairseq composes
    its configuration, sets the root logger to DEBUG and adds a handler: both are undone afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    silence_library_noise()
    try:
        yield
    finally:
        root.setLevel(level)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)


def load_for_inference(data_dir: str, checkpoint: str, extra: Sequence[str] = (), subset: str = "test"):
    """(cfg, task, models): models in eval mode on CPU, the subset loaded if it exists in data_dir."""
    with quiet_fairseq_logging():
        return _load_for_inference(data_dir, checkpoint, extra, subset)


def _load_for_inference(data_dir: str, checkpoint: str, extra: Sequence[str], subset: str):
    # fairseq loads in seconds: only when a model is loaded, never on a command's --help
    from fairseq import checkpoint_utils, options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    posmix_fairseq.register()  # imported before fairseq, the package registered nothing

    for path in utils.split_paths(checkpoint):  # ':'-separated for an ensemble, as fairseq-generate's --path
        if not os.path.isfile(path):
            raise ValueError(f"--path {checkpoint}: no such checkpoint: {path}")
    if not os.path.isdir(data_dir):
        raise ValueError(f"data directory {data_dir!r} (fairseq-preprocess --destdir) does not exist")
    parser = options.get_generation_parser()
    argv = [data_dir, "--path", checkpoint, "--user-dir", posmix_fairseq.USER_DIR, "--cpu", "--gen-subset", subset,
            "--required-batch-size-multiple", "1", *extra]
    args = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
    task = tasks.setup_task(cfg.task)
    overrides = eval(cfg.common_eval.model_overrides)  # noqa: S307  (fairseq-generate does the same)
    try:
        models, _ = checkpoint_utils.load_model_ensemble(utils.split_paths(cfg.common_eval.path),
                                                         arg_overrides=overrides, task=task)
    except (EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, RuntimeError) and not any(w in text for w in ("PytorchStreamReader", "zip archive", "unpickl")):
            raise  # not a reading error: the model's own
        raise CheckpointFileError(f"--path {checkpoint}: not a readable checkpoint ({type(e).__name__}: {text}); it may "
                                  "be truncated or not a torch.save file") from None
    for m in models:
        m.eval()
        m.prepare_for_inference_(cfg)
    split_exists = any(f.startswith(f"{subset}.") for f in os.listdir(data_dir))
    if split_exists:
        task.load_dataset(subset, task_cfg=cfg.task)
    return cfg, task, models


def _epoch_batches(task, subset: str, max_sentences: int = 0, max_tokens: int = 4000):
    return task.get_batch_iterator(
        dataset=task.dataset(subset), max_tokens=max_tokens, max_sentences=max_sentences or None, max_positions=None,
        ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1, num_shards=1, shard_id=0,
        num_workers=0)


def batches(cfg, task, subset: str, max_sentences: int = 0, max_tokens: int = 4000):
    """Batches of the subset in fairseq's order (batch_size 1-multiple: no sentence is skipped)."""
    return _epoch_batches(task, subset, max_sentences, max_tokens).next_epoch_itr(shuffle=False)


def first_sentences(task, subset: str, stop_after: int, max_tokens: int = 4000) -> List[int]:
    """The sentence ids of the batches that ``batches`` yields until ``stop_after`` sentences are reached
    (0: all), known before any batch is run: fairseq orders batches by length, not by id."""
    ids: List[int] = []
    for batch in _epoch_batches(task, subset, 0, max_tokens).frozen_batches:
        ids.extend(int(i) for i in batch)
        if stop_after and len(ids) >= stop_after:
            break
    return ids


def encode_lines(dictionary, lines: List[str]) -> List[torch.Tensor]:
    """Already-tokenised text (subword pieces separated by spaces) -> token ids with EOS."""
    return [dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).long() for line in lines]
