"""``relattn``: token-position relative attention (GPA Section 7.2): content queries, relative keys:

    e_nm = (W^Q y_n)(a^K_nm)^T / sqrt(D_h)

Parameters: 3(D^2 + D) + (2K + 1) D with the relative keys sliced over the heads (one D-vector per
distance; the default, GPA Table 6 "Rel. Self-Attention" 63.6M needs it), 3(D^2 + D) + (2K + 1) D_h
with ``--<sublayer>-relative-embedding-heads shared`` (no W^K).
"""
from ..core.placement import PLACEMENTS
from ..core.positions import clipped_relative_index
from .engine import (EnergyMixingAttention, MixerSpec, SideResources, SoftmaxEnergy, gather_relative, head_scaling,
                     max_relative_position, max_relative_position_option, position_table_option, register_mixer,
                     relative_embeddings_options, relative_position_table, relative_scores, split_heads,
                     xavier_linear)


class RelativeKeyEnergy(SoftmaxEnergy):
    """e_nm = (W^Q y_n)(a^K_nm)^T / sqrt(D_h): content queries, relative-position keys."""

    def __init__(self, spec: MixerSpec):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.k, self.length_ratio = max_relative_position(spec), spec.length_ratio
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.relative_keys = relative_position_table(spec, self.k, spec.options["position-table"])

    def query_features(self, query, query_positions):
        """(B, H, T, D_h) W^Q y_n / sqrt(D_h)."""
        return split_heads(self.q_proj(query) * self.scaling, self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        return gather_relative(relative_scores(query, self.relative_keys()), index)


@register_mixer("relattn", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="token-position relative attention (GPA Section 7.2): content queries, relative-position "
                            "keys",
                equation="(W^Q y_n)(a^K_nm)^T",
                parameters="3(D²+D) + (2K+1)D sliced; 3(D²+D) + (2K+1)D_h shared",
                options={**max_relative_position_option(), **position_table_option("learned"),
                         **relative_embeddings_options("sliced")})
def build_relattn(spec: MixerSpec, resources: SideResources):
    return EnergyMixingAttention(spec, resources, RelativeKeyEnergy(spec))
