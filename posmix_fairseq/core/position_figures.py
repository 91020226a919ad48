"""What a module with position-only parts shows in the pictures of what a model learned (``posmix-plot``).

A module that has such parts answers ``position_figure(positions, query_positions, weights)`` with a
:class:`PositionFigure` (or None): its family (``rposnet``, ``aposnet``, ``gaussian``, ``linear``,
``t5``, ``posnet_attn``, ``posnet_embed``), the fields of the family's block, the fields of this
layer's entry, and the object a table shared by several layers is (None for a per-layer table).
``positions`` is P (a sentence of P tokens), ``query_positions`` the queries whose weight profiles
are shown, and ``weights()`` the sublayer's (H, P, P) mixing weights for such a sentence.
"""
from typing import Any, Dict, NamedTuple, Optional


class PositionFigure(NamedTuple):
    family: str
    block: Dict[str, Any]
    layer: Optional[Dict[str, Any]] = None
    shared: Optional[object] = None
