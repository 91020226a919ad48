"""Constant-state decoding, the decoder's step of rPosNet self-attention (GPA Eq. 10, gamma = 1; docs/search-time.md).

While decoding step by step, rPosNet decoder self-attention keeps the K most recent values and the sum of
the older ones (the equation and the packed state: kernels/decode_step.py), O(K D_h) per step whatever t.
A step's weights depend on its position only: search reads them from the decode-weight table and takes one
batched product, unless the sublayer's kernels say ``triton`` for its ``decode`` part (declared by
mixers/rposnet.py): then each token takes the general step from its energy row. Full forwards fall through.
"""
from typing import Dict, Optional

import torch
from torch import Tensor

from ... import kernels
from ...core.positions import PositionFrame
from ...kernels import common as kernel_common
from ...kernels.choice import Part
from ...kernels.decode_step import (packed_state, position_decode_weights, push_packed, unpack_state,
                                    weighted_decode_step)
from ..engine.mixing import MixingCall, MixingPath
from ..engine.table_energy import RelativeTableEnergy, table_positions

#: the buffer entry of the constant decoding state: (B, H, K+1, D_h), batch-first (beam search reorders it)
STATE_KEYS = ("recent_and_far_sum",)
#: the entry of a decode's constants (``BatchFirstIncrementalState.decode_constants``) holding the table
TABLE_KEY = "decode_weight_table"
#: the smallest decode-weight table (positions 0..63 cover most sentences in one go)
MIN_POSITIONS = 64


class ConstantStateDecoding(MixingPath):
    """``part``: the mixer's declared decoding part (values ``table`` and ``triton``: kernels/choice.py)."""

    name = "constant-state"

    def __init__(self, part: Part):
        super().__init__()
        self.part = part

    def serves(self, mixer, call: MixingCall) -> bool:
        return call.decoding_step

    def mix(self, mixer, call: MixingCall):
        if call.need_head_weights:
            raise ValueError(f"{mixer.placement} rPosNet keeps a constant decoding state (the K most recent values "
                             "and the sum of the older ones): it has no per-key attention weights while decoding "
                             "step by step; ask for them in a full (teacher-forced) forward")
        frame = call.frame
        values = mixer.values(call.value, frame.positions, frame.padding_mask)  # (B, H, T, D_h) of the new tokens
        buffer = mixer._get_input_buffer(call.incremental_state)
        constants = mixer._get_decode_constants(call.incremental_state)
        sublayer = mixer.sublayer_kernels
        step = None if sublayer.on(values.device).value(self.part) == "table" else (
            lambda *args: sublayer.run(values.device, self.part, lambda: kernels.relative_decode_step(*args, "triton"),
                                       lambda: kernels.relative_decode_step(*args, "torch")))
        context = constant_state_step(mixer.energy, buffer, frame, values, constants, step)
        mixer._set_input_buffer(call.incremental_state, buffer)
        return context, None


def constant_state_step(energy: RelativeTableEnergy, buffer: Dict[str, Tensor], frame: PositionFrame, values: Tensor,
                        constants: Dict[str, Tensor], step=None) -> Tensor:
    """Decoder self-attention of the new token(s) of ``frame`` (T = 1 in fairseq's search; several are taken
    one after the other), updating the state in ``buffer``; (B, H, T, D_h). Each token by the decode-weight
    table (``step`` None: a concatenation and one batched product) or by ``step(energy_rows, *unpacked
    state)``, the general step. A padding token leaves the state unchanged and gets 0."""
    positions, padding_mask = frame.positions, frame.padding_mask
    batch, heads, steps, head_dim = values.shape
    state = buffer.get(STATE_KEYS[0])
    if state is None:
        check_first_step(positions, padding_mask)
        state = packed_state(batch, heads, energy.k, head_dim, dtype=values.dtype, device=values.device)
    if steps == 1 and step is None:  # a step of the search: as few operations as possible
        valid = ~padding_mask.view(-1) if frame.has_padding else None
        weights = decode_weights(energy, positions, constants, frame.position_bound)
        context, buffer[STATE_KEYS[0]] = weighted_decode_step(weights, values, state, valid)
        return context
    weights = (decode_weights(energy, positions, constants, frame.position_bound) if step is None
               else energy.energy_rows(positions))
    outputs = []
    for t in range(steps):
        pad = padding_mask[:, t]
        valid = ~pad if frame.has_padding else None
        if step is None:
            out, state = weighted_decode_step(weights[:, :, t:t + 1], values[:, :, t:t + 1], state, valid)
        else:
            state = push_packed(state, values[:, :, t:t + 1], valid)
            out = step(weights[:, :, t], *unpack_state(state, positions[:, t], values.dtype))
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
    if kernel_common.on_gpu(late.device):  # checked on the device: no synchronisation
        torch._assert_async(late == 0, "rPosNet constant-state decoding starts at the first target token: feed the "
                                       "decoder the target from its first token on (as fairseq's search does)")
    elif bool(late > 0):
        raise ValueError(f"rPosNet constant-state decoding starts at the first target token, but its first "
                         f"incremental call starts a hypothesis at position {int(late)}: feed the decoder "
                         f"the target from its first token on (as fairseq's search does), or run a full forward")


