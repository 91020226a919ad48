"""``mixer-table``: the side's aPosNet / rPosNet position table n~ added to the word embeddings too.

    x_j -> x_j + s * n~[p_j],   s = embed_scale for a learned n~, 1 for a sinusoidal one

n~ is the very table the side's self-attention mixer reads (the same parameters, not a copy), at the
token's true position p_j. This is ``use_pos_embed`` of the released code of Gated position-based
attention (github.com/apptek/posnet-position_based_attention; ``use_pos_embed`` defaults to True in
models/posnet/models/posnet.py and no config turns it off): its ``PositionalEmbedding``
(pytorchmt/pytorchmt/model/modules.py) returns sqrt(D) (E[w] + P[p]) and hands the same P[p] to the
attention, its ``SinusodialPositionalEmbedding`` returns sqrt(D) E[w] + S[p] and hands S[p] on. x here
is already embed_scale * E[w], hence s. The paper (Section 5.2) names only the tables of the mixers,
which is what the ``aposnet`` / ``rposnet`` archs use (``--S-position-encoding none``).

No parameters of its own; the side's self-attention mixer must have an absolute table (aposnet,
rposnet), or building the model is an error.
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
