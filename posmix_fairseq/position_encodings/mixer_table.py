"""``mixer-table``: the side's aPosNet / rPosNet position table n~ added to the word embeddings too.

    x_j -> x_j + s * n~[p_j],   s = embed_scale for a learned n~, 1 for a sinusoidal one

n~ is the very table (the same parameters) that the side's self-attention mixer, aposnet or rposnet,
reads; another mixer is a build error. This is ``use_pos_embed`` of GPA's released code, hence s
(docs/choices.md, "The released GPA code"); GPA Section 5.2 names only the mixers' tables.
"""
from torch import nn

from ..core.position_tables import LearnedPositionTable, refer_to_shared
from .base import PositionEncodingSpec, register_position_encoding


class MixerTableEmbedding(nn.Module):
    def __init__(self, table: nn.Module, scale: float):
        super().__init__()
        refer_to_shared(self, "_table", table)
        self.scale = scale

    def forward(self, x, frame):
        return x + self.scale * self._table(frame.positions).to(x.dtype)


@register_position_encoding("mixer-table",
                            description="the self-attention mixer's own position table n~ added to the embeddings "
                                        "(aposnet/rposnet; the released GPA code's use_pos_embed)")
def build_mixer_table(spec: PositionEncodingSpec):
    table = spec.mixer_table()
    return MixerTableEmbedding(table, spec.embed_scale if isinstance(table, LearnedPositionTable) else 1.0)
