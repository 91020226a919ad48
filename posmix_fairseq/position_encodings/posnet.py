"""``posnet``: PosNet-Embed, positional kernels at the embeddings (PosNet Eq. 24), in place of the
absolute position embedding:

    H = Dropout(act((X W_1) (x) Phi) W_2) + X,   ((X W_1) (x) Phi)_j = (x_j W_1) Phi[p_j]

W_1 (D x d_p), W_2 (d_p x D), d_p = D / 4 by default (the paper's 128 at D = 512 and 256 at D = 1024, PosNet
Section 5, "Effect of Positional kernel's dimension"), a kernel Phi[p] (d_p x d_p) per position p below
``--<side>-posnet-embed-max-positions`` (a longer sentence is a clear error naming it). p_j is the token's
TRUE position, and each side has its own PosNet: the paper's code shared one and left the decoder
without a position signal. act is ReLU, the released code's (the paper names only sigma); that code
and how this module differs from it: docs/choices.md.
"""
import torch
from fairseq import utils
from torch import nn

from ..core.number_ranges import DROPOUT, POSITIVE_INT
from ..core.position_tables import PositionFigure, apply_position_kernels, position_kernels
from .base import PositionEncodingSpec, register_position_encoding


@register_position_encoding(
    "posnet", description="PosNet-Embed (PosNet Eq. 24): per-position kernels at the embeddings",
    options={
        "posnet-embed-dim": dict(type=POSITIVE_INT, default=None, metavar="D_P",
                                 help="d_p of PosNet-Embed (default: the embedding dim / 4, the paper's 128 at 512 and 256 at "
                                      "1024)"),
        "posnet-embed-max-positions": dict(type=POSITIVE_INT, default=256, metavar="P",
                                           help="positions covered by the PosNet-Embed kernel table (default 256)"),
        "posnet-embed-dropout": dict(type=DROPOUT, default=None, metavar="P",
                                     help="dropout of PosNet-Embed before its residual (default: --dropout)"),
        "posnet-embed-activation": dict(choices=utils.get_available_activation_fns(), default="relu",
                                        help="act of PosNet-Embed (default relu, the paper's released code)"),
    })
class PosNetEmbedding(nn.Module):
    def __init__(self, spec: PositionEncodingSpec):
        super().__init__()
        opts, side = spec.options, spec.side
        d_p = opts["posnet-embed-dim"]
        d_p = int(d_p) if d_p is not None else max(1, spec.embed_dim // 4)
        max_positions = int(opts["posnet-embed-max-positions"])
        self.max_positions_option, self.role = side.flag("posnet-embed-max-positions"), side.role
        dropout = opts["posnet-embed-dropout"]
        dropout = spec.dropout if dropout is None else float(dropout)
        self.w1 = nn.Linear(spec.embed_dim, d_p, bias=False)
        self.w2 = nn.Linear(d_p, spec.embed_dim, bias=False)
        nn.init.xavier_uniform_(self.w1.weight)
        nn.init.xavier_uniform_(self.w2.weight)
        self.kernels = position_kernels(max_positions, 1, d_p)
        self.activation_fn = utils.get_activation_fn(opts["posnet-embed-activation"])
        self.dropout = nn.Dropout(dropout)

    def position_figure(self, positions: int, query_positions=None, weights=None) -> PositionFigure:
        """The Frobenius norm of the kernel Phi[p] of each position p."""
        norms = torch.linalg.matrix_norm(self.kernels[:positions, 0].float(), dim=(-2, -1))
        return PositionFigure("posnet_embed", {"dim": self.kernels.shape[-1], "norms": norms})

    def position_limits(self):
        """The kernels are indexed by the side's positions (the position-limit protocol)."""
        return [(self.role, int(self.kernels.size(0)), self.max_positions_option)]

    def forward(self, x, frame):
        projected = self.w1(x).unsqueeze(2)  # (B, T, 1, d_p)
        kernelled = apply_position_kernels(projected, frame.positions, frame.padding_mask,
                                           self.kernels, self.max_positions_option).squeeze(2)
        return self.dropout(self.w2(self.activation_fn(kernelled))) + x

