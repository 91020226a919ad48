"""Incremental-decoding buffers kept in fairseq's incremental state, which fairseq's search makes anew
for every decode: the place for anything computed once per decode and reused by its steps."""
from typing import Dict, Optional

import torch
from torch import Tensor, nn
from fairseq.incremental_decoding_utils import with_incremental_state


@with_incremental_state
class BatchFirstIncrementalState(nn.Module):
    """A module that keeps a dict of batch-first tensors in fairseq's incremental state, which beam search's
    reordering index-selects, and a dict of the decode's constants (:meth:`_get_decode_constants`)."""

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "mix_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "mix_state", buffer)

    def _get_decode_constants(self, incremental_state) -> Dict[str, Tensor]:
        """The running decode's constants: tensors built on its first step, the same for every hypothesis
        (not reordered); created empty on first use and filled in place by the caller."""
        constants = self.get_incremental_state(incremental_state, "decode_constants")
        if constants is None:
            constants = {}
            self.set_incremental_state(incremental_state, "decode_constants", constants)
        return constants

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        buffer = self._get_input_buffer(incremental_state)
        if buffer:
            for key, value in buffer.items():
                if value is not None:
                    buffer[key] = value.index_select(0, new_order)
            incremental_state = self._set_input_buffer(incremental_state, buffer)
        return incremental_state
