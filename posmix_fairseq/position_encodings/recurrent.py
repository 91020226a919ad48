"""``rpehead`` and ``mprhead``: recurrent positional embedding (RecPE). Each embedded word vector
x_j (D) is split into x^p_j (its first d_p dims) and x^r_j (its last d_r = t D / H dims, t =
``--<side>-rpe-heads``):

    r_j = tanh(f_RNN(x^r_j, r_{j-1}) W^r + b^r)                    (Eq. 1)
    p_j = x^p_j + pe_j                                              (Eq. 3)
    pe_(j,2i) = sin(j / 10000^(2i/d_p)), pe_(j,2i+1) = cos(...)     (Eq. 2: sine and cosine interleaved)
    RPEHead: m_j = [p_j : r_j]                                      (Eq. 4)
    MPRHead: m_j = [p^1_j : r^1_j : ... : p^H_j : r^H_j]            (Eq. 5)

with p^h (d_p/H), r^h (d_r/H) the h-th slices. m_j enters the Transformer's first layer, every head
over all of m_j (the reading of the paper's parameter counts: docs/choices.md). The decoder runs
forward only, keeping r_{j-1} (and an LSTM cell's c) in fairseq's incremental state. Old
checkpoints' ``sliced-legacy`` reading (the stored legacy reading ``rpe-reading``) puts pe_j in the
[sin | cos] layout, and head h of the side's first self-attention layer reads slice h of m_j only.
"""
import torch
from torch import Tensor, nn

from ..core.number_ranges import POSITIVE_INT
from ..core.incremental import BatchFirstIncrementalState
from ..core.position_tables import interleaved_sinusoids, sinusoidal_encoding
from ..core.positions import gather_rows, left_aligned, reversed_within_length
from .base import PositionEncodingSpec, register_position_encoding

CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}
DIRECTIONS = ("forward", "backward", "bidirectional")
SLICED_LEGACY = "sliced-legacy"  # the stored legacy reading "rpe-reading" of checkpoints made before the marker


class RecurrentCell(nn.Module):
    """One direction of Eq. 1: r_j = tanh(W^r f_RNN(x^r_j, r_{j-1}) + b^r)."""

    def __init__(self, cell: str, input_dim: int, units: int):
        super().__init__()
        self.is_lstm = cell == "lstm"
        self.cell = CELLS[cell](input_dim, units)
        self.output = nn.Linear(units, units)  # W^r, b^r

    def initial_state(self, batch: int, like: Tensor):
        zeros = like.new_zeros(batch, self.cell.hidden_size)
        return (zeros, zeros) if self.is_lstm else (zeros,)

    def step(self, x: Tensor, state):
        """(B, d_in), state tuple -> r_j (B, units), new state tuple (r_j first)."""
        h, *rest = self.cell(x, state) if self.is_lstm else (self.cell(x, state[0]),)
        r = torch.tanh(self.output(h))
        return r, (r, *rest)

    def run(self, x: Tensor) -> Tensor:
        """x (B, T, d_in) left-aligned -> r (B, T, units), left to right."""
        state, outputs = self.initial_state(x.size(0), x), []
        for j in range(x.size(1)):
            r, state = self.step(x[:, j], state)
            outputs.append(r)
        return torch.stack(outputs, dim=1)


