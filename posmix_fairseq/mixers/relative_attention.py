"""Relative position attention: Shaw et al. (2018) and token-position relative attention.

``shaw`` (Shaw et al. 2018, Eqs. 3-4; Gated position-based attention, Table 6 "Shaw"):
    e_nm = (W^Q y_n)(W^K x_m + a^K_nm)^T / sqrt(D_h)
    c_n  = sum_m a_nm (W^V x_m + a^V_nm)
with a^K, a^V learned embeddings of the clipped distance clip(floor(gamma n) - m, K), shared
across heads, one table pair per layer. Parameters: 4(D^2 + D) + 2(2K + 1) D_h.
Variants of the positional-encoding analysis: K-only (``--S-shaw-value-term off``, the a^V term
omitted: 4(D^2 + D) + (2K + 1) D_h) and relative sinusoidal (``--S-position-embedding
sinusoidal``: a^K, a^V are the sinusoids of the clipped distance, no position parameters).

``relattn`` (Gated position-based attention, Section 7.2, "relative attention"): queries from
token content, keys from relative positions only (token-position interactions):
    e_nm = (W^Q y_n)(a^K_nm)^T / sqrt(D_h)
Parameters: 3(D^2 + D) + (2K + 1) D_h (no W^K).
"""
import torch
from torch import Tensor

from .base import MixerSpec, register_mixer
from .content_attention import ContentEnergy
from .energy_attention import Energy, EnergyMixingAttention, head_scaling, split_heads, xavier_linear
from .positions import RelativePositionTable, clipped_relative_index


def gather_relative(scores_per_distance: Tensor, index: Tensor) -> Tensor:
    """(B, H, T, 2K+1) scores per clipped distance, (B, T, S) indices -> (B, H, T, S)."""
    b, h, t, _ = scores_per_distance.shape
    return torch.gather(scores_per_distance, -1, index.unsqueeze(1).expand(b, h, t, index.size(-1)))


def bucket_probabilities(probs: Tensor, index: Tensor, num_buckets: int) -> Tensor:
    """sum of a_nm over the keys m in each clipped-distance bucket: (B, H, T, 2K+1)."""
    b, h, t, s = probs.shape
    out = probs.new_zeros(b, h, t, num_buckets)
    return out.scatter_add_(-1, index.unsqueeze(1).expand(b, h, t, s), probs)


class ShawEnergy(ContentEnergy):
    def __init__(self, spec: MixerSpec, value_term: bool = True):
        super().__init__(spec)
        self.k, self.length_ratio = spec.max_relative_position, spec.length_ratio
        head_dim = spec.embed_dim // spec.num_heads
        self.relative_keys = RelativePositionTable(self.k, head_dim, spec.position_embedding)
        self.relative_values = (RelativePositionTable(self.k, head_dim, spec.position_embedding)
                                if value_term else None)

    def logits(self, query, query_positions, keys, key_positions):
        q = self.queries(query)
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        relative = gather_relative(q @ self.relative_keys().to(q.dtype).t(), index)
        return q @ keys.transpose(-1, -2) + relative

    def value_term(self, probs, query_positions, key_positions):
        if self.relative_values is None:
            return None
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        buckets = bucket_probabilities(probs, index, 2 * self.k + 1)
        return buckets @ self.relative_values().to(probs.dtype)


class RelativeKeyEnergy(Energy):
    """e_nm = (W^Q y_n)(a^K_nm)^T / sqrt(D_h): content queries, relative-position keys."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.num_heads = spec.num_heads
        head_dim = spec.embed_dim // spec.num_heads
        self.scaling = head_scaling(head_dim)
        self.k, self.length_ratio = spec.max_relative_position, spec.length_ratio
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.relative_keys = RelativePositionTable(self.k, head_dim, spec.position_embedding)

    def logits(self, query, query_positions, keys, key_positions):
        q = split_heads(self.q_proj(query) * self.scaling, self.num_heads)
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(q @ self.relative_keys().to(q.dtype).t(), index)


@register_mixer("shaw", gated_by_default=False, uses_positions=True,
                description="Shaw et al. (2018) relative position representations (K and V terms)",
                options={"shaw-value-term": dict(choices=("on", "off"), default="on",
                                                 help="the a^V term of Shaw Eq. 3 (off: K-only, the positional-"
                                                      "encoding analysis' variant; default on)")})
def build_shaw(spec: MixerSpec):
    return EnergyMixingAttention(spec, ShawEnergy(spec, value_term=spec.options["shaw-value-term"] == "on"))


@register_mixer("relattn", gated_by_default=False, uses_positions=True,
                description="token-position relative attention (content queries, relative-position keys)")
def build_relattn(spec: MixerSpec):
    return EnergyMixingAttention(spec, RelativeKeyEnergy(spec))
