"""``rposnet``: rPosNet of GPA Eqs. 9-10. The energies depend on positions only, never on token content:

    e_nm = (W^Q n~)(d~_nm)^T / sqrt(D_h),    d~_nm = Emb_rel(clip(floor(gamma n) - m, K))

n~ is the absolute query-position table shared by the layers of a side (learned by default, GPA
Section 5.2); W^Q and Emb_rel ((2K+1) x D, head h uses slice h: GPA Table 8) are per layer; gamma is
the training-set length ratio in cross-attention (GPA Section 4.2). Gating (Eq. 4) is on by default.
How its sublayers can run is declared here (MIXING, DECODE; kernels/choice.py decides, with
``--<sublayer>-rposnet-impl`` first: docs/gpu.md, "What runs on a GPU"); decoder self-attention always decodes with
the constant state (the K most recent values and the sum of the older ones).
"""
from torch import Tensor

from ..core.placement import PLACEMENTS
from ..kernels.choice import SublayerKernels, choose, declare
from .engine import (EnergyMixingAttention, FrozenRelativeEnergy, MixerSpec, PositionQueries, RelativeTableEnergy,
                     SideResources, absolute_table_options, max_relative_position, max_relative_position_option,
                     register_mixer, relative_embeddings_options, relative_position_table)
from .paths.constant_state import ConstantStateDecoding
from .paths.position_table import PositionTableMixing
from .paths.rposnet_band import RPosNetBandMixing

#: the mixing: dense ((T, S) energies) or the window form (band + far sums, GPA Eq. 10; mixers/paths/rposnet_band.py)
MIXING = declare("mixing", "rposnet_impl", ("dense", "window"), triton="window", gpu_default="dense",
                 why="H200, bf16, D = 512: fwd+bwd at N = 64 dense 3.51 ms, Triton window 4.45 ms; training "
                     "67,606 against 61,563 words/s (docs/gpu.md, GPU figures). CPU: the PyTorch window form is "
                     "slower than dense below N ~ 1024 (docs/search-time.md)")
#: decoder self-attention step by step: the decode-weight table, or the general step from the energy row
#: (mixers/paths/constant_state.py)
DECODE = declare("decode", "rposnet_decode", ("table", "triton"), triton="triton", gpu_default="table",
                 why="CPU: the decode-weight table makes a step one batched product, where the Triton step "
                     "recomputes the softmax of every layer at every step; no GPU figure compares them yet")
RPOSNET_IMPL_CHOICES = ("auto", *MIXING.values, "triton")
DEFAULT_IMPL = "auto"  # dense on the CPU, chosen by measurement (docs/search-time.md); on a GPU, docs/gpu.md


class RelativePositionEnergy(PositionQueries, RelativeTableEnergy):
    """rPosNet, Eqs. 9-10."""

    def __init__(self, spec: MixerSpec, resources: SideResources):
        super().__init__(spec, resources)
        self.k, self.length_ratio = max_relative_position(spec), spec.length_ratio
        self.relative_embeddings = relative_position_table(spec, self.k, "learned")

    def energy_table(self, num_query_positions: int) -> Tensor:
        """(H, Pq, 2K+1) energies of Eq. 10 for query positions n < Pq and each clipped distance
        index j = clip(floor(gamma n) - m, K) + K: E[h, n, j] = q_n^h . Emb_rel(j - K)."""
        q = self.position_query_table(num_query_positions)  # (H, Pq, D_h)
        return q @ self.relative_embeddings().to(q.dtype).transpose(-1, -2)

    def energy_rows(self, query_positions: Tensor) -> Tensor:
        q = self.position_queries(self.q_proj.weight, query_positions)  # (B, H, T, D_h)
        return q @ self.relative_embeddings().to(q.dtype).transpose(-1, -2)

    def decode_weight_limit(self):
        return getattr(self.query_table, "max_positions", None)  # a learned n~ table's size; sinusoids: any


@register_mixer("rposnet", placements=PLACEMENTS, gated_by_default=True, uses_positions=True, frozen_energy=FrozenRelativeEnergy,
                description="rPosNet (GPA Eqs. 9-10): energies from query positions and clipped relative distances",
                equation="(W^Q n~)(d~_nm)^T, d~_nm = Emb_rel(clip(floor(γn) − m, K)) (GPA Eqs. 9-10)",
                parameters="3(D²+D) + (2K+1)D sliced (GPA Table 8 with the gate); + (2K+1)D_h shared",
                options={**max_relative_position_option(), **absolute_table_options("learned"),
                         **relative_embeddings_options("sliced"),
                         "rposnet-impl": dict(choices=RPOSNET_IMPL_CHOICES, default=DEFAULT_IMPL,
                                              help="rPosNet mixing: dense ((T, S) energies, the reference); window "
                                                   "(2K+1 band keys + far sums, O(T (2K+3) D_h); no attention "
                                                   "dropout; a call that asks for weights runs dense); auto: dense on "
                                                   "the CPU, the GPU defaults on a GPU (docs/gpu.md); triton: the "
                                                   "window form, decoding step and gating by the Triton kernels, an "
                                                   f"error where they cannot run (default {DEFAULT_IMPL})")})
def build_rposnet(spec: MixerSpec, resources: SideResources):
    # a checkpoint stored without the option reads its default, auto: dense on the CPU, as it was trained
    kernels = rposnet_kernels(spec.placement, spec.options["rposnet-impl"], spec.gated)
    return EnergyMixingAttention(spec, resources, spec.energy(RelativePositionEnergy, resources),
                                 paths=rposnet_paths(spec.placement, kernels), sublayer_kernels=kernels)


def rposnet_kernels(placement, impl: str, gated: bool = False) -> SublayerKernels:
    """The kernels of a sublayer at ``placement`` whose ``--<sublayer>-rposnet-impl`` is ``impl`` (checked); decoder
    self-attention has the decoding step too."""
    decodes = placement.causal and not placement.cross
    return choose((MIXING, DECODE) if decodes else (MIXING,), impl, placement.flag("rposnet-impl"), gated)


def rposnet_paths(placement, kernels):
    """Constant-state decoding where the sublayer has a decoding step, then the window form where ``kernels``
    (a :class:`SublayerKernels`, or an ``--<sublayer>-rposnet-impl`` value to choose one) runs it on some device,
    then the dense weights from the energy table (a full forward); dense mixing closes every list."""
    kernels = rposnet_kernels(placement, kernels) if isinstance(kernels, str) else kernels
    paths = [ConstantStateDecoding(DECODE)] if kernels.cpu.of(DECODE) else []
    return paths + ([RPosNetBandMixing(MIXING)] if kernels.may_run(MIXING, "window") else []) + [PositionTableMixing()]
