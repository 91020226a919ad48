"""Token mixers: interchangeable modules for the three attention sublayers.

Each mixer lives in the module named like it and registers itself with :func:`register_mixer`.
"""
from .base import MIXER_REGISTRY, MixerSpec, TokenMixer, build_mixer, register_mixer  # noqa: F401
from . import mha  # noqa: F401  multi-head attention (fairseq's module, or gated)
from . import shaw  # noqa: F401  Shaw et al. relative positions
from . import relattn  # noqa: F401  token-position relative attention
from . import aposnet  # noqa: F401  aPosNet
from . import rposnet  # noqa: F401  rPosNet
from . import gaussian  # noqa: F401  hard-coded Gaussian heads (HC-SA / HC-ALL)
from . import none  # noqa: F401  no mixing (-SA ablations)
from . import fourier  # noqa: F401  FourierNet
from . import linear  # noqa: F401  LinearNet / gLinearNet
from . import lightconv  # noqa: F401  light convolution and its ablation chain
from . import posnet  # noqa: F401  PosNet-Attn
from . import t5bias  # noqa: F401  T5 scalar relative bias, AT5
from . import sliced_mha  # noqa: F401  head-sliced MHA (RPEHead / MPRHead first layer)
