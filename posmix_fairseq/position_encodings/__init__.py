"""Embedding-level position modules (``--encoder-position-encoding``, ``--decoder-position-encoding``).

Each family lives in its own module and registers itself with :func:`register_position_encoding`.
"""
from .base import POSITION_ENCODING_REGISTRY, register_position_encoding  # noqa: F401
from . import absolute  # noqa: F401  sinusoidal, learned, none
from . import lstm  # noqa: F401  LSTM positional encoding
from . import recurrent  # noqa: F401  RPEHead / MPRHead
from . import posnet_embed  # noqa: F401  PosNet-Embed
