"""``--bf16`` on a GPU (or CPU) host without torch_xla: train and decode in bfloat16 (docs/multi-gpu.md, bf16).
fairseq 0.12 turns ``--bf16`` into ``tpu=True`` (:func:`install` undoes it) and ``fairseq-generate`` converts
models for ``--fp16`` only (:class:`Bf16Inference` converts the plugin's model for ``--bf16``)."""
import argparse
import functools
import importlib.util
import logging

import torch
from fairseq import options

logger = logging.getLogger(__name__)

_MARK = "_posmix_bf16_without_xla"


def correct_tpu(args: argparse.Namespace, input_args=None) -> None:
    """Undo fairseq's ``--bf16`` => ``tpu=True`` where torch_xla is absent (where it can be imported, a TPU host,
    fairseq's own ``--bf16`` route applies) and ``--tpu`` is not on the command line."""
    if not (getattr(args, "bf16", False) and getattr(args, "tpu", False)):
        return
    try:
        if importlib.util.find_spec("torch_xla") is not None:
            return
    except (ImportError, ValueError):  # a module in sys.modules without a spec
        pass
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--tpu", action="store_true")
    if not parser.parse_known_args(input_args)[0].tpu:
        args.tpu = False
        logger.info("--bf16 without torch_xla: training in bfloat16 on %s (fairseq's --bf16 => --tpu is not applied)",
                    "the CPU" if getattr(args, "cpu", False) else "CUDA where available")


def install():
    """Wrap ``fairseq.options.parse_args_and_arch`` with :func:`correct_tpu` (once per process): the CLIs call
    it by module attribute after the ``--user-dir`` import, before the arguments become the config."""
    original = options.parse_args_and_arch
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def parse_args_and_arch(parser, input_args=None, *rest, **kwargs):
        parsed = original(parser, input_args, *rest, **kwargs)
        correct_tpu(parsed[0] if isinstance(parsed, tuple) else parsed, input_args)
        return parsed

    setattr(parse_args_and_arch, _MARK, True)
    options.parse_args_and_arch = parse_args_and_arch


class Bf16Inference:
    """Model mixin: ``--bf16`` (without ``--fp16``) converts the model to bfloat16 for decoding."""

    def prepare_for_inference_(self, cfg):
        super().prepare_for_inference_(cfg)
        common = getattr(cfg, "common", None)
        if common is not None and getattr(common, "bf16", False) and not getattr(common, "fp16", False):
            self.to(dtype=torch.bfloat16)
