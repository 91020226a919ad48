"""``--bf16`` decoding: ``fairseq-generate`` converts models for ``--fp16`` only, :class:`Bf16Inference`
converts the plugin's model for ``--bf16`` (docs/multi-gpu.md, bf16). Training in bf16 without torch_xla
needs fairseq's argument parsing corrected: :func:`posmix_fairseq.fairseq_patches.install_bf16_parse_fix`."""
import torch


class Bf16Inference:
    """Model mixin: ``--bf16`` (without ``--fp16``) converts the model to bfloat16 for decoding."""

    def prepare_for_inference_(self, cfg):
        super().prepare_for_inference_(cfg)
        common = getattr(cfg, "common", None)
        if common is not None and getattr(common, "bf16", False) and not getattr(common, "fp16", False):
            self.to(dtype=torch.bfloat16)
