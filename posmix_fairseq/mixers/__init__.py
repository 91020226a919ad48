"""Token mixers: interchangeable modules for the three attention sublayers.

Each family lives in its own module and registers itself with :func:`register_mixer`.
"""
from .base import MIXER_REGISTRY, MixerSpec, TokenMixer, build_mixer, register_mixer  # noqa: F401
from . import content_attention  # noqa: F401  mha (fairseq's MultiheadAttention, or gated)
from . import relative_attention  # noqa: F401  shaw, relattn
from . import position_attention  # noqa: F401  aposnet, rposnet
from . import hard_coded_gaussian  # noqa: F401  gaussian (HC-SA / HC-ALL heads)
from . import no_mixing  # noqa: F401  none (-SA ablations)
from . import fourier  # noqa: F401  FourierNet
from . import linear_mixing  # noqa: F401  LinearNet / gLinearNet
from . import lightconv  # noqa: F401  light convolution and its ablation chain
from . import posnet_attention  # noqa: F401  PosNet-Attn
from . import t5_bias  # noqa: F401  T5 scalar relative bias, AT5
from . import sliced_heads  # noqa: F401  head-sliced MHA (RPEHead / MPRHead first layer)
