"""The two places where the plugin changes what fairseq does and fairseq offers no hook; nothing else in the
library assigns to a fairseq module's attributes or to a module's ``_parameters`` / ``__dict__``
(``tests/test_fairseq_patches.py`` checks both, and fails if fairseq changes what these rely on):

* :func:`install_bf16_parse_fix`: fairseq 0.12 turns ``--bf16`` into ``tpu=True``; on a host without
  torch_xla that asks torch_xla for a device. The CLIs read ``fairseq.options.parse_args_and_arch`` by module
  attribute after the ``--user-dir`` import, so wrapping it there undoes the TPU switch (docs/multi-gpu.md, bf16).
* :class:`EmbeddingStageSlot`: fairseq's encoder (``forward_embedding``) and decoder (``extract_features``)
  run ``self.layernorm_embedding`` on the embedded input, before dropout, and nowhere else; the posmix sides
  answer that slot with their position stage (docs/choices.md, "Where the position encodings run").
"""
import argparse
import functools
import importlib.util
import logging

from fairseq import options
from torch import nn

logger = logging.getLogger(__name__)

_MARK = "_posmix_bf16_without_xla"
#: the attribute fairseq's encoder and decoder assign their embedding LayerNorm to and run on the embedded input
FAIRSEQ_EMBEDDING_SLOT = "layernorm_embedding"


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


def install_bf16_parse_fix():
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


class EmbeddingStageSlot:
    """Mixin of an encoder/decoder (before fairseq's base class): fairseq's ``layernorm_embedding`` slot reads
    as the side's ``position_encoding`` stage, so fairseq's forward runs the stage where it would run its
    embedding LayerNorm, and the stage is registered (and saved) once, under its own name."""

    @property
    def layernorm_embedding(self):
        """fairseq's forward runs this slot on the embedded input: the side's position stage."""
        return self.position_encoding

    @layernorm_embedding.setter
    def layernorm_embedding(self, none):
        """Only None arrives here (``nn.Module`` registers fairseq's LayerNorm as a child itself);
        :meth:`take_fairseq_layer_norm` takes that child out."""

    def take_fairseq_layer_norm(self):
        """fairseq's embedding LayerNorm (``--layernorm-embedding``; None without it), no longer a child of the
        side: the side's position stage owns it."""
        layer_norm = dict(self.named_children()).get(FAIRSEQ_EMBEDDING_SLOT)
        if isinstance(layer_norm, nn.Module):
            delattr(self, FAIRSEQ_EMBEDDING_SLOT)  # nn.Module.__delattr__: unregisters the child
        return layer_norm
