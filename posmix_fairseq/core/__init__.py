"""The ground floor shared by the token mixers and the position encodings: padding-aware positions
and their per-forward route, position tables, placements, the generic registry, incremental state.

Mixers (:mod:`posmix_fairseq.mixers`) and position encodings
(:mod:`posmix_fairseq.position_encodings`) both build on this package and never import each other.
"""
