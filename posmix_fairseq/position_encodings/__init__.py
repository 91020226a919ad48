"""Embedding-level position modules (``--encoder-position-encoding``, ``--decoder-position-encoding``)."""
from .base import POSITION_ENCODING_REGISTRY, register_position_encoding  # noqa: F401
from . import lstm, mixer_table, posnet, recurrent  # noqa: F401
