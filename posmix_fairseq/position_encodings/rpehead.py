"""``rpehead``: RPEHead (RecPE Eq. 4): [P : R], t heads fed by R.
See :mod:`.recurrent` for the equations and choices."""
from .base import PositionEncodingSpec, register_position_encoding
from .recurrent import RPE_OPTIONS, RecurrentPositionalEmbedding


@register_position_encoding("rpehead", options=RPE_OPTIONS,
                            description="RPEHead (Chen et al. 2019, Eq. 4): t heads fed by a recurrent embedding")
def build_rpehead(spec: PositionEncodingSpec):
    return RecurrentPositionalEmbedding(spec, per_head=False)
