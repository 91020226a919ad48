"""``--bf16`` on a GPU (or CPU) host without torch_xla: train and decode in bfloat16.

Two behaviours of fairseq 0.12 are corrected here, nothing else:

* Training. ``options.parse_args_and_arch`` sets ``args.tpu = True`` whenever ``--bf16`` (or
  ``--memory-efficient-bf16``) is given, because fairseq's bf16 path was written for TPUs. Every
  reader of ``tpu`` then takes the XLA branch: ``distributed_utils.infer_init_method`` skips the
  multi-GPU set-up and ``call_main`` goes to ``torch_xla``'s ``xmp.spawn``, the ``Trainer`` asks
  ``utils.get_tpu_device()`` for its device, ``fairseq_cli/train.py`` wraps its iterators for XLA.
  Without torch_xla that dies (``'NoneType' object has no attribute 'xla_device'``). Yet the
  trainer itself trains in bf16 on CUDA or the CPU (``model.to(bfloat16)``, bf16 samples,
  ``FP16Optimizer`` with fp32 master weights and no loss scaling). :func:`install` wraps
  ``fairseq.options.parse_args_and_arch`` (the CLIs call it by module attribute, after the
  ``--user-dir`` import that calls :func:`install`) so that, where torch_xla is not installed and
  ``--tpu`` was not asked for, the parsed arguments say ``tpu=False``. The correction happens before
  the arguments become the config, so ``cfg.common.tpu``, ``call_main`` (one process, or
  ``torch.multiprocessing.spawn`` over the GPUs, whose children receive the corrected config), the
  trainer, the optimizers and the data iterators all see the same value. Where torch_xla is
  installed, fairseq's behaviour is kept unchanged.

* Decoding. ``fairseq-generate`` converts the models only for ``--fp16`` (``model.half()``), so
  ``--bf16`` silently decodes in fp32. :class:`Bf16Inference` is mixed into the plugin's model and
  converts it to bfloat16 in ``prepare_for_inference_``, the hook fairseq-generate (and
  fairseq-interactive, the hub interface and this package's analyses) call with the full config
  after loading the checkpoint and moving the model to its device.
"""
import argparse
import functools
import importlib.util
import logging

import torch

logger = logging.getLogger(__name__)

_MARK = "_posmix_bf16_without_xla"


def xla_available() -> bool:
    """True where torch_xla can be imported (a TPU host): fairseq's own ``--bf16`` route applies."""
    try:
        return importlib.util.find_spec("torch_xla") is not None
    except (ImportError, ValueError):  # a module in sys.modules without a spec
        return False


def _asked_for_tpu(input_args) -> bool:
    """Whether ``--tpu`` itself is on the command line (``input_args``, or sys.argv as argparse reads it)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--tpu", action="store_true")
    known, _ = parser.parse_known_args(input_args)
    return known.tpu


def correct_tpu(args: argparse.Namespace, input_args=None) -> argparse.Namespace:
    """Undo fairseq's ``--bf16`` => ``tpu=True`` where torch_xla is absent and ``--tpu`` was not given."""
    if getattr(args, "bf16", False) and getattr(args, "tpu", False) and not xla_available() \
            and not _asked_for_tpu(input_args):
        args.tpu = False
        logger.info("--bf16 without torch_xla: training in bfloat16 on %s (fairseq's --bf16 => --tpu is not applied)",
                    "the CPU" if getattr(args, "cpu", False) else "CUDA where available")
    return args


def install():
    """Wrap ``fairseq.options.parse_args_and_arch`` with :func:`correct_tpu` (once per process)."""
    from fairseq import options

    original = options.parse_args_and_arch
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def parse_args_and_arch(parser, input_args=None, *rest, **kwargs):
        parsed = original(parser, input_args, *rest, **kwargs)
        args = parsed[0] if isinstance(parsed, tuple) else parsed
        correct_tpu(args, input_args)
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
