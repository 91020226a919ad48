"""The Energy contract: how one sublayer weighs its keys.

    a_nm = mixing_weights(query states/positions, key features/positions)     (B, H, T, S)

with one abstract method, :meth:`Energy.mixing_weights`, and two small kinds:

* :class:`SoftmaxEnergy`: scaled energies e_nm (``logits``), masked, then a NaN-safe softmax over
  the keys (attention: content, Shaw, relative, aPosNet, rPosNet, T5).
* :class:`DirectWeights`: weights given directly (``direct_weights``), zeroed where masked and
  not renormalised (hard-coded Gaussians, Fourier, linear, light convolution).

For the position-based energies a_nm depends on positions only, so a trained model can replace
the energy by a precomputed table, and the mixing step can get a fused kernel.
"""
import abc
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def xavier_linear(in_dim: int, out_dim: int) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(L, B, D) -> (B, H, L, D/H)."""
    length, batch, dim = x.shape
    return x.reshape(length, batch, num_heads, dim // num_heads).permute(1, 2, 0, 3)


def head_scaling(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


class Energy(nn.Module, metaclass=abc.ABCMeta):
    """Mixing weights of one sublayer.

    ``key_features`` maps new keys (states and/or positions) to what incremental decoding caches
    per key (None when the energy needs no per-key tensor).
    """

    def key_features(self, key: Tensor, key_positions: Tensor) -> Optional[Tensor]:
        return None

    @abc.abstractmethod
    def mixing_weights(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor,
                       key_padding_mask: Tensor, excluded: Tensor) -> Tensor:
        """(B, H, T, S) float32 weights, 0 wherever ``excluded`` (B, 1, T, S) is True (padding keys,
        future keys).

        query (T, B, D); query_positions (B, T); keys the cached ``key_features`` (or None);
        key_positions and key_padding_mask (B, S).
        """


class CentredEnergy(Energy):
    """An energy whose weights are a fixed kernel around one key position per head and query: a window
    path then mixes only the keys around that centre (the Gaussian window)."""

    @abc.abstractmethod
    def window_centres(self, query_positions: Tensor) -> Tensor:
        """(B, H, T) the key position each head's weights centre on."""


class SoftmaxEnergy(Energy):
    """a_nm = softmax_m(e_nm) over the allowed keys; a query with no allowed key gets all zeros
    (never NaN), e.g. a left-padded target's first padding slot."""

    @abc.abstractmethod
    def logits(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor) -> Tensor:
        """(B, H, T, S) scaled energies e_nm."""

    def mixing_weights(self, query, query_positions, keys, key_positions, key_padding_mask, excluded):
        logits = self.logits(query, query_positions, keys, key_positions).float()
        logits = logits.masked_fill(excluded, float("-inf"))
        dead = excluded.all(dim=-1, keepdim=True)
        return F.softmax(logits.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)


class DirectWeights(Energy):
    """Weights a_nm given directly, used as they are (no softmax), 0 at excluded keys."""

    @abc.abstractmethod
    def direct_weights(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor,
                       key_padding_mask: Tensor) -> Tensor:
        """(B, H or 1, T, S) weights."""

    def mixing_weights(self, query, query_positions, keys, key_positions, key_padding_mask, excluded):
        weights = self.direct_weights(query, query_positions, keys, key_positions, key_padding_mask).float()
        return weights.masked_fill(excluded, 0.0)
