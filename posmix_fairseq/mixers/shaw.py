"""``shaw``: relative position representations (Shaw et al. 2018, Eqs. 3-4; GPA Table 6 "Shaw"):

    e_nm = (W^Q y_n)(W^K x_m + a^K_nm)^T / sqrt(D_h)
    c_n  = sum_m a_nm (W^V x_m + a^V_nm)

with a^K, a^V learned embeddings of the clipped distance clip(floor(gamma n) - m, K), one table pair
per layer, shared across heads (Shaw et al.) or sliced (``--<sublayer>-relative-embedding-heads``). Variants:
K-only (``--<sublayer>-shaw-value-term off``: GPA Table 8's "(2K+1) D + 4D^2", the ``shaw_<size>`` archs) and
relative sinusoidal (``--<sublayer>-position-table sinusoidal``, PEA Eqs. 8-9; no parameters). Parameters of
each layout: docs/architectures.md; why GPA's Shaw has no a^V: docs/choices.md.
"""
from torch import nn

from ..core.placement import PLACEMENTS
from ..core.positions import clipped_relative_index
from .engine import (ContentEnergy, EnergyMixingAttention, MixerSpec, SideResources, Values, bucket_probabilities,
                     gather_relative, max_relative_position, max_relative_position_option, position_table_option,
                     register_mixer, relative_embeddings_options, relative_position_table, relative_scores)


class ShawEnergy(ContentEnergy):
    """e_nm = (W^Q y_n)(W^K x_m + a^K_nm)^T / sqrt(D_h) (Shaw et al. Eq. 4)."""

    def __init__(self, spec: MixerSpec):
        super().__init__(spec)
        self.k, self.length_ratio = max_relative_position(spec), spec.length_ratio
        self.relative_keys = relative_position_table(spec, self.k, spec.options["position-table"])

    def logits(self, query, query_positions, keys, key_positions):
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        relative = gather_relative(relative_scores(query, self.relative_keys()), index)
        return query @ keys.transpose(-1, -2) + relative


class ShawValues(Values):
    """Values plus the relative term sum_m a_nm a^V_nm (Shaw et al. Eq. 3)."""

    def __init__(self, projection, embed_dim, num_heads, gated, k: int, length_ratio: float, table: nn.Module):
        super().__init__(projection, embed_dim, num_heads, gated)
        self.k, self.length_ratio = k, length_ratio
        self.relative_values = table

    def relative_term(self, weights, query_positions, key_positions):
        index = clipped_relative_index(query_positions, key_positions, self.length_ratio, self.k)
        buckets = bucket_probabilities(weights, index, 2 * self.k + 1)
        return buckets @ self.relative_values().to(weights.dtype)


@register_mixer("shaw", placements=PLACEMENTS, gated_by_default=False, uses_positions=True,
                description="Shaw et al. (2018) relative position representations (K and V terms)",
                equation="(W^Q y_n)(W^K x_m + a^K_nm)^T, context + Σ_m a_nm a^V_nm (Shaw et al. Eqs. 3-4)",
                parameters="4(D²+D) + 2(2K+1)D_h shared; 4(D²+D) + (2K+1)D sliced without a^V (GPA Table 8)",
                options={**max_relative_position_option(), **position_table_option("learned"),
                         **relative_embeddings_options("shared"),
                         "shaw-value-term": dict(choices=("on", "off"), default="on",
                                                 help="the a^V term of Shaw Eq. 3 (off: K-only, the positional-"
                                                      "encoding analysis' variant; default on)")})
def build_shaw(spec: MixerSpec, resources: SideResources):
    energy = ShawEnergy(spec)
    if spec.options["shaw-value-term"] == "off":
        return EnergyMixingAttention(spec, resources, energy)
    values = ShawValues.of_spec(spec, k=energy.k, length_ratio=spec.length_ratio,
                                table=relative_position_table(spec, energy.k, spec.options["position-table"]))
    return EnergyMixingAttention(spec, resources, energy, values)
