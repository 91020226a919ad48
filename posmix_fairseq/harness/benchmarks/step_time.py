"""Where a beam-search step's wall time goes: inside the model's decoder, or in fairseq's search around it.

fairseq's ``SequenceGenerator`` calls the model only through its ``EnsembleModel``, and takes one given to it as it
is. :class:`TimedEnsemble` is that class with each call into the model timed, during the decode that is measured:

- *decoder*: ``forward_decoder``, the decoder's incremental step and the log-softmax of its output;
- *reorder*: ``reorder_incremental_state`` and ``reorder_encoder_out``, the beam's reordering of the model's state
  (called by the search, computed by the model's modules);
- *encoder*: ``forward_encoder``, once per batch;
- *search*: the rest of ``generate``: fairseq's beam search (top-k, scores, finished hypotheses, bookkeeping).

The shares are of the whole decode (they sum to 100%); the decoder's share is the ceiling of any change inside the
model's step. On a GPU each timed call ends with a synchronisation, so that its device work counts where it is
launched rather than where the search next waits.
"""
import time
from collections import Counter
from typing import Dict

import torch
from fairseq.sequence_generator import EnsembleModel

#: the parts of a decode's wall time, in the order they are printed
PARTS = ("decoder", "reorder", "encoder", "search")


class TimedEnsemble(EnsembleModel):
    """fairseq's EnsembleModel whose calls into the model add their wall time to ``seconds`` (a Counter by part);
    ``steps`` counts the decoder's calls. Pass it to ``SequenceGenerator`` in place of the list of models."""

    def __init__(self, models):
        super().__init__(models)
        self.seconds: Counter = Counter()
        self.steps = 0
        self.synchronize = next(models[0].parameters()).is_cuda  # the models are on their device already

    def _timed(self, part: str, call, *args, **kwargs):
        start = time.perf_counter()
        out = call(*args, **kwargs)
        if self.synchronize:
            torch.cuda.synchronize()
        self.seconds[part] += time.perf_counter() - start
        return out

    def forward_encoder(self, net_input):
        return self._timed("encoder", super().forward_encoder, net_input)

    def forward_decoder(self, tokens, encoder_outs, incremental_states, temperature: float = 1.0):
        self.steps += 1
        return self._timed("decoder", super().forward_decoder, tokens, encoder_outs, incremental_states, temperature)

    def reorder_encoder_out(self, encoder_outs, new_order):
        return self._timed("reorder", super().reorder_encoder_out, encoder_outs, new_order)

    def reorder_incremental_state(self, incremental_states, new_order):
        return self._timed("reorder", super().reorder_incremental_state, incremental_states, new_order)

    def reset(self):
        self.seconds, self.steps = Counter(), 0


def shares(seconds: Dict[str, float], total: float, steps: int) -> Dict[str, float]:
    """{"step_ms": wall ms per decoder step, and each of :data:`PARTS`: its percentage of ``total``} from the
    ``seconds`` of a :class:`TimedEnsemble` over decodes that took ``total`` seconds of wall time. The search's
    share is what the model's calls leave; timed calls longer than the whole are an error, not a negative share."""
    inside = sum(seconds.get(part, 0.0) for part in PARTS[:-1])
    if total <= 0 or steps <= 0 or inside > total * (1 + 1e-9):
        raise ValueError(f"step shares: the model's calls took {inside:.6f} s of a {total:.6f} s decode over "
                         f"{steps} steps; each must be positive and the calls within the decode")
    out = {part: 100.0 * seconds.get(part, 0.0) / total for part in PARTS[:-1]}
    out["search"] = max(0.0, 100.0 - sum(out.values()))
    out["step_ms"] = 1000.0 * total / steps
    return out
