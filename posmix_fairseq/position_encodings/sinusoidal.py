"""``sinusoidal``: fairseq's sinusoidal position embeddings (Vaswani et al. 2017), the default.

The additive embeddings are fairseq's own modules, switched per side (see :mod:`.base`)."""
from .base import register_position_encoding


@register_position_encoding("sinusoidal", token_positions="sinusoidal",
                            description="sinusoidal absolute position embeddings (Vaswani et al. 2017)")
def sinusoidal_positions(spec):
    return None
