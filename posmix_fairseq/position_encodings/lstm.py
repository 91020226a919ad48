"""``lstm``: LSTM positional encoding (PEA Section 3.3: "a single BiLSTM layer in the encoder", "a
single LSTM layer between the embedding layer and the first decoder layer"):

    encoder: x'_j = W [LSTM_fwd(x_1..x_j) : LSTM_bwd(x_j..x_J)] + b   (U units per direction)
    decoder: x'_i = W LSTM(x_1..x_i) + b                               (U units; left to right)

x' replaces x (no residual); W, b (``proj``) exist only when the LSTM output is wider than D. U's
default 2D gives PEA's "20%" (docs/choices.md). Each sentence runs over its own tokens (packed); the
decoder keeps (h, c) in fairseq's incremental state, so a step costs O(1) in the prefix length.
"""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..core.number_ranges import POSITIVE_INT
from ..core.incremental import BatchFirstIncrementalState
from ..core.positions import gather_rows, left_aligned
from .base import PositionEncodingSpec, register_position_encoding


@register_position_encoding(
    "lstm", description="LSTM positional encoding: biLSTM (encoder) / LSTM (decoder) after the embeddings",
    options={"position-lstm-layers": dict(type=POSITIVE_INT, default=1, metavar="N",
                                          help="layers of the positional LSTM (default 1)"),
             "position-lstm-units": dict(type=POSITIVE_INT, default=None, metavar="U",
                                         help="units of the positional LSTM per direction, projected to the model "
                                              "dim when wider (default 2 x model dim, the paper's +20%% parameters)")})
class LstmPositionEncoding(BatchFirstIncrementalState):
    def __init__(self, spec: PositionEncodingSpec):
        super().__init__()
        layers = int(spec.options["position-lstm-layers"])
        self.bidirectional = not spec.side.causal
        hidden = spec.options["position-lstm-units"]
        hidden = 2 * spec.embed_dim if hidden is None else int(hidden)
        self.lstm = nn.LSTM(spec.embed_dim, hidden, num_layers=layers, batch_first=True,
                            bidirectional=self.bidirectional, dropout=spec.dropout if layers > 1 else 0.0)
        width = hidden * (2 if self.bidirectional else 1)
        self.proj = nn.Linear(width, spec.embed_dim) if width != spec.embed_dim else None

    def forward(self, x, frame):
        if frame.incremental_state is not None:
            out = self._step(x, frame)
        else:
            order, lengths = left_aligned(frame.padding_mask, x.size(0), x.size(1), x.device)
            packed = pack_padded_sequence(gather_rows(x, order), lengths.clamp(min=1).cpu(), batch_first=True,
                                          enforce_sorted=False)
            out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=x.size(1))
            out = gather_rows(out, frame.positions)  # back to each token's column
        return out if self.proj is None else self.proj(out)

    def _step(self, x, frame):
        """One decoding step (B, 1, D); a padding token leaves the state unchanged."""
        buffer = self._get_input_buffer(frame.incremental_state)
        state = None
        if "h" in buffer:  # stored batch first: (B, layers, units)
            state = (buffer["h"].transpose(0, 1).contiguous(), buffer["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.lstm(x, state)
        if state is not None:
            keep = frame.padding_mask[:, 0].view(1, -1, 1)
            h, c = torch.where(keep, state[0], h), torch.where(keep, state[1], c)
        self._set_input_buffer(frame.incremental_state, {"h": h.transpose(0, 1), "c": c.transpose(0, 1)})
        return out

