"""The machinery every token mixer is built from (it imports no variant):

- registry.py        MixerSpec, MIXER_REGISTRY, register_mixer, build_mixer
- token_mixer.py     TokenMixer: fairseq's attention interface
- shared_options.py  options several mixers declare (K, position table, relative embeddings)
- energy.py          the Energy contract: mixing_weights(); SoftmaxEnergy / DirectWeights
- content_energy.py  (W^Q y_n)(W^K x_m)^T, the Transformer's energies
- values.py          the Values hook: v_m (W^V, gated LayerNorm(GeLU)), relative term
- gating.py          the Eq. 4 output gate
- attention.py       EnergyMixingAttention: Energy + Values + a mixing path + gate + W^O
- position_queries.py  q_n = W^Q n~ (aPosNet, rPosNet)
- table_energy.py    position-only energies as tables (energy_rows, energy_table): trained and frozen
- frozen_energy.py   search-time aPosNet / rPosNet energies: H x N x N / H x N x (2K+1) tables
- relative_scores.py gather / bucket scores per clipped distance

How a sublayer mixes (dense, rPosNet's window form, constant-state decoding, the Gaussian window)
is a strategy in :mod:`posmix_fairseq.mixers.paths`.
"""
from .registry import MIXER_REGISTRY, MixerEntry, MixerSpec, build_mixer, frozen_mixers, register_mixer  # noqa: F401
from .token_mixer import TokenMixer  # noqa: F401
from .shared_options import (DEFAULT_MAX_RELATIVE_POSITION, POSITION_TABLE_KINDS, max_relative_position,  # noqa: F401
                             max_relative_position_option, position_table_option, relative_embeddings_options,
                             relative_position_table)
from .energy import (CentredEnergy, DirectWeights, Energy, SoftmaxEnergy,  # noqa: F401
                     head_scaling, split_heads, xavier_linear)
from .content_energy import ContentEnergy  # noqa: F401
from .values import Values  # noqa: F401
from .gating import ContextGate  # noqa: F401
from .relative_scores import bucket_probabilities, gather_relative  # noqa: F401
from .table_energy import AbsoluteTableEnergy, RelativeTableEnergy  # noqa: F401
from .position_queries import (PositionQueries, absolute_table_options, reads_absolute_table, shared_table,  # noqa: F401
                               table_norm)
from .frozen_energy import FrozenAbsoluteEnergy, FrozenRelativeEnergy  # noqa: F401
from .attention import EnergyMixingAttention  # noqa: F401
