"""The machinery every token mixer is built from; it imports no variant. How a sublayer mixes is a strategy
in :mod:`posmix_fairseq.mixers.paths` (docs/contributing.md, Layout)."""
from .registry import (MIXER_REGISTRY, MixerSpec, SideResources, build_mixer, frozen_mixers,  # noqa: F401
                       max_relative_position, max_relative_position_option, position_table_option, register_mixer,
                       relative_embeddings_options, relative_position_table)
from .energy import (BiasedContentEnergy, CentredEnergy, ContentEnergy, DirectWeights, Energy,  # noqa: F401
                     SoftmaxEnergy, head_scaling, split_heads, xavier_linear)
from .values import Values  # noqa: F401
from .table_energy import (AbsoluteTableEnergy, RelativeTableEnergy, bucket_probabilities,  # noqa: F401
                           gather_relative, relative_scores)
from .position_queries import (PositionQueries, absolute_table_options, reads_absolute_table,  # noqa: F401
                               shared_table, table_norm)
from .frozen_energy import FrozenAbsoluteEnergy, FrozenRelativeEnergy  # noqa: F401
from .attention import EnergyMixingAttention, TokenMixer  # noqa: F401
