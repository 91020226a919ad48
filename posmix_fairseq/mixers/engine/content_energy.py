"""Content energies, the Transformer's (Vaswani et al. 2017), shared by the mixers that add to them
(Shaw et al., T5 bias, PosNet-Attn, the head-sliced RecPE reading) and by gated multi-head attention:

    e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h)      per head
"""
from torch import Tensor, nn

from .energy import SoftmaxEnergy, head_scaling, split_heads, xavier_linear
from .registry import MixerSpec


class ContentEnergy(SoftmaxEnergy):
    """e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h), per head. Parameters: 2(D^2 + D).

    ``projection(in_dim, out_dim)`` builds W^Q and W^K (a full linear map by default)."""

    def __init__(self, spec: MixerSpec, projection=xavier_linear):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.q_proj: nn.Module = projection(spec.embed_dim, spec.embed_dim)
        self.k_proj: nn.Module = projection(spec.kdim, spec.embed_dim)

    def key_features(self, key: Tensor, key_positions: Tensor) -> Tensor:
        return split_heads(self.k_proj(key), self.num_heads)

    def queries(self, query: Tensor) -> Tensor:
        return split_heads(self.q_proj(query) * self.scaling, self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        return self.queries(query) @ keys.transpose(-1, -2)
