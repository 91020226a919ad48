"""``none``: no position embeddings (the model has no position signal unless a mixer gives one).

The additive embeddings are fairseq's own modules, switched per side (see :mod:`.base`)."""
from .base import register_position_encoding


@register_position_encoding("none", description="no position embeddings")
def no_positions(spec):
    return None
