"""The weights of a constant-state decoding step for every query position, computed once per decode.

GPA Eq. 10 with gamma = 1: a decoding step
of rPosNet decoder self-attention at position t weighs the last K values and the sum of the older
ones with the softmax of the table row E[t], and which of them exist follows from t too
(``kernels.decode_step.position_decode_weights``). So the weights are a function of t alone, the
same for every sentence and hypothesis. At search (no gradient) a sublayer keeps them as a table
of (P, H, 1, K+1) rows and a step reads its row with one ``index_select``: the softmax, the masks
and, for a trained rPosNet, W^Q n~ (a D x D product per step) are no longer computed every step.

When the table is computed: on the first step of each decode, from the energy's
``energy_table(P)``, and kept in that decode's incremental state (fairseq's dict, one per call of
the search), next to the constant state but outside the batch-first entries that beam search
reorders: the table is the same for every hypothesis, so reordering leaves it alone. It lives
exactly as long as the decode, so it is correct by construction: an optimizer step between two
decodes (fairseq's optimizers write through ``p.data``, which changes neither the storage nor the
version of a parameter, so no key on the tensors could see it), loaded weights, a model moved or
converted, all reach the next decode, since nothing is reused across decodes. Within a decode the
weights cannot change. A frozen (search-time) model gets the same per-decode table: its stored
table is a parameter without gradient, but ``load_state_dict``, ``.data`` and ``.half()`` can still
change it in place, and the rebuild costs one read of P table rows and a softmax over P x (K+1)
weights per sublayer per decode, nothing beside the decode itself. A position beyond P grows the
table (P doubles, up to the energy's limit: the frozen table's N, a learned n~ table's size; a
position beyond the limit gets the energy's own clear error).
"""
from typing import Dict, Optional

import torch
from torch import Tensor

from ...kernels import common as kernel_common

from ...kernels.decode_step import position_decode_weights

#: the smallest table computed (positions 0..63 cover most sentences in one go)
MIN_POSITIONS = 64

#: the entry of a decode's constants (``BatchFirstIncrementalState.decode_constants``) holding the table
TABLE_KEY = "decode_weight_table"


def decode_weight_rows(energy, query_positions: Tensor, constants: Dict[str, Tensor],
                       position_bound: Optional[int] = None) -> Tensor:
    """(B, H, T, K+1) weights of the queries at ``query_positions`` (B, T), read from the table in
    ``constants`` (this decode's entries; built here on the first step, grown when a later position
    needs it; ``position_bound``, a host-known bound on the positions, replaces reading them off the CPU)."""
    limit = energy.decode_weight_limit()
    if position_bound is not None and limit is not None:  # positions beyond the limit: the position table's error
        position_bound = min(position_bound, limit)
    table = constants.get(TABLE_KEY)
    if table is None:
        table = constants[TABLE_KEY] = build_table(energy, needed(query_positions, position_bound), 0)
    elif (not kernel_common.host_checks(query_positions.device)
          and needed(query_positions, position_bound) > table.size(0)):
        # off the CPU, index_select cannot raise for a position beyond the table
        table = constants[TABLE_KEY] = build_table(energy, needed(query_positions), table.size(0))
    batch, steps = query_positions.shape
    flat = query_positions.view(-1) if steps == 1 else query_positions.reshape(-1)
    try:  # on the CPU a position >= P makes index_select raise: no bound check on every step
        rows = table.index_select(0, flat)
    except IndexError:
        table = constants[TABLE_KEY] = build_table(energy, needed(query_positions), table.size(0))
        rows = table.index_select(0, flat)
    return rows if steps == 1 else rows.view(batch, steps, *table.shape[1:]).squeeze(3).transpose(1, 2)


def needed(query_positions: Tensor, position_bound: Optional[int] = None) -> int:
    """Positions the table must cover: ``position_bound`` where known (no device synchronisation),
    else the last query position + 1 (read from the positions)."""
    if position_bound is not None:
        return max(1, position_bound)
    return int(query_positions.max()) + 1 if query_positions.numel() else 1


def build_table(energy, needed_positions: int, current: int) -> Tensor:
    """The (P, H, 1, K+1) table for at least ``needed_positions`` positions: P is at least
    :data:`MIN_POSITIONS` and twice ``current`` (the size of the table it replaces), capped at the
    energy's ``decode_weight_limit()`` unless the position needs more (then ``energy_table`` raises
    the energy's error for it)."""
    size = max(needed_positions, MIN_POSITIONS, 2 * current)
    limit = energy.decode_weight_limit()
    if limit is not None:
        size = min(size, max(limit, needed_positions))
    with torch.no_grad():
        table = energy.energy_table(size)  # (H, P, 2K+1); a position beyond the limit raises here
        positions = torch.arange(size, device=table.device)
        return position_decode_weights(table.transpose(0, 1), positions[:, None]).unsqueeze(2)