class RecurrentPositionalEmbedding(BatchFirstIncrementalState):
    def __init__(self, spec: PositionEncodingSpec, per_head: bool):
        super().__init__()
        opts, prefix = spec.options, spec.side.flag_prefix
        d, h, t = spec.embed_dim, spec.num_heads, int(opts["rpe-heads"])
        if not 1 <= t < h:
            raise ValueError(f"{prefix}-rpe-heads must be in [1, {h - 1}] (t of the {h} heads; got {t})")
        self.d_r = t * d // h
        self.d_p = d - self.d_r
        self.num_heads, self.per_head = h, per_head
        if per_head and (self.d_p % h or self.d_r % h):
            raise ValueError(f"{prefix}-position-encoding mprhead splits P ({self.d_p}) and R ({self.d_r}) into "
                             f"{h} heads: choose {prefix}-rpe-heads and {prefix}-embed-dim so both divide")
        self.direction = opts["rpe-direction"]
        if spec.side.causal and self.direction != "forward":
            raise ValueError(f"{prefix}-rpe-direction must be forward in the decoder (left to right, for "
                             f"incremental decoding; got {self.direction})")
        cell = opts["rpe-cell"]
        if self.direction == "bidirectional":
            if self.d_r % 2:
                raise ValueError(f"{prefix}-rpe-direction bidirectional needs an even d_r (got {self.d_r})")
            self.cells = nn.ModuleList([RecurrentCell(cell, self.d_r, self.d_r // 2) for _ in range(2)])
        else:
            self.cells = nn.ModuleList([RecurrentCell(cell, self.d_r, self.d_r)])
        self.sinusoids = opts["rpe-sinusoids"] == "on"
        self.legacy = opts.get("rpe-reading") == SLICED_LEGACY

    def position_sinusoids(self, positions: Tensor) -> Tensor:
        """pe_j of Eq. 2 (interleaved; the [sin | cos] layout for sliced-legacy checkpoints)."""
        if self.legacy:
            return sinusoidal_encoding(positions, self.d_p)
        return interleaved_sinusoids(positions, self.d_p, self.d_p)

    def forward(self, x, frame):
        x_p, x_r = x[..., : self.d_p], x[..., self.d_p:]
        p = x_p + self.position_sinusoids(frame.positions).to(x.dtype) if self.sinusoids else x_p
        r = self._step(x_r, frame) if frame.incremental_state is not None else self._sentences(x_r, frame)
        if not self.per_head:  # Eq. 4: [P : R]
            return torch.cat([p, r], dim=-1)
        heads = self.num_heads  # Eq. 5: per-head [p^h : r^h]
        p = p.reshape(*p.shape[:-1], heads, self.d_p // heads)
        r = r.reshape(*r.shape[:-1], heads, self.d_r // heads)
        return torch.cat([p, r], dim=-1).flatten(-2)

    def _sentences(self, x_r, frame):
        batch, length = x_r.shape[:2]
        order, lengths = left_aligned(frame.padding_mask, batch, length, x_r.device)
        aligned = gather_rows(x_r, order)
        outputs = []
        backward_flags = {"forward": (False,), "backward": (True,), "bidirectional": (False, True)}[self.direction]
        for cell, backward in zip(self.cells, backward_flags):
            if backward:
                flip = reversed_within_length(lengths, length)
                outputs.append(gather_rows(cell.run(gather_rows(aligned, flip)), flip))
            else:
                outputs.append(cell.run(aligned))
        return gather_rows(torch.cat(outputs, dim=-1), frame.positions)

    def _step(self, x_r, frame):
        """One decoding step (B, 1, d_r); a padding token leaves the state unchanged."""
        (cell,) = self.cells
        buffer = self._get_input_buffer(frame.incremental_state)
        names = ("r", "c") if cell.is_lstm else ("r",)
        old = tuple(buffer[n] for n in names) if "r" in buffer else cell.initial_state(x_r.size(0), x_r)
        r, state = cell.step(x_r[:, 0], old)
        keep = frame.padding_mask[:, :1]
        state = tuple(torch.where(keep, o, s) for o, s in zip(old, state))
        self._set_input_buffer(frame.incremental_state, dict(zip(names, state)))
        return r.unsqueeze(1)


RPE_OPTIONS = {
    "rpe-heads": dict(type=POSITIVE_INT, default=1, metavar="T",
                      help="t: heads fed by the recurrent part, d_r = t * D / H (default 1)"),
    "rpe-cell": dict(choices=tuple(CELLS), default="gru", help="f_RNN of Eq. 1 (default gru)"),
    "rpe-direction": dict(choices=DIRECTIONS, default="forward",
                          help="direction of the RecPE recurrence (decoder: forward only; default forward)"),
    "rpe-sinusoids": dict(choices=("on", "off"), default="on",
                          help="add the d_p-dim sinusoids to P (Eqs. 2-3; off: the -PE ablation)"),
}


@register_position_encoding("rpehead", options=RPE_OPTIONS,
                            description="RPEHead (Chen et al. 2019, Eq. 4): t heads fed by a recurrent embedding")
def build_rpehead(spec: PositionEncodingSpec):
    return RecurrentPositionalEmbedding(spec, per_head=False)


@register_position_encoding("mprhead", options=RPE_OPTIONS,
                            description="MPRHead (Chen et al. 2019, Eq. 5): every head gets a slice of P and of R")
def build_mprhead(spec: PositionEncodingSpec):
    return RecurrentPositionalEmbedding(spec, per_head=True)
