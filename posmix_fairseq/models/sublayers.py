"""One iterator over the attention sublayers of a posmix (or fairseq) transformer."""
from typing import Iterator, NamedTuple

from torch import nn

from ..core.placement import PLACEMENTS, Placement


class Sublayer(NamedTuple):
    placement: Placement
    layer: int  # 0-based index in its encoder / decoder
    module: nn.Module  # the token mixer (or fairseq's MultiheadAttention)
    path: str  # its state-dict prefix, e.g. "decoder.layers.2.encoder_attn"


def sublayers(model) -> Iterator[Sublayer]:
    """Every attention sublayer, placement by placement (encoder self, decoder self, decoder cross)
    and layer by layer; a layer without the sublayer (``--decoder-cross-heads`` 0) is skipped."""
    for placement in PLACEMENTS:
        owner = placement.owner.name
        for index, layer in enumerate(getattr(model, owner).layers):
            module = getattr(layer, placement.module_attr, None)
            if module is not None:
                yield Sublayer(placement, index, module, f"{owner}.layers.{index}.{placement.module_attr}")
