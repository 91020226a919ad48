"""``learned``: fairseq's learned position embeddings; beyond the table a clear error names the option that sizes it.

The additive embeddings are fairseq's own modules, switched per side (see :mod:`.base`)."""
from .base import register_position_encoding


@register_position_encoding("learned", token_positions="learned",
                            description="learned absolute position embeddings (one vector per position)")
def learned_positions(spec):
    return None
