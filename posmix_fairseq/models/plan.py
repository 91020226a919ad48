"""The build plan of one encoder or decoder: the mixer of each (sublayer, layer index), with its
options, and the side's embedding-level position module."""
import itertools
import math

import torch
from torch import Tensor, nn

from ..core.placement import DECODER_CROSS, ENCODER_SELF, SELF_ATTENTION, SIDES, Side
from ..core.position_tables import SharedPositionTables
from ..core.positions import PositionRoute
from ..core.shared_parameters import SharedParameters
from ..mixers import MIXER_REGISTRY, MixerSpec, SideResources, build_mixer
from ..mixers.engine import ContentEnergy, EnergyMixingAttention, Values, reads_absolute_table, shared_table
from ..mixers.engine.frozen_energy import FROZEN_OPTION
from ..position_encodings.base import POSITION_ENCODING_REGISTRY, EmbeddingStage, PositionEncodingSpec
from ..position_encodings.recurrent import SLICED_LEGACY
from .options import cross_heads, legacy_readings, read_options


class HeadSlicedLinear(nn.Module):
    """A block-diagonal linear map: output slice h = input slice h @ W_h + b_h (D/H x D/H blocks)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.weight = nn.Parameter(torch.empty(num_heads, self.head_dim, self.head_dim))
        self.bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        for block in self.weight:
            nn.init.xavier_uniform_(block)

    def forward(self, x: Tensor) -> Tensor:
        sliced = x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)
        out = torch.einsum("...hd,hde->...he", sliced, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        return out.reshape(x.shape)


def build_sliced_attention(spec: MixerSpec, resources: SideResources):
    """Multi-head attention (ungated) whose head h is computed from slice h of its input: the first
    self-attention layer of RecPE models stored before the defaults version (their legacy reading
    ``rpe-reading sliced-legacy``, which only their upgrade sets).

    RecPE (Chen et al. 2019) Eqs. 4-5 feed self-attention m_j = [P : R] (RPEHead) or
    [p^1 : r^1, ..., p^H : r^H] (MPRHead); here head h projects only its own D/H-dim slice m^h:

        head_h = softmax((m^h W^Q_h)(m^h W^K_h)^T / sqrt(D_h)) (m^h W^V_h),   out = [head_1..head_H] W^O

    so with d_r = t D / H exactly t heads see R (RPEHead), or every head its own slice of P and R (MPRHead).
    The paper projects all of m_j in every head, as its parameter counts confirm; this reading is kept
    so those checkpoints load as trained. Parameters: 3 (D^2 / H + D) + (D^2 + D).
    """
    if spec.kdim != spec.embed_dim:
        raise ValueError(f"the head-sliced first layer of {spec.placement} needs equal key and model dims "
                         f"({spec.kdim} != {spec.embed_dim})")

    def sliced(in_dim, out_dim):
        return HeadSlicedLinear(out_dim, spec.num_heads)
    return EnergyMixingAttention(spec, resources, ContentEnergy(spec, projection=sliced),
                                 Values.of_spec(spec, projection=HeadSlicedLinear(spec.embed_dim, spec.num_heads)))


class MixerPlan:
    """Builds the mixers of one encoder or decoder (``side``). fairseq builds the layers in order and its
    hooks take no index: ``layer_indices`` counts them. ``resources`` is what the side lends its mixers: the
    tables its layers share and the route that carries the positions of each forward call."""

    def __init__(self, cfg, side: Side):
        self.cfg, self.side = cfg, side
        self.resources = SideResources(SharedPositionTables(), PositionRoute(side.name))
        self.shared_parameters = SharedParameters(self.resources.shared_tables.tables, side.name)
        self.layer_indices = itertools.count()

    def spec(self, placement, layer_idx: int) -> MixerSpec:
        cfg = self.cfg
        name = placement.read(cfg, "mixer", "mha")
        entry = MIXER_REGISTRY.get_at(name, placement, "mixer")
        gating = placement.read(cfg, "gating", "default")
        side_cfg = cfg.encoder if placement == ENCODER_SELF else cfg.decoder
        num_heads = cross_heads(cfg)[layer_idx] if placement == DECODER_CROSS else side_cfg.attention_heads
        length_ratio = 1.0
        if placement.cross and entry.uses_positions:
            if getattr(cfg, "length_ratio", None) is None:
                raise ValueError("--length-ratio is required by the position-aware --decoder-cross-mixer "
                                 f"{name!r} (build the model through fairseq to compute it from the data)")
            length_ratio = float(cfg.length_ratio)
        # search-time checkpoints (posmix-freeze): the sublayers whose mixer declares a frozen energy
        frozen = {side.role: side.read(cfg, FROZEN_OPTION) for side in SIDES
                  if side.read(cfg, FROZEN_OPTION) is not None}
        frozen = frozen if frozen and entry.frozen_energy is not None else None
        return MixerSpec(
            name=name, placement=placement, layer_idx=layer_idx, num_layers=side_cfg.layers,
            embed_dim=side_cfg.embed_dim, num_heads=num_heads, kdim=getattr(cfg, placement.key_side.name).embed_dim,
            attention_dropout=cfg.attention_dropout, dropout=cfg.dropout,
            gated=entry.gated_by_default if gating == "default" else gating == "on", length_ratio=length_ratio,
            max_query_positions=getattr(cfg, placement.query_side.max_positions_attr),
            max_key_positions=getattr(cfg, placement.key_side.max_positions_attr), frozen_positions=frozen,
            # options a checkpoint made before an option existed lacks take its default
            options=read_options(cfg, placement, entry))

    def build(self, placement, layer_idx: int):
        spec = self.spec(placement, layer_idx)
        if not placement.cross and layer_idx == 0 and \
                legacy_readings(self.cfg, placement.owner).get("rpe-reading") == SLICED_LEGACY:
            return build_sliced_attention(spec, self.resources)
        return build_mixer(spec, self.resources)

    def self_mixer_table(self):
        """The side's self-attention mixer's absolute position table n~ (built here if its layers did not,
        as in a search-time model)."""
        placement = SELF_ATTENTION[self.side]
        spec = self.spec(placement, 0)
        if not reads_absolute_table(spec):
            raise ValueError(f"{self.side.flag('position-encoding')} mixer-table adds the self-attention mixer's "
                             f"absolute position table n~ to the embeddings, but {placement.flag('mixer')} "
                             f"{spec.name} has none: use aposnet or rposnet, or another position encoding")
        return shared_table(spec, self.resources, self.side)

    def position_encoding(self, layer_norm_embedding):
        """The side's :class:`EmbeddingStage`: its position encoding (none for fairseq's additive
        encodings), then fairseq's embedding LayerNorm ``layer_norm_embedding`` (or None)."""
        cfg, side = self.cfg, self.side
        name = side.read(cfg, "position-encoding", "sinusoidal")
        entry = POSITION_ENCODING_REGISTRY.get(name, side.flag("position-encoding"))
        side_cfg = getattr(cfg, side.name)
        spec = PositionEncodingSpec(
            name=name, side=side, embed_dim=side_cfg.embed_dim, num_heads=side_cfg.attention_heads,
            dropout=cfg.dropout, options=read_options(cfg, side, entry),
            embed_scale=1.0 if cfg.no_scale_embedding else math.sqrt(side_cfg.embed_dim),
            mixer_table=self.self_mixer_table)
        return EmbeddingStage(entry.builder(spec), self.resources.route, layer_norm_embedding)