def decode_weights(energy: RelativeTableEnergy, query_positions: Tensor, constants: Optional[Dict[str, Tensor]] = None,
                   position_bound: Optional[int] = None) -> Tensor:
    """(B, H, T, K+1) constant-state decoding weights (recent slots 0..K-1, then one far key) of the queries at
    ``query_positions`` (B, T): without gradients and with ``constants`` (the running decode's) read from the
    decode-weight table, else computed from their energy rows (``position_decode_weights``)."""
    # Why the table lives in the decode's constants, for exactly one decode: it is built from the energies
    # on a decode's first step and must never outlive them. Kept on the module, it would go stale when
    # decoding in the training process (--eval-bleu validation) follows optimizer steps, which fairseq
    # writes through p.data (changing neither a parameter's storage nor its version: nothing to key a cache
    # on), and when weights are loaded or converted in place. Rebuilding it costs one energy_table and a
    # softmax per sublayer per decode. Beam search does not reorder it (every hypothesis shares it).
    if constants is None or torch.is_grad_enabled():
        return position_decode_weights(energy.energy_rows(query_positions), query_positions[:, None, :])
    table = constants.get(TABLE_KEY)
    if table is None:
        table = constants[TABLE_KEY] = decode_table(energy, table_positions(energy, query_positions, position_bound), 0)
    elif (kernel_common.on_gpu(query_positions.device)
          and table_positions(energy, query_positions, position_bound) > table.size(0)):
        # on a GPU, index_select cannot raise for a position beyond the table
        table = constants[TABLE_KEY] = decode_table(energy, table_positions(energy, query_positions), table.size(0))
    batch, steps = query_positions.shape
    flat = query_positions.view(-1) if steps == 1 else query_positions.reshape(-1)
    try:  # on the CPU a position >= P makes index_select raise: no bound check on every step
        rows = table.index_select(0, flat)
    except IndexError:
        table = constants[TABLE_KEY] = decode_table(energy, table_positions(energy, query_positions), table.size(0))
        rows = table.index_select(0, flat)
    return rows if steps == 1 else rows.view(batch, steps, *table.shape[1:]).squeeze(3).transpose(1, 2)


def decode_table(energy: RelativeTableEnergy, needed: int, current: int) -> Tensor:
    """The (P, H, 1, K+1) decode-weight table for at least ``needed`` positions: P at least MIN_POSITIONS
    and twice ``current`` (the table it replaces), capped at the energy's ``decode_weight_limit`` unless the
    position needs more (then ``energy_table`` raises the energy's error for it)."""
    size = max(needed, MIN_POSITIONS, 2 * current)
    limit = energy.decode_weight_limit()
    if limit is not None:
        size = min(size, max(limit, needed))
    with torch.no_grad():
        table = energy.energy_table(size)
        positions = torch.arange(size, device=table.device)
        return position_decode_weights(table.transpose(0, 1), positions[:, None]).unsqueeze(2)
