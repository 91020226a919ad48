"""``mprhead``: MPRHead (RecPE Eq. 5): every head gets a slice of P and of R.
See :mod:`.recurrent` for the equations and choices."""
from .base import PositionEncodingSpec, register_position_encoding
from .recurrent import RPE_OPTIONS, RecurrentPositionalEmbedding


@register_position_encoding("mprhead", options=RPE_OPTIONS,
                            description="MPRHead (Chen et al. 2019, Eq. 5): every head gets a slice of P and of R")
def build_mprhead(spec: PositionEncodingSpec):
    return RecurrentPositionalEmbedding(spec, per_head=True)
