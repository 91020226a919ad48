"""aPosNet decoder self-attention while decoding: one row of its energy table per step (GPA Eq. 8, Section 4.1;
docs/search-time.md).

aPosNet's energies e_nm depend on positions only: a table E (H, N_q, N_k), stored in a search-time model
(posmix-freeze) and built once per decode from W^Q n~ and W^K m~ in a trained one (``energy_table``, as posmix-freeze
builds it; kept in the decode's constants, never beyond them: mixers/paths/constant_state.py says why). When a decode
has fed the decoder one token per call from the first on, none of them padding (fairseq's search), the keys of the
step at position t are the positions 0..t in order, and its weights, softmax_m E[h, t, m] over m <= t, are the same
for every hypothesis: a step reads one row of the table and takes one softmax per head, where dense mixing projects
the step's query, multiplies it with every cached key, masks the energies and reads the host for rows without keys.

Numbers: a frozen table's rows are the energies dense mixing gathers, so the contexts are dense mixing's bit for bit;
a trained model's table computes W^Q n~ once per position rather than once per token (another summation order, the
last bits; the trained rPosNet's decode-weight table does the same). Whether a decode has that form is settled per
call from host-known sizes (the call's width of tokens, the cached keys) and kept in the decode's constants: a call
that breaks it (padding, a first call past position 0, a prefix that grew by more than one token) makes the sublayer
mix densely for the rest of the decode, from the keys it has kept. A trained model mixes densely with gradients on.
"""
import torch
from torch import Tensor

from ..engine.mixing import MixingCall, MixingPath
from ..engine.table_energy import AbsoluteTableEnergy

#: entries of a decode's constants (``BatchFirstIncrementalState.decode_constants``): False once a call broke the form;
#: a trained energy's table
FORM_KEY, TABLE_KEY = "keys_are_positions_0_to_t", "absolute_energy_table"
#: the smallest table built for a trained energy (positions 0..63 cover most sentences in one go)
MIN_POSITIONS = 64


class AbsoluteTableDecoding(MixingPath):
    name = "table-step"

    def serves(self, mixer, call: MixingCall) -> bool:
        energy = mixer.energy
        if not call.decoding_step or not (energy.frozen or not torch.is_grad_enabled()):
            return False
        constants = mixer._get_decode_constants(call.incremental_state)
        if constants.get(FORM_KEY, True):
            buffer = mixer._get_input_buffer(call.incremental_state)
            cached = buffer["values"].size(2) if "values" in buffer else 0
            frame = call.frame
            if call.query.size(0) != 1 or frame.position_bound != cached + 1 or frame.has_padding:
                constants[FORM_KEY] = False
        return (constants.get(FORM_KEY, True) and not call.weights_requested and call.attn_mask is None
                and not (mixer.training and mixer.attention_dropout > 0))

    def mix(self, mixer, call: MixingCall):
        energy = mixer.energy
        # a trained energy keeps its keys as dense mixing does, which a decode that breaks the form goes on from
        values, _, _, _ = mixer.keys_and_values(call, key_features=not energy.frozen)  # (B, H, t + 1, D_h)
        keys = values.size(2)
        if energy.frozen:
            energies = energy.decoding_row(keys - 1, keys)  # (H, t + 1)
        else:
            energies = trained_table(energy, mixer._get_decode_constants(call.incremental_state), keys)[
                :, keys - 1, :keys]
        weights = torch.softmax(energies.to(call.query.dtype).float(), dim=-1).to(values.dtype)
        return torch.matmul(weights.view(1, values.size(1), 1, keys), values), None


def trained_table(energy: AbsoluteTableEnergy, constants, positions: int) -> Tensor:
    """The decode's (H, P, P) energy table of a trained energy covering ``positions``: P at least MIN_POSITIONS and
    twice the table it replaces, capped at a learned position table's size unless the positions need more (its
    error then names the option that sizes it)."""
    table = constants.get(TABLE_KEY)
    if table is None or table.size(1) < positions:
        size = max(positions, MIN_POSITIONS, 2 * (0 if table is None else table.size(1)))
        limit = getattr(energy.query_table, "max_positions", None)  # a learned n~ (= m~ in self-attention)
        if limit is not None:
            size = min(size, max(limit, positions))
        with torch.no_grad():
            table = constants[TABLE_KEY] = energy.energy_table(size, size)
    return table
