"""The machinery of ``rpehead`` and ``mprhead`` (their modules register them): recurrent positional
embedding (Chen et al. 2019, EMNLP; RecPE).

Each embedded word vector x_j (D) is split into x^p_j (its first d_p dims) and x^r_j (its last
d_r dims), d_r = t D / H for t = ``--S-rpe-heads``:

    r_j = tanh(f_RNN(x^r_j, r_{j-1}) W^r + b^r)                    (Eq. 1)
    p_j = x^p_j + pe_j                                              (Eq. 3)
    pe_(j,2i) = sin(j / 10000^(2i/d_p)), pe_(j,2i+1) = cos(...)     (Eq. 2: sine and cosine interleaved)
    RPEHead: m_j = [p_j : r_j]                                      (Eq. 4)
    MPRHead: m_j = [p^1_j : r^1_j : ... : p^H_j : r^H_j]            (Eq. 5)

with p^h (d_p/H) and r^h (d_r/H) the h-th slices. m_j is the input of the first layer, whose
multi-head self-attention is the Transformer's (Eqs. 4-5: O_h = Att(Q W^Q_h, K W^K_h, V W^V_h)
with Q, K, V "depending on" T or M, i.e. every head projects all of m_j): the paper's
parameter counts grow (+0.49M RPEHead, +0.37M MPRHead at Base on WMT14 En-De) by the recurrent
part only. With the interleaved layout of Eq. 2 every slice p^h holds sine-cosine pairs.

Choices (the paper leaves them open): f_RNN is a GRU cell by default (``--S-rpe-cell``
gru|lstm|rnn) with d_r units, whose recurrent input is r_{j-1} as Eq. 1 writes (an LSTM cell
also carries its memory c). Direction (``--S-rpe-direction``): forward by default; the encoder
may run backward or bidirectionally (two cells of d_r/2 units, r = [r_fwd : r_bwd]); the decoder
must be forward (left to right), which makes decoding incremental: r_{j-1} (and c) are kept
in fairseq's incremental state. Ablations: ``--S-rpe-sinusoids off`` drops pe_j (the "-PE"
rows); an RecPE-free side is simply ``--S-position-encoding sinusoidal``.
``--S-rpe-reading sliced-legacy`` is the reading of checkpoints stored without a defaults version (head h of
the first layer computed from slice h of m_j only, the ``sliced_mha`` mixer, and pe_j in the
[sin | cos] layout); kept so that they load as trained.
Parameters: the cell(s) (GRU: 3 (d_r d_r + d_r d_r + 2 d_r)) and W^r, b^r (d_r^2 + d_r).
"""
import torch
from torch import Tensor, nn

from ..core.incremental import BatchFirstIncrementalState
from ..core.position_tables import interleaved_sinusoids, sinusoidal_encoding
from ..core.positions import gather_rows, left_aligned, reversed_within_length
from .base import PositionEncodingSpec

CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}
DIRECTIONS = ("forward", "backward", "bidirectional")
READINGS = ("paper", "sliced-legacy")


def first_self_mixer(options) -> str:
    """The first self-attention layer's mixer: the side's own (paper), or ``sliced_mha`` (sliced-legacy)."""
    return "sliced_mha" if options["rpe-reading"] == "sliced-legacy" else None


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
        if self.is_lstm:
            h, c = self.cell(x, state)
            r = torch.tanh(self.output(h))
            return r, (r, c)
        r = torch.tanh(self.output(self.cell(x, state[0])))
        return r, (r,)

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
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{prefix}-rpe-direction: {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if spec.side.causal and self.direction != "forward":
            raise ValueError(f"{prefix}-rpe-direction must be forward in the decoder (left to right, for "
                             f"incremental decoding; got {self.direction})")
        cell = opts["rpe-cell"]
        if cell not in CELLS:
            raise ValueError(f"{prefix}-rpe-cell: {cell!r} is not one of {', '.join(CELLS)}")
        if self.direction == "bidirectional":
            if self.d_r % 2:
                raise ValueError(f"{prefix}-rpe-direction bidirectional needs an even d_r (got {self.d_r})")
            self.cells = nn.ModuleList([RecurrentCell(cell, self.d_r, self.d_r // 2) for _ in range(2)])
        else:
            self.cells = nn.ModuleList([RecurrentCell(cell, self.d_r, self.d_r)])
        self.sinusoids = opts["rpe-sinusoids"] == "on"
        if opts["rpe-reading"] not in READINGS:
            raise ValueError(f"{prefix}-rpe-reading: {opts['rpe-reading']!r} is not one of {', '.join(READINGS)}")
        self.legacy = opts["rpe-reading"] == "sliced-legacy"

    def position_sinusoids(self, positions: Tensor) -> Tensor:
        """pe_j of Eq. 2 (interleaved; the [sin | cos] layout for sliced-legacy checkpoints)."""
        if self.legacy:
            return sinusoidal_encoding(positions, self.d_p)
        return interleaved_sinusoids(positions, self.d_p, self.d_p)

    def forward(self, x, frame):
        x_p, x_r = x[..., : self.d_p], x[..., self.d_p:]
        p = x_p + self.position_sinusoids(frame.positions).to(x.dtype) if self.sinusoids else x_p
        if frame.incremental_state is not None:
            r = self._step(x_r, frame)
        else:
            r = self._sentences(x_r, frame)
        return self.combine(p, r)

    def combine(self, p: Tensor, r: Tensor) -> Tensor:
        """Eq. 4 ([P : R]) or Eq. 5 (per-head [p^h : r^h])."""
        if not self.per_head:
            return torch.cat([p, r], dim=-1)
        heads = self.num_heads
        p = p.reshape(*p.shape[:-1], heads, self.d_p // heads)
        r = r.reshape(*r.shape[:-1], heads, self.d_r // heads)
        return torch.cat([p, r], dim=-1).flatten(-2)

    def _sentences(self, x_r, frame):
        batch, length = x_r.shape[:2]
        order, lengths = left_aligned(frame.padding_mask, batch, length, x_r.device)
        aligned = gather_rows(x_r, order)
        outputs = []
        for cell, backward in zip(self.cells, self._backward_flags()):
            if backward:
                flip = reversed_within_length(lengths, length)
                outputs.append(gather_rows(cell.run(gather_rows(aligned, flip)), flip))
            else:
                outputs.append(cell.run(aligned))
        return gather_rows(torch.cat(outputs, dim=-1), frame.positions)

    def _backward_flags(self):
        return {"forward": (False,), "backward": (True,), "bidirectional": (False, True)}[self.direction]

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
    "rpe-heads": dict(type=int, default=1, metavar="T",
                      help="t: heads fed by the recurrent part, d_r = t * D / H (default 1)"),
    "rpe-cell": dict(choices=tuple(CELLS), default="gru", help="f_RNN of Eq. 1 (default gru)"),
    "rpe-direction": dict(choices=DIRECTIONS, default="forward",
                          help="direction of the RecPE recurrence (decoder: forward only; default forward)"),
    "rpe-sinusoids": dict(choices=("on", "off"), default="on",
                          help="add the d_p-dim sinusoids to P (Eqs. 2-3; off: the -PE ablation)"),
    "rpe-reading": dict(choices=READINGS, default="paper",
                        help="paper: the first layer is multi-head attention over all of m_j (Eqs. 4-5; default); "
                             "sliced-legacy: head h reads only slice h of m_j, sinusoids in [sin | cos] layout "
                             "(checkpoints stored without a defaults version)"),
}
