"""Attention as two parts: an :class:`~.energy.Energy` giving mixing weights, and one mixing step
over (gated) values:

    a_nm   = energy.mixing_weights(...)                       (per head; softmax or direct)
    c_n    = sum_m a_nm v_m  (+ values.relative_term, e.g. Shaw et al. Eq. 3)
    out_n  = W^O c_n                      ungated
    out_n  = W^O (c_n * GeLU(W^G y_n))    gated, with v_m = LayerNorm(GeLU(W^V x_m))  (GPA Eq. 4)
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.positions import PositionFrame
from ..kernels.gpu_defaults import gpu_default
from .base import MixerSpec, TokenMixer
from .energy import Energy, xavier_linear
from .gating import ContextGate
from .position_energy import RelativeTableEnergy
from .values import Values
from .window_mixing import constant_state_step, is_future_mask, window_context

#: implementations of rPosNet mixing (``--S-rposnet-impl``): ``auto`` runs ``dense`` on the CPU and, for
#: CUDA tensors, the choice of posmix_fairseq/kernels/gpu_defaults.py (chosen by posmix-bench-gpu)
RELATIVE_IMPLS = ("auto", "dense", "window")

# parameters renamed by the issue-8 reshaping: old suffix -> new suffix (checkpoints made before load)
LEGACY_PARAMETER_NAMES = {
    "v_proj.": "values.projection.",
    "gating.value_norm.": "values.norm.",
    "energy.relative_values.": "values.relative_values.",
    "kernels.": "values.kernels.",
}


class EnergyMixingAttention(TokenMixer):
    """A token mixer made of an :class:`Energy` and the (gated) value-mixing step."""

    def __init__(self, spec: MixerSpec, energy: Energy, values: Optional[Values] = None, impl: str = "dense"):
        super().__init__(spec.embed_dim, spec.num_heads)
        valid = RELATIVE_IMPLS if isinstance(energy, RelativeTableEnergy) else ("dense",)
        if impl not in valid:
            raise ValueError(f"{spec.flag(spec.name + '-impl')}: {impl!r} is not a mixing implementation of "
                             f"{spec.name}; valid values: {', '.join(valid)}")
        self.impl = impl
        # decoder self-attention with rPosNet energies decodes with the constant state (False: cache
        # every value like the dense form, kept for the benchmark and as a reference)
        self.constant_state_decoding = True
        self.placement = spec.placement
        self.attention_dropout = spec.attention_dropout
        self.energy = energy
        self.values = values if values is not None else Values.of_spec(spec)
        self.out_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.gating = ContextGate(spec.embed_dim) if spec.gated else None
        self.__dict__["_route"] = spec.route  # plain attribute: owned by the encoder/decoder

    def upgrade_state_dict_named(self, state_dict, name):
        """Parameter names of checkpoints made before the Values hook existed."""
        prefix = name + "." if name else ""
        for key in [k for k in state_dict if k.startswith(prefix)]:
            for old, new in LEGACY_PARAMETER_NAMES.items():
                if key[len(prefix):].startswith(old):
                    state_dict[prefix + new + key[len(prefix) + len(old):]] = state_dict.pop(key)
                    break

    def _keys_and_values(self, frame: PositionFrame, key, value, key_padding_mask, incremental_state, static_kv):
        """Values, cached key features, key positions and key padding, extended (self-attention) or
        reused (cross-attention, ``static_kv``) across incremental decoding steps."""
        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if buffer is not None and static_kv and "values" in buffer:
            # cross-attention during decoding: the source keys/values are computed once
            return buffer["values"], buffer.get("keys"), buffer["key_positions"], buffer["key_padding_mask"]
        key_positions, key_padding_mask = self._key_side(frame, key, key_padding_mask)
        values = self.values(value, key_positions, key_padding_mask)
        keys = self.energy.key_features(key, key_positions)
        if buffer is not None and not static_kv and "values" in buffer:
            values = torch.cat([buffer["values"], values], dim=2)
            if keys is not None:
                keys = torch.cat([buffer["keys"], keys], dim=2)
            key_positions = torch.cat([buffer["key_positions"], key_positions], dim=1)
            key_padding_mask = torch.cat([buffer["key_padding_mask"], key_padding_mask], dim=1)
        if buffer is not None:
            buffer = {"values": values, "key_positions": key_positions, "key_padding_mask": key_padding_mask}
            if keys is not None:
                buffer["keys"] = keys
            self._set_input_buffer(incremental_state, buffer)
        return values, keys, key_positions, key_padding_mask

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

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state=None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
        positions: Optional[PositionFrame] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """fairseq's attention call; ``positions`` defaults to the frame of the running forward."""
        if before_softmax:
            raise ValueError("before_softmax=True is not supported by posmix mixers")
        tgt_len, batch, _ = query.shape
        frame = positions if positions is not None else self._route.frame
        query_positions = frame.positions
        if query_positions.shape != (batch, tgt_len):
            raise RuntimeError(f"{self.placement} mixer: positions of shape {tuple(query_positions.shape)} for a "
                               f"query of {tgt_len} tokens x {batch} sentences")
        if incremental_state is not None and not static_kv and self._constant_state_decoding():
            return self._decode_with_constant_state(query, value, frame, incremental_state, need_head_weights)
        values, keys, key_positions, key_pad = self._keys_and_values(
            frame, key, value, key_padding_mask, incremental_state, static_kv)
        if self._window_applies(attn_mask, need_weights or need_head_weights, query.device):
            causal = attn_mask is not None  # the decoder's future mask (checked by _window_applies)
            context = window_context(self.energy, query_positions, frame.padding_mask if causal else None,
                                     values, key_pad, causal=causal)
            return self._output(context, query), None

        excluded = key_pad[:, None, None, :]
        if attn_mask is not None:  # fairseq's additive masks: 0 (allowed) or -inf / -1e8 (excluded)
            excluded = excluded | (attn_mask.float() < -1e3)[None, None]
        excluded = excluded.expand(batch, 1, tgt_len, key_pad.size(1))
        weights = self.energy.mixing_weights(query, query_positions, keys, key_positions, key_pad, excluded)
        probs = F.dropout(weights, p=self.attention_dropout, training=self.training).to(values.dtype)

        context = torch.matmul(probs, values)  # (B, H, T, Dh)
        extra = self.values.relative_term(probs, query_positions, key_positions)
        if extra is not None:
            context = context + extra
        out = self._output(context, query)

        attn = None
        if need_weights or need_head_weights:
            attn = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
            attn = attn.to(query.dtype)
        return out, attn

    def _output(self, context: Tensor, query: Tensor) -> Tensor:
        """W^O of the (gated) context (B, H, T, D_h) -> (T, B, D) (GPA Eq. 4)."""
        batch, _, tgt_len, _ = context.shape
        context = context.permute(2, 0, 1, 3).reshape(tgt_len, batch, self.embed_dim)
        if self.gating is not None:
            context = self.gating(context, query)
        return self.out_proj(context)

    # ---- search-time rPosNet (mixers/window_mixing.py) -------------------------------------------

    def _constant_state_decoding(self) -> bool:
        """Decoder self-attention with position-and-distance energies (rPosNet, trained or frozen):
        the incremental state is the last K values, the far sum and its count."""
        return (self.constant_state_decoding and isinstance(self.energy, RelativeTableEnergy)
                and self.placement.causal and not self.placement.cross
                and type(self.values).relative_term is Values.relative_term)

    def resolved_impl(self, device: torch.device) -> str:
        """``dense`` or ``window`` for tensors on ``device``: ``auto`` is dense on the CPU and the GPU
        default (kernels/gpu_defaults.py) for CUDA tensors, dense while training with attention
        dropout (the window form has none)."""
        if self.impl != "auto":
            return self.impl
        if device.type != "cuda" or (self.training and self.attention_dropout > 0):
            return "dense"
        return gpu_default("rposnet_impl")

    def _window_applies(self, attn_mask: Optional[Tensor], weights_requested: bool, device: torch.device) -> bool:
        """``--S-rposnet-impl window`` for this call: not when attention weights are asked for (the
        window form has none: the call runs dense), nor for an attention mask other than the
        decoder's future mask (dense too); attention dropout in training is an error."""
        if self.resolved_impl(device) != "window" or weights_requested:
            return False
        if attn_mask is not None and not (self.placement.causal and is_future_mask(attn_mask)):
            return False
        if self.training and self.attention_dropout > 0:
            flag = self.placement.flag("rposnet-impl")
            raise ValueError(f"{flag} window applies no attention dropout (--attention-dropout "
                             f"{self.attention_dropout}): train with --attention-dropout 0 or {flag} dense")
        return True

    def _decode_with_constant_state(self, query: Tensor, value: Tensor, frame: PositionFrame, incremental_state,
                                    need_head_weights: bool):
        if need_head_weights:
            raise ValueError(f"{self.placement} rPosNet keeps a constant decoding state (the last K values and the "
                             "sum of the older ones): it has no per-key attention weights while decoding step by "
                             "step; ask for them in a full (teacher-forced) forward")
        values = self.values(value, frame.positions, frame.padding_mask)  # (B, H, T, D_h) of the new tokens
        buffer = self._get_input_buffer(incremental_state)
        context = constant_state_step(self.energy, buffer, frame.positions, frame.padding_mask, values)
        self._set_input_buffer(incremental_state, buffer)
        return self._output(context, query), None
