"""What a module with position-only parts shows in the pictures of what a model learned (``posmix-plot``):
its ``position_figure(positions, query_positions, weights)`` (P, a sentence of P tokens; the queries
whose weight profiles are shown; ``weights()`` the sublayer's (H, P, P) mixing weights for such a
sentence) answers a :class:`PositionFigure` or None: its family (``rposnet``, ``aposnet``, ``gaussian``,
``linear``, ``t5``, ``posnet_attn``, ``posnet_embed``), the fields of the family's block and of this
layer's entry, and the object a table shared by several layers is (None for a per-layer table).
"""
from typing import Any, Dict, NamedTuple, Optional


class PositionFigure(NamedTuple):
    family: str
    block: Dict[str, Any]
    layer: Optional[Dict[str, Any]] = None
    shared: Optional[object] = None
