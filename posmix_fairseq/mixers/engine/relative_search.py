"""Search-time rPosNet mixing (GPA Eqs. 9-10, Section 4.2): the O(K) window form and constant-state decoding
(docs/search-time.md: the algorithms, what padding queries get). Both read the energies only through the
:class:`~.table_energy.RelativeTableEnergy` contract, so they serve trained and frozen energies alike."""
from typing import Dict

import torch
from torch import Tensor

from ... import kernels
from ...core.positions import PositionFrame, left_aligned
from ...kernels import common as kernel_common
from ...kernels.decode_step import packed_state, push_packed, unpack_state, weighted_decode_step
from .table_energy import RelativeTableEnergy, table_positions

#: the buffer entry of the constant decoding state: (B, H, K+1, D_h), batch-first (beam search reorders it)
STATE_KEYS = ("window_and_far_sum",)


def is_future_mask(attn_mask: Tensor) -> bool:
    """True when fairseq's additive (T, T) mask excludes exactly the keys after each query (the decoder's
    ``buffered_future_mask``, the only mask the causal window form reproduces). Off the CPU only the shape
    is checked (the values would synchronise): fairseq's decoder passes its self-attention no other."""
    if attn_mask.dim() != 2 or attn_mask.size(0) != attn_mask.size(1):
        return False
    if not kernel_common.host_checks(attn_mask.device):
        return True
    excluded = attn_mask < -1e3
    future = torch.ones(attn_mask.shape, dtype=torch.bool, device=attn_mask.device).triu_(1)
    return bool(torch.equal(excluded, future))


def window_context(energy: RelativeTableEnergy, frame: PositionFrame, values: Tensor, key_padding_mask: Tensor,
                   causal: bool, backend: str) -> Tensor:
    """(B, H, T, D_h) contexts of Eq. 10's softmax over the real keys, by the window form, for the queries
    of ``frame``. ``values`` (B, H, S, D_h) in column order with their padding ``key_padding_mask`` (B, S);
    ``causal`` for decoder self-attention (the dense form's future mask over real tokens); ``backend``
    that of ``kernels.relative_position_mixing`` (the sublayer's choice)."""
    query_positions = frame.positions
    table = energy.energy_table(table_positions(energy, query_positions, frame.position_bound))
    # key slot m = key position m (left, right or any padding: positions count the real tokens)
    batch, heads, keys, dim = values.shape
    order, lengths = left_aligned(key_padding_mask, batch, keys, values.device)
    aligned = torch.gather(values, 2, order[:, None, :, None].expand(batch, heads, keys, dim))
    context = kernels.relative_position_mixing(table, query_positions, aligned, lengths, energy.length_ratio,
                                               causal=causal, backend=backend, impl="window")
    if causal:
        context = context.masked_fill(frame.padding_mask[:, None, :, None], 0.0)
    return context


def constant_state_step(energy: RelativeTableEnergy, buffer: Dict[str, Tensor], frame: PositionFrame, values: Tensor,
                        constants: Dict[str, Tensor], backend: str) -> Tensor:
    """Decoder self-attention of the new token(s) of ``frame`` (T = 1 in fairseq's search; several are
    taken one after the other) with the constant state, which it updates in ``buffer``; ``values``
    (B, H, T, D_h) are theirs, ``constants`` the running decode's (the decode-weight table's home).
    Returns (B, H, T, D_h); a padding token leaves the state unchanged and gets 0.

    The state holds every real token before the current one (decoding starts at the first target
    token: checked), so a step's weights depend on its position only (``energy.decode_weights``).
    With the PyTorch kernels a token is ``kernels.decode_step.weighted_decode_step`` (a concatenation and
    one batched product); with ``backend`` ``triton`` or ``auto`` it is ``kernels.relative_decode_step``.
    """
    positions, padding_mask = frame.positions, frame.padding_mask
    batch, heads, steps, head_dim = values.shape
    state = buffer.get(STATE_KEYS[0])
    if state is None:
        check_first_step(positions, padding_mask)
        state = packed_state(batch, heads, energy.k, head_dim, dtype=values.dtype, device=values.device)
    torch_kernels = backend == "torch"
    if steps == 1 and torch_kernels:  # a step of the search: as few operations as possible
        valid = ~padding_mask.view(-1) if frame.has_padding else None
        weights = energy.decode_weights(positions, constants, frame.position_bound)
        context, buffer[STATE_KEYS[0]] = weighted_decode_step(weights, values, state, valid)
        return context
    weights = (energy.decode_weights(positions, constants, frame.position_bound) if torch_kernels
               else energy.energy_rows(positions))
    outputs = []
    for t in range(steps):
        pad = padding_mask[:, t]
        valid = ~pad if frame.has_padding else None
        if torch_kernels:
            out, state = weighted_decode_step(weights[:, :, t:t + 1], values[:, :, t:t + 1], state, valid)
        else:
            state = push_packed(state, values[:, :, t:t + 1], valid)
            out = kernels.relative_decode_step(weights[:, :, t], *unpack_state(state, positions[:, t], values.dtype),
                                               backend=backend)
            out = (out if valid is None else out.masked_fill(pad[:, None, None], 0.0))[:, :, None]
        outputs.append(out)
    buffer[STATE_KEYS[0]] = state
    return torch.cat(outputs, dim=2)


def check_first_step(query_positions: Tensor, padding_mask: Tensor) -> None:
    """Constant-state decoding must see every target token from the first: a fresh state and a
    real token at position > 0 (a decoder called incrementally on a longer prefix with an empty
    incremental state) is an error, not a context over the tokens it never saw."""
    if not query_positions.numel():
        return
    none = torch.iinfo(query_positions.dtype).max
    first = query_positions.masked_fill(padding_mask, none).amin(dim=1)  # first real token of each row
    late = first.masked_fill(first == none, 0).max()
    if not kernel_common.host_checks(late.device):  # checked on the device: no synchronisation
        torch._assert_async(late == 0, "rPosNet constant-state decoding starts at the first target token: feed the "
                                       "decoder the target from its first token on (as fairseq's search does)")
    elif bool(late > 0):
        raise ValueError(f"rPosNet constant-state decoding starts at the first target token, but its first "
                         f"incremental call starts a hypothesis at position {int(late)}: feed the decoder "
                         f"the target from its first token on (as fairseq's search does), or run a full forward")
