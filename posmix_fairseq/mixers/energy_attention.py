"""Attention as two parts: an energy function, and a mixing step over (gated) values.

    e_nm   = energy(query states/positions, key states/positions)      (per head)
    a_nm   = softmax_m(e_nm + masks)
    c_n    = sum_m a_nm v_m  (+ an optional relative value term, Shaw et al. Eq. 3)
    out_n  = W^O c_n                      ungated
    out_n  = W^O (c_n * GeLU(W^G y_n))    gated, with v_m = LayerNorm(GeLU(W^V x_m))  (Eq. 4)

The energy functions (content, Shaw, relative, aPosNet, rPosNet) are small modules with one
contract (:class:`Energy`); for the position-based ones the energy depends on positions only,
so a later step can replace it by a precomputed table and fuse the mixing step into a kernel.
"""
import abc
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import MixerSpec, TokenMixer
from .gating import ValueGate
from .positions import positions_from_padding


def xavier_linear(in_dim: int, out_dim: int) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(L, B, D) -> (B, H, L, D/H)."""
    length, batch, dim = x.shape
    return x.reshape(length, batch, num_heads, dim // num_heads).permute(1, 2, 0, 3)


class Energy(nn.Module, metaclass=abc.ABCMeta):
    """Attention energies e_nm of one sublayer, per head, scaled.

    ``project_keys`` maps the new keys (states and/or positions) to what must be cached for
    incremental decoding (None when the energy needs no per-key tensor); ``logits`` returns
    (B, H, T, S); ``value_term`` optionally adds sum_m a_nm r_nm to the context.
    """

    #: False for mixers whose weights are given directly (hard-coded Gaussians, Fourier, linear,
    #: light convolution): they implement ``mixing_weights`` and are NOT normalised over keys.
    softmax_normalized = True

    def project_keys(self, key: Tensor, key_positions: Tensor) -> Optional[Tensor]:
        return None

    def mixing_weights(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor],
                       key_positions: Tensor, key_padding_mask: Tensor) -> Tensor:
        """(B, H, T, S) weights a_nm used as they are (``softmax_normalized = False``)."""
        raise TypeError(f"{type(self).__name__} is softmax-normalised: it defines logits, not mixing_weights")

    @abc.abstractmethod
    def logits(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor],
               key_positions: Tensor) -> Tensor:
        """(B, H, T, S) scaled energies."""

    def value_term(self, probs: Tensor, query_positions: Tensor, key_positions: Tensor) -> Optional[Tensor]:
        return None


class DirectWeights(Energy):
    """Base of the mixers whose weights a_nm are given directly (no softmax over keys):
    they implement ``mixing_weights``; ``logits`` does not exist for them."""

    softmax_normalized = False

    def logits(self, query, query_positions, keys, key_positions):
        raise TypeError(f"{type(self).__name__} gives mixing weights directly, not logits")


class EnergyMixingAttention(TokenMixer):
    """A token mixer made of an :class:`Energy` and the (gated) value-mixing step."""

    def __init__(self, spec: MixerSpec, energy: Energy, value_projection=True):
        """``value_projection``: True (W^V), False (the inputs are the values), or a module."""
        super().__init__(spec.embed_dim, spec.num_heads)
        self.placement = spec.placement
        self.layer_idx = spec.layer_idx
        self.attention_dropout = spec.attention_dropout
        self.energy = energy
        if value_projection is False and spec.kdim != spec.embed_dim:
            raise ValueError(f"{spec.option_prefix}-value-projection off needs equal key and model dims "
                             f"({spec.kdim} != {spec.embed_dim})")
        if isinstance(value_projection, nn.Module):
            self.v_proj = value_projection
        else:
            self.v_proj = xavier_linear(spec.kdim, spec.embed_dim) if value_projection else nn.Identity()
        self.out_proj = xavier_linear(spec.embed_dim, spec.embed_dim)
        self.gating = ValueGate(spec.embed_dim) if spec.gated else None
        # plain attribute (not a submodule): owned by the decoder
        self._position_context = spec.position_context

    # positions ---------------------------------------------------------------------------
    def _query_positions(self, batch: int, length: int, key_padding_mask: Optional[Tensor], device):
        if self.placement == "encoder_self":
            return positions_from_padding(key_padding_mask, batch, length, device)
        if self._position_context is None:
            raise RuntimeError(f"{self.placement} mixer built without a decoder position context; "
                               "pass query_positions explicitly")
        return self._position_context.get(batch, length)

    # values ------------------------------------------------------------------------------
    def _values(self, value: Tensor, key_positions: Tensor, key_padding_mask: Tensor) -> Tensor:
        """(B, H, S, D_h) values of the new keys; their positions and padding (B, S) serve the
        mixers whose values depend on position (PosNet-Attn)."""
        v = self.v_proj(value)
        if self.gating is not None:
            v = self.gating.values(v)
        return split_heads(v, self.num_heads)

    def _keys_and_values(self, key, value, key_padding_mask, query_positions, key_positions,
                         incremental_state, static_kv):
        """Values, cached keys, key positions and key padding, extended (self-attention) or
        reused (cross-attention, ``static_kv``) across incremental decoding steps."""
        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if buffer is not None and static_kv and "values" in buffer:
            # cross-attention during decoding: the source keys/values are computed once
            return buffer["values"], buffer.get("keys"), buffer["key_positions"], buffer["key_padding_mask"]
        batch, src_len = key.size(1), key.size(0)
        if key_positions is None:
            if self.placement == "decoder_self":
                key_positions = query_positions  # the new keys are the new queries
            else:
                key_positions = positions_from_padding(key_padding_mask, batch, src_len, key.device)
        key_pad = (key_padding_mask if key_padding_mask is not None
                   else torch.zeros(batch, src_len, dtype=torch.bool, device=key.device))
        values = self._values(value, key_positions, key_pad)
        keys = self.energy.project_keys(key, key_positions)
        if buffer is not None and not static_kv and "values" in buffer:
            values = torch.cat([buffer["values"], values], dim=2)
            if keys is not None:
                keys = torch.cat([buffer["keys"], keys], dim=2)
            key_positions = torch.cat([buffer["key_positions"], key_positions], dim=1)
            key_pad = torch.cat([buffer["key_padding_mask"], key_pad], dim=1)
        if buffer is not None:
            buffer = {"values": values, "key_positions": key_positions, "key_padding_mask": key_pad}
            if keys is not None:
                buffer["keys"] = keys
            self._set_input_buffer(incremental_state, buffer)
        return values, keys, key_positions, key_pad

    def _mixing_weights(self, query, query_positions, keys, key_positions, key_pad, attn_mask):
        """(B, H, T, S) float weights: softmax of the energies, or the energy's own weights."""
        if self.energy.softmax_normalized:
            logits = self.energy.logits(query, query_positions, keys, key_positions).float()
            if attn_mask is not None:
                logits = logits + attn_mask.float().unsqueeze(0).unsqueeze(0)
            logits = logits.masked_fill(key_pad.unsqueeze(1).unsqueeze(2), float("-inf"))
            # a query whose every key is masked (e.g. a left-padded target's first pad) gets a
            # zero context instead of NaN
            dead = torch.isneginf(logits).all(dim=-1, keepdim=True)
            return F.softmax(logits.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
        probs = self.energy.mixing_weights(query, query_positions, keys, key_positions, key_pad).float()
        excluded = key_pad.unsqueeze(1).unsqueeze(2)
        if attn_mask is not None:  # additive mask: -inf (or fairseq's -1e8) excludes a key
            excluded = excluded | (attn_mask.float() < -1e3).unsqueeze(0).unsqueeze(0)
        return probs.masked_fill(excluded, 0.0)

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
        query_positions: Optional[Tensor] = None,
        key_positions: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if before_softmax:
            raise ValueError("before_softmax=True is not supported by posmix mixers")
        tgt_len, batch, _ = query.shape
        if query_positions is None:
            query_positions = self._query_positions(batch, tgt_len, key_padding_mask, query.device)

        values, keys, key_positions, key_pad = self._keys_and_values(
            key, value, key_padding_mask, query_positions, key_positions, incremental_state, static_kv)
        probs = self._mixing_weights(query, query_positions, keys, key_positions, key_pad, attn_mask)
        weights = probs
        probs = F.dropout(probs, p=self.attention_dropout, training=self.training).to(values.dtype)

        context = torch.matmul(probs, values)  # (B, H, T, Dh)
        extra = self.energy.value_term(probs, query_positions, key_positions)
        if extra is not None:
            context = context + extra
        context = context.permute(2, 0, 1, 3).reshape(tgt_len, batch, self.embed_dim)
        if self.gating is not None:
            context = self.gating.gate(context, query)
        out = self.out_proj(context)

        attn = None
        if need_weights or need_head_weights:
            attn = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
            attn = attn.to(query.dtype)
        return out, attn


def head_scaling(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
