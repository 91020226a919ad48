"""Embedding-level position modules (``--encoder-position-encoding``, ``--decoder-position-encoding``).

Each encoding lives in the module named like it and registers itself with
:func:`register_position_encoding`.
"""
from .base import POSITION_ENCODING_REGISTRY, register_position_encoding  # noqa: F401
from . import sinusoidal, learned, none  # noqa: F401  fairseq's additive embeddings, or none
from . import lstm  # noqa: F401  LSTM positional encoding
from . import rpehead, mprhead  # noqa: F401  recurrent positional embedding
from . import posnet  # noqa: F401  PosNet-Embed
from . import mixer_table  # noqa: F401  the aPosNet / rPosNet table n~ at the embeddings too
