"""``posmix_translation``: fairseq's ``translation`` task with ``--source-prefix eos``, which starts every
source sentence with EOS, as the released code of GPA feeds its sources (docs/choices.md, Sources that start
with EOS), ``--match-target-len``, which decodes every hypothesis at its reference's length
(``target_length.py``), and ``--allow-dictionary-mismatch``, which loads a model whose stored dictionaries'
fingerprint differs from the task's (``data_fingerprint.py``). Without them the task is ``translation`` exactly.
"""
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import utils
from fairseq.tasks import TASK_REGISTRY, register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask, load_langpair_dataset

from .target_length import check_generation_options, generate_at_target_length

SOURCE_PREFIXES = ("none", "eos")
OPTION = "--source-prefix"


def source_prefix_value(value) -> Optional[str]:
    """``value`` checked against :data:`SOURCE_PREFIXES` (None: not given)."""
    if value is not None and value not in SOURCE_PREFIXES:
        raise ValueError(f"{OPTION} {value!r}: valid values are {', '.join(SOURCE_PREFIXES)}")
    return value


def source_prefix_length(args) -> int:
    """Tokens the task puts before each source of a model with the stored arguments ``args``."""
    return 1 if getattr(args, "source_prefix", None) == "eos" else 0


def check_source_prefix(task, args):
    """Called by the model's ``build_model``: the task must make the sources the model reads (its stored
    ``source_prefix``, none when absent), so generation cannot silently drop the prefix; this task takes the
    model's prefix when ``--source-prefix`` is unset."""
    prefix = source_prefix_value(getattr(args, "source_prefix", None)) or "none"
    if isinstance(task, PosMixTranslationTask):
        if task.source_prefix is None:
            task.source_prefix = prefix
        elif task.source_prefix != prefix:
            raise ValueError(f"{OPTION} {task.source_prefix}, but the model was trained with {OPTION} {prefix}: "
                             f"drop {OPTION} (the task then takes the model's) or give {prefix}")
    elif prefix != "none":
        name = getattr(task.cfg, "_name", None) or type(task).__name__
        raise ValueError(f"the model reads sources that start with EOS ({OPTION} {prefix}, e.g. set by the *_released "
                         f"archs), which --task {name} does not make: use --task posmix_translation (at generation it "
                         f"takes the model's {OPTION})")


@dataclass
class PosMixTranslationConfig(TranslationConfig):
    source_prefix: Optional[str] = field(
        default=None,
        metadata={"help": "token before every source sentence: eos (the released code of Gated position-based "
                          "attention starts sources with EOS) or none. Default: the arch's (eos for the "
                          "*_released archs, none otherwise); at generation, the model's"})
    match_target_len: bool = field(
        default=False,
        metadata={"help": "generations should match the reference's length in target pieces (oracle-length "
                          "decoding): each hypothesis of a sentence has exactly as many pieces as its target in the "
                          "generated subset; replaces --min-len, --max-len-a and --max-len-b"})
    allow_dictionary_mismatch: bool = field(
        default=False,
        metadata={"help": "load a model (fairseq-generate, --restore-file) whose stored dictionaries' fingerprint "
                          "differs from this task's dictionaries: only when both dictionaries mean the same words "
                          "(default: such a model is refused)"})


class PosMixTranslationTask(TranslationTask):
    """``translation`` whose sources may start with EOS (``--source-prefix eos``)."""

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.source_prefix = source_prefix_value(getattr(cfg, "source_prefix", None))

    @property
    def prefix_token(self) -> Optional[int]:
        return self.src_dict.eos() if self.source_prefix == "eos" else None

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if self.prefix_token is None:
            return super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        # TranslationTask.load_dataset's call, with fairseq's own prepend_bos_src
        paths = utils.split_paths(self.cfg.data)
        if split != self.cfg.train_subset:
            paths = paths[:1]
        self.datasets[split] = load_langpair_dataset(
            paths[(epoch - 1) % len(paths)], split, self.cfg.source_lang, self.src_dict, self.cfg.target_lang,
            self.tgt_dict, combine=combine, dataset_impl=self.cfg.dataset_impl,
            upsample_primary=self.cfg.upsample_primary, left_pad_source=self.cfg.left_pad_source,
            left_pad_target=self.cfg.left_pad_target, max_source_positions=self.cfg.max_source_positions,
            max_target_positions=self.cfg.max_target_positions, load_alignments=self.cfg.load_alignments,
            truncate_source=self.cfg.truncate_source, num_buckets=self.cfg.num_batch_buckets,
            shuffle=(split != "test"), pad_to_multiple=self.cfg.required_seq_len_multiple,
            prepend_bos_src=self.prefix_token)

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, prefix_allowed_tokens_fn=None):
        if getattr(self.cfg, "match_target_len", False):
            check_generation_options(args)
        return super().build_generator(models, args, seq_gen_cls=seq_gen_cls, extra_gen_cls_kwargs=extra_gen_cls_kwargs,
                                       prefix_allowed_tokens_fn=prefix_allowed_tokens_fn)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        if not getattr(self.cfg, "match_target_len", False):
            return super().inference_step(generator, models, sample, prefix_tokens=prefix_tokens,
                                          constraints=constraints)
        with torch.no_grad():
            return generate_at_target_length(generator, models, sample, prefix_tokens, constraints)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        token = self.prefix_token
        if token is not None:  # fairseq-interactive: the encoded lines
            src_tokens = [torch.cat([t.new_tensor([token]), t]) for t in src_tokens]
            src_lengths = [n + 1 for n in src_lengths]
        return super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)


if "posmix_translation" not in TASK_REGISTRY:
    register_task("posmix_translation", dataclass=PosMixTranslationConfig)(PosMixTranslationTask)
