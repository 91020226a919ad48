"""The Energy contract: how one sublayer weighs its keys (docs/contributing.md, "One Energy contract").

    a_nm = mixing_weights(query states/positions, key features/positions)     (B, H, T, S)

:class:`SoftmaxEnergy` softmaxes scaled energies (``logits``); :class:`DirectWeights` gives the
weights directly (hard-coded Gaussians, Fourier, linear, light convolution). Position-based energies
depend on positions only, so a trained model can replace them by a table (frozen_energy.py).
"""
import abc
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...kernels import common as kernel_common


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


class EnergyType(abc.ABCMeta):
    """Runs an energy's :meth:`Energy.reset_parameters` once its constructor has returned (a subclass's included)."""

    def __call__(cls, *args, **kwargs):
        energy = super().__call__(*args, **kwargs)
        energy.reset_parameters()
        return energy


class Energy(nn.Module, metaclass=EnergyType):
    """Mixing weights of one sublayer."""

    def reset_parameters(self):
        """The initialisation of the energy's own parameters (torch's name for it), run once right after its
        constructor: a mixer creates its parameters in its constructor (``torch.empty``) and draws their values
        here, where a call draws them again. W^Q and W^K of :class:`ContentEnergy` are drawn where they are built."""

    def key_features(self, key: Tensor, key_positions: Tensor) -> Optional[Tensor]:
        """What incremental decoding caches per new key (states and/or positions); None: nothing."""
        return None

    @abc.abstractmethod
    def mixing_weights(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor,
                       key_padding_mask: Tensor, excluded: Tensor) -> Tensor:
        """(B, H, T, S) float32 weights, 0 wherever ``excluded`` (B, 1, T, S) is True (padding keys, future
        keys). query (T, B, D); query_positions (B, T); keys the cached ``key_features`` (or None);
        key_positions and key_padding_mask (B, S)."""


class CentredEnergy(Energy):
    """An energy whose weights are a fixed kernel around one key position per head and query: a window
    path then mixes only the keys around that centre (the Gaussian window)."""

    @abc.abstractmethod
    def window_centres(self, query_positions: Tensor) -> Tensor:
        """(B, H, T) the key position each head's weights centre on."""


class SoftmaxEnergy(Energy):
    """a_nm = softmax_m(e_nm) over the allowed keys; a query with no allowed key gets all zeros
    (never NaN), e.g. a left-padded target's first padding slot."""

    def query_features(self, query: Tensor, query_positions: Tensor) -> Tensor:
        """What :meth:`logits` reads of the query states (T, B, D), in the frame of :meth:`key_features`:
        (B, H, T, D_h) for an energy of query states (W^Q y_n, rotated, ...). By default the states themselves, of
        which an energy of positions only reads the dtype."""
        return query

    @abc.abstractmethod
    def logits(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor) -> Tensor:
        """(B, H, T, S) scaled energies e_nm of ``query`` (:meth:`query_features`) and ``keys`` (the cached
        :meth:`key_features`), with their positions (B, T) and (B, S)."""

    def mixing_weights(self, query, query_positions, keys, key_positions, key_padding_mask, excluded):
        features = self.query_features(query, query_positions)
        return masked_softmax(self.logits(features, query_positions, keys, key_positions), excluded)


def masked_softmax(logits: Tensor, excluded: Tensor) -> Tensor:
    """float32 softmax over the last axis of ``logits`` where ``excluded`` (broadcastable) is False; all
    zeros for a row with no allowed key."""
    return MaskedSoftmax.apply(logits.float(), excluded)


class MaskedSoftmax(torch.autograd.Function):
    """:func:`masked_softmax` whose backward is the softmax's alone: an excluded key's weight is 0, so its
    gradient is 0 without a mask of its own (autograd through the masks costs a pass per mask, both ways)."""

    @staticmethod
    def forward(ctx, logits: Tensor, excluded: Tensor) -> Tensor:
        logits = logits.masked_fill(excluded, float("-inf"))
        dead = excluded.all(dim=-1, keepdim=True)
        if kernel_common.on_gpu(dead.device) or bool(dead.any()):  # on the CPU, asked: rows without keys are rare
            weights = F.softmax(logits.masked_fill_(dead, 0.0), dim=-1).masked_fill_(dead, 0.0)
        else:
            weights = F.softmax(logits, dim=-1)
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    def backward(ctx, grad: Tensor):
        weights, = ctx.saved_tensors
        # the backward autograd runs for F.softmax (aten's op), on the saved weights
        return torch._softmax_backward_data(grad, weights, -1, weights.dtype), None


class DirectWeights(Energy):
    """Weights a_nm given directly, used as they are (no softmax), 0 at excluded keys."""

    @abc.abstractmethod
    def direct_weights(self, query: Tensor, query_positions: Tensor, keys: Optional[Tensor], key_positions: Tensor,
                       key_padding_mask: Tensor) -> Tensor:
        """(B, H or 1, T, S) weights."""

    def mixing_weights(self, query, query_positions, keys, key_positions, key_padding_mask, excluded):
        weights = self.direct_weights(query, query_positions, keys, key_positions, key_padding_mask).float()
        return weights.masked_fill(excluded, 0.0)


class ContentEnergy(SoftmaxEnergy):
    """The Transformer's energies (Vaswani et al. 2017), e_nm = (W^Q y_n)(W^K x_m)^T / sqrt(D_h) per head,
    shared by the mixers that add to them (Shaw, T5 bias, PosNet-Attn, RecPE's head-sliced reading) and
    by gated multi-head attention. Parameters: 2(D^2 + D). ``projection(in_dim, out_dim)`` builds W^Q and
    W^K (a full linear map by default)."""

    def __init__(self, spec, projection=xavier_linear):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.q_proj: nn.Module = projection(spec.embed_dim, spec.embed_dim)
        self.k_proj: nn.Module = projection(spec.kdim, spec.embed_dim)

    def key_features(self, key: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, S, D_h) W^K x_m."""
        return split_heads(self.k_proj(key), self.num_heads)

    def query_features(self, query: Tensor, query_positions: Tensor) -> Tensor:
        """(B, H, T, D_h) W^Q y_n / sqrt(D_h)."""
        return split_heads(self.q_proj(query) * self.scaling, self.num_heads)

    def logits(self, query, query_positions, keys, key_positions):
        return query @ keys.transpose(-1, -2)


class BiasedContentEnergy(ContentEnergy):
    """Content energies plus a bias of the positions (ALiBi's penalty, T5's bucket bias): ``position_bias``
    computes it (in float32, or in its parameters' dtype), and it is added in the content energies' dtype."""

    @abc.abstractmethod
    def position_bias(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B or 1, H, T, S) the bias b^h_nm of every (query, key) pair."""

    def logits(self, query, query_positions, keys, key_positions):
        content = super().logits(query, query_positions, keys, key_positions)
        return content + self.position_bias(query_positions, key_positions).to(content.dtype)
