"""aPosNet and rPosNet in a full forward (training, a teacher-forced pass, the encoder at search), mixed from
their energy table: the energies depend on positions only (GPA Eq. 8; Eqs. 9-10), so W^Q n~ (and W^K m~) are
computed once per position of the call, not once per token, and the softmax of dense mixing once per distinct
row of (query positions, key positions, key padding), on the CPU (sentences of one length share it; a GPU keeps
a row per sentence: finding them would read the device). Decoding steps, calls asking for the weights, frozen
tables and position-table dropout in training (rows that differ per token) run dense mixing.
"""
import torch
import torch.nn.functional as F
from torch import Tensor

from ...kernels import common as kernel_common
from ..engine.energy import masked_softmax
from ..engine.mixing import MixingCall, MixingPath


class PositionTableMixing(MixingPath):
    name = "table"

    def serves(self, mixer, call: MixingCall) -> bool:
        energy = mixer.energy
        return (call.incremental_state is None and not call.weights_requested and not energy.frozen
                and not (energy.training and energy.table_dropout > 0))

    def mix(self, mixer, call: MixingCall):
        values, _, key_positions, key_pad = mixer.keys_and_values(call, key_features=False)
        rows = [call.frame.positions, key_positions, key_pad]
        first, inverse = distinct_rows(*rows)
        if first is not None:
            rows = [t.index_select(0, first) for t in rows]
        logits = mixer.energy.table_logits(rows[0], rows[1], positions_needed(rows[0]), positions_needed(rows[1]))
        weights = masked_softmax(logits.to(call.query.dtype), call.excluded_keys(rows[2])[:, None])
        if first is not None:  # each sentence's row of weights
            weights = weights.index_select(0, inverse)
        probs = F.dropout(weights, p=mixer.attention_dropout, training=mixer.training).to(values.dtype)
        return torch.matmul(probs, values), None


def positions_needed(positions: Tensor) -> int:
    """How many positions a table covers for ``positions`` (B, L): up to the largest on the CPU, the L columns
    on a GPU (a host-known bound)."""
    if kernel_common.on_gpu(positions.device) or not positions.numel():
        return max(positions.size(1), 1)
    return int(positions.max()) + 1


def distinct_rows(*tensors: Tensor):
    """(first, inverse) over the rows of ``tensors`` (each (B, ...)) taken together: the first row of each
    distinct value and the group of each row; (None, None) on a GPU (no host read)."""
    batch = tensors[0].size(0)
    if kernel_common.on_gpu(tensors[0].device) or batch == 0:
        return None, None
    key = torch.cat([t.reshape(batch, -1).long() for t in tensors], dim=1)
    if bool((key == key[:1]).all()):
        return key.new_zeros(1), key.new_zeros(batch)
    groups, inverse = torch.unique(key, dim=0, return_inverse=True)
    first = torch.full((groups.size(0),), batch, dtype=torch.long, device=key.device)
    return first.scatter_reduce_(0, inverse, torch.arange(batch, device=key.device), "amin"), inverse
