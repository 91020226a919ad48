"""Token mixers: fairseq's attention interface (:class:`TokenMixer`) and the generic mixing engine
(:class:`EnergyMixingAttention`, docs/contributing.md, "One way to mix, several paths"):

    a_nm   = energy.mixing_weights(...)                       (per head; softmax or direct)
    c_n    = sum_m a_nm v_m  (+ values.relative_term, e.g. Shaw et al. Eq. 3)
    out_n  = W^O c_n                      ungated
    out_n  = W^O (c_n * GeLU(W^G y_n))    gated, with v_m = LayerNorm(GeLU(W^V x_m))  (GPA Eq. 4)

How c_n is computed is the first of the mixer's paths that serves the call (:mod:`.mixing`); the engine
keeps what every path shares: the positions of the call, the values and key features with their
incremental cache, the gate and W^O.
"""
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ...core.incremental import BatchFirstIncrementalState
from ...core.positions import PositionFrame
from ...kernels.choice import SublayerKernels, choose
from ...kernels.dispatch import KernelBackendError
from .energy import Energy, xavier_linear
from .mixing import DenseMixing, MixingCall, MixingPath
from .registry import MixerSpec, SideResources
from .values import ContextGate, Values


class TokenMixer(BatchFirstIncrementalState):
    """A mixer in place of one attention sublayer, called as fairseq calls its ``MultiheadAttention``:
    query (T, B, D), key/value (S, B, kdim), key_padding_mask (B, S) True at padding, attn_mask an additive
    (T, S) mask (0 or -inf). fairseq's decoder layer reads ``num_heads`` and ``head_dim``; beam search
    calls ``reorder_incremental_state``. Positions come from the running forward's ``PositionFrame``."""

    #: the mixer stands for a removed sublayer (it adds 0): the layer replaces its LayerNorm by the identity
    removes_sublayer = False

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by the number of attention heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads


class EnergyMixingAttention(TokenMixer):
    """A token mixer made of an :class:`Energy`, the (gated) values, its mixing paths and W^O."""

    def __init__(self, spec: MixerSpec, resources: SideResources, energy: Energy, values: Optional[Values] = None,
                 paths: Sequence[MixingPath] = (), sublayer_kernels: Optional[SublayerKernels] = None):
        super().__init__(spec.embed_dim, spec.num_heads)
        self.placement = spec.placement
        self.attention_dropout = spec.attention_dropout
        self.energy = energy
        self.values = values if values is not None else Values.of_spec(spec)
        self.out_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.gating = ContextGate(spec.embed_dim) if spec.gated else None
        self.use_paths(paths)
        # how this sublayer runs on the CPU and on a GPU, settled now (kernels/choice.py)
        self.sublayer_kernels = sublayer_kernels if sublayer_kernels is not None else choose(gated=spec.gated)
        self.values.sublayer_kernels = self.sublayer_kernels
        if self.gating is not None:
            self.gating.sublayer_kernels = self.sublayer_kernels
        self._route = resources.route  # not a module: the encoder/decoder owns it

    def use_paths(self, paths: Sequence[MixingPath]):
        """Mix with ``paths`` (tried in order), then dense mixing for the calls they decline."""
        self.paths = nn.ModuleList([*paths, DenseMixing()])

    def extra_repr(self) -> str:
        return f"kernels: {self.sublayer_kernels}"

    @property
    def path_names(self) -> Tuple[str, ...]:
        return tuple(path.name for path in self.paths)

    def keys_and_values(self, call: MixingCall, key_features: bool = True):
        """Values, cached key features (if ``key_features``), key positions and key padding, extended (self-
        attention) or reused (cross-attention, ``static_kv``: computed once) across decoding steps."""
        buffer = self._get_input_buffer(call.incremental_state) if call.incremental_state is not None else None
        cached = buffer is not None and "values" in buffer
        if not cached or not call.static_kv:
            key_positions, key_padding_mask = self._key_side(call.frame, call.key, call.key_padding_mask)
            new = {"values": self.values(call.value, key_positions, key_padding_mask),
                   "keys": self.energy.key_features(call.key, key_positions) if key_features else None,
                   "key_positions": key_positions, "key_padding_mask": key_padding_mask}
            new = {name: tensor for name, tensor in new.items() if tensor is not None}
            if cached:  # (B, H, S, D_h) values and keys, (B, S) positions and padding
                new = {name: torch.cat([buffer[name], tensor], dim=2 if tensor.dim() == 4 else 1)
                       for name, tensor in new.items()}
            if buffer is not None:
                self._set_input_buffer(call.incremental_state, new)
            buffer = new
        return buffer["values"], buffer.get("keys"), buffer["key_positions"], buffer["key_padding_mask"]

    def _key_side(self, frame: PositionFrame, key: Tensor, key_padding_mask: Optional[Tensor]):
        """Positions and padding (B, S) of the new keys: the queries themselves in self-attention,
        the encoder's tokens (positions computed once by the encoder) in cross-attention."""
        if not self.placement.cross:
            return frame.positions, frame.padding_mask
        if frame.source_positions is None:
            raise RuntimeError("cross-attention needs the encoder's positions (encoder_out['encoder_positions'])")
        if key_padding_mask is None:
            key_padding_mask = torch.zeros(key.size(1), key.size(0), dtype=torch.bool, device=key.device)
        return frame.source_positions, key_padding_mask

    def forward(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                key_padding_mask: Optional[Tensor] = None, incremental_state=None, need_weights: bool = True,
                static_kv: bool = False, attn_mask: Optional[Tensor] = None, before_softmax: bool = False,
                need_head_weights: bool = False, positions: Optional[PositionFrame] = None
                ) -> Tuple[Tensor, Optional[Tensor]]:
        """fairseq's attention call; ``positions`` defaults to the frame of the running forward."""
        if before_softmax:
            raise ValueError("before_softmax=True is not supported by posmix mixers")
        tgt_len, batch, _ = query.shape
        frame = positions if positions is not None else self._route.frame
        if frame.positions.shape != (batch, tgt_len):
            raise RuntimeError(f"{self.placement} mixer: positions of shape {tuple(frame.positions.shape)} for a "
                               f"query of {tgt_len} tokens x {batch} sentences")
        call = MixingCall(query, key, value, key_padding_mask, incremental_state, static_kv, attn_mask,
                          need_weights, need_head_weights, frame)
        try:
            path = next(path for path in self.paths if path.serves(self, call))
            context, attn = path.mix(self, call)
            # W^O of the (gated) context (B, H, T, D_h) -> (T, B, D) (GPA Eq. 4)
            context = context.permute(2, 0, 1, 3)
            if self.gating is not None:
                return self.out_proj(self.gating(context, query)), attn
            return self.out_proj(context.reshape(tgt_len, batch, self.embed_dim)), attn
        except KernelBackendError as exc:  # a forced Triton kernel that cannot run: name the option
            if not self.sublayer_kernels.forced:
                raise
            raise KernelBackendError(f"{self.sublayer_kernels.forced}: {exc}") from exc
