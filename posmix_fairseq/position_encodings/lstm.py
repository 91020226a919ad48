"""``lstm``: LSTM positional encoding (PEA).

An LSTM between the embeddings and the first layer is the only position signal
(PEA Section 3.3: "a single BiLSTM layer in the encoder", "a single LSTM
layer between the embedding layer and the first decoder layer"):

    encoder: x'_j = W [LSTM_fwd(x_1..x_j) : LSTM_bwd(x_j..x_J)] + b   (U units per direction)
    decoder: x'_i = W LSTM(x_1..x_i) + b                               (U units; left to right)

and x' replaces x as the input of the first layer (no residual connection, no other
position embedding). The paper gives no width, only that the LSTMs add "20% in our case" to a
Base model (D = 512): U = ``--S-position-lstm-units``, by default 2D (1024 at Base), which adds
+21.9% to its Zh-En Base model (32k vocabularies, nothing shared; D/2 and D units, the widths
of checkpoints stored without a defaults version, add +3.9%). W, b (``proj``) map the LSTM
output to D; there is none when the output is D wide already (U = D/2 in the encoder, U = D in
the decoder). Padding is excluded (each sentence runs over its own tokens, left- or
right-padded alike); in incremental decoding the decoder LSTM's (h, c) lives in fairseq's
incremental state, reordered with the beams, so a step costs O(1) in the prefix length.
Parameters per direction and layer: 4 (h (d_in + h) + 2 h) for h units, plus the projection.
"""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..core.incremental import BatchFirstIncrementalState
from ..core.positions import gather_rows, left_aligned
from .base import PositionEncodingSpec, register_position_encoding


class LstmPositionEncoding(BatchFirstIncrementalState):
    def __init__(self, spec: PositionEncodingSpec):
        super().__init__()
        layers = int(spec.options["position-lstm-layers"])
        if layers < 1:
            raise ValueError(f"{spec.side.flag_prefix}-position-lstm-layers must be >= 1 (got {layers})")
        self.bidirectional = not spec.side.causal
        hidden = spec.options["position-lstm-units"]
        hidden = 2 * spec.embed_dim if hidden is None else int(hidden)
        if hidden < 1:
            raise ValueError(f"{spec.side.flag_prefix}-position-lstm-units must be >= 1 (got {hidden})")
        self.lstm = nn.LSTM(spec.embed_dim, hidden, num_layers=layers, batch_first=True,
                            bidirectional=self.bidirectional, dropout=spec.dropout if layers > 1 else 0.0)
        width = hidden * (2 if self.bidirectional else 1)
        self.proj = nn.Linear(width, spec.embed_dim) if width != spec.embed_dim else None

    def forward(self, x, frame):
        out = self._lstm(x, frame)
        return out if self.proj is None else self.proj(out)

    def _lstm(self, x, frame):
        if frame.incremental_state is not None:
            return self._step(x, frame)
        order, lengths = left_aligned(frame.padding_mask, x.size(0), x.size(1), x.device)
        packed = pack_padded_sequence(gather_rows(x, order), lengths.clamp(min=1).cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=x.size(1))
        return gather_rows(out, frame.positions)  # back to each token's column

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


@register_position_encoding(
    "lstm", description="LSTM positional encoding: biLSTM (encoder) / LSTM (decoder) after the embeddings",
    options={"position-lstm-layers": dict(type=int, default=1, metavar="N",
                                          help="layers of the positional LSTM (default 1)"),
             "position-lstm-units": dict(type=int, default=None, metavar="U",
                                         help="units of the positional LSTM per direction, its output projected "
                                              "to the model dim when wider (default 2 x model dim: 1024 at Base, "
                                              "the paper's +20%% parameters; docs/choices.md)")})
def build_lstm_positions(spec: PositionEncodingSpec):
    return LstmPositionEncoding(spec)
