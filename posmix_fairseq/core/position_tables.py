"""Position tables: sinusoidal and learned absolute tables (shared across the layers of a side),
relative-distance tables, PosNet's per-position kernels, and what ``posmix-plot`` shows of them."""
import math
from typing import Any, Dict, NamedTuple, Optional

import torch
from torch import Tensor, nn

from ..kernels import common as kernel_common
from .positions import left_aligned


class PositionFigure(NamedTuple):
    """What a module's ``position_figure(positions, query_positions, weights)`` answers for ``posmix-plot``
    (P, a sentence of P tokens; the queries whose weight profiles are shown; ``weights()`` the sublayer's
    (H, P, P) mixing weights for such a sentence), or None: its family (``rposnet``, ``aposnet``,
    ``gaussian``, ``linear``, ``t5``, ``posnet_attn``, ``posnet_embed``), the fields of the family's block and
    of this layer's entry, and the object a table shared by several layers is (None for a per-layer table)."""

    family: str
    block: Dict[str, Any]
    layer: Optional[Dict[str, Any]] = None
    shared: Optional[object] = None


def refer_to_shared(owner: nn.Module, name: str, module: Optional[nn.Module]) -> None:
    """Keeps ``module`` (a table the side's :class:`SharedPositionTables` owns) on ``owner`` as an
    unregistered reference: registered once, by its owner, it is saved once and its parameters are
    counted once, however many layers read it."""
    object.__setattr__(owner, name, module)


def sinusoidal_encoding(positions: Tensor, dim: int, freqs: Optional[Tensor] = None) -> Tensor:
    """Vaswani et al. (2017) sinusoids of (possibly negative) integer positions, fairseq layout
    [sin(p w_0..w_{d/2-1}) | cos(...)] with w_i = 10000^(-i/(d/2-1)); odd dim gets a zero column.
    ``freqs``: the w_i as :func:`sinusoid_frequencies` gives them on the positions' device (computed if None)."""
    if freqs is None:
        freqs = sinusoid_frequencies(dim, positions.device)
    angles = float_positions(positions).unsqueeze(-1) * freqs
    enc = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    if dim % 2 == 1:
        enc = torch.cat([enc, enc.new_zeros(*enc.shape[:-1], 1)], dim=-1)
    return enc


def sinusoid_frequencies(dim: int, device) -> Tensor:
    """The (dim // 2,) frequencies w_i of :func:`sinusoidal_encoding`, float32."""
    half = dim // 2
    scale = math.log(10000) / max(half - 1, 1)
    return torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -scale)


def float_positions(positions: Tensor) -> Tensor:
    """Integer positions as the float32 product with a float32 tensor reads them: left integer, the product
    converts them inside its own kernel (exactly below 2^24) without a conversion operator of its own."""
    return positions if not positions.is_floating_point() or positions.dtype == torch.float32 else positions.float()


#: layouts of a sinusoidal absolute table: fairseq's [sin | cos], or sine and cosine interleaved
ABSOLUTE_SINUSOIDS = ("concatenated", "interleaved")


class SinusoidalPositionTable(nn.Module):
    """Fixed sinusoidal absolute position embeddings, defined for any length, in ``layout``
    ``concatenated`` (fairseq's [sin | cos], :func:`sinusoidal_encoding`) or ``interleaved`` (the layout
    of Vaswani et al. (2017) and of the released code of GPA, :func:`interleaved_sinusoids`).

    The layers of a side share the table and read it at the positions of the same forward call, one tensor: the
    rows of the last positions read are kept and given again while that tensor is unchanged (the same object and
    the same version), so a side computes them once per call, not once per layer (a decoding step: once per step).
    An inference tensor keeps no version: one is read once per object (the positions a side's route computes for
    a call are never changed in place)."""

    def __init__(self, dim: int, layout: str = "concatenated"):
        super().__init__()
        if layout not in ABSOLUTE_SINUSOIDS:
            raise ValueError(f"unknown sinusoid layout {layout!r}; valid: {', '.join(ABSOLUTE_SINUSOIDS)}")
        self.dim, self.layout = dim, layout
        self._freqs: Dict[torch.device, Tensor] = {}  # by device, computed there: the same bits as computed per call
        self._last = None  # (positions, (their version or None, inference mode), rows)

    def forward(self, positions: Tensor) -> Tensor:
        # rows made in inference mode are given again only there (autograd cannot save inference tensors)
        version = (None if positions.is_inference() else positions._version, torch.is_inference_mode_enabled())
        last = self._last
        if last is not None and last[0] is positions and last[1] == version:
            return last[2]
        if self.layout == "interleaved":
            rows = interleaved_sinusoids(positions, self.dim, self.dim)
        else:
            freqs = self._freqs.get(positions.device)
            if freqs is None:
                with torch.inference_mode(False):  # kept for calls in and outside inference mode
                    freqs = self._freqs[positions.device] = sinusoid_frequencies(self.dim, positions.device)
            rows = sinusoidal_encoding(positions, self.dim, freqs)
        self._last = (positions, version, rows)
        return rows

    def __getstate__(self):  # a copy or a pickle keeps no rows of a past call
        return {**super().__getstate__(), "_freqs": {}, "_last": None}


class LearnedPositionTable(nn.Module):
    """Learned absolute position embeddings, one row per position below ``max_positions``; a position
    beyond the table is an error naming the option that sizes it."""

    def __init__(self, max_positions: int, dim: int, option: str, role: str):
        super().__init__()
        self.max_positions, self.option, self.role = max_positions, option, role
        self.weight = nn.Parameter(torch.empty(max_positions, dim))
        nn.init.normal_(self.weight, mean=0.0, std=dim ** -0.5)

    def position_limits(self):
        """(role, positions, option) of the table (the position-limit protocol)."""
        return [(self.role, self.max_positions, self.option)]

    def forward(self, positions: Tensor) -> Tensor:
        beyond = (f"beyond the learned position table of {self.max_positions} positions; raise {self.option} "
                  "(it sizes the table) or use sinusoidal position embeddings")
        if positions.numel() and kernel_common.on_gpu(positions.device):  # on the device: no synchronisation
            torch._assert_async(positions.max() < self.max_positions, f"a position is {beyond}")
        elif positions.numel() and int(positions.max()) >= self.max_positions:
            raise ValueError(f"position {int(positions.max())} is {beyond}")
        return nn.functional.embedding(positions, self.weight)


class SharedPositionTables:
    """Position tables shared by all layers of an encoder or a decoder (GPA Section 4.1: n~, m~ are
    shared across layers; only W^Q, W^K are per layer). A plain object, not a Module, so that mixers can
    reference it without registering the tables once per layer; the owner registers ``self.tables``."""

    def __init__(self):
        self.tables = nn.ModuleDict()

    def shared(self, key: str, factory) -> nn.Module:
        """The module stored under ``key``, made by ``factory()`` on first use."""
        if key not in self.tables:
            self.tables[key] = factory()
        return self.tables[key]

    @staticmethod
    def key(role: str, kind: str, dim: int, layout: str = "concatenated") -> str:
        """The name of the absolute table of ``role`` in ``tables`` (and in the state dict); only a
        sinusoidal table has a layout."""
        if kind == "sinusoidal" and layout != "concatenated":
            return f"{role}_{kind}_{layout}_{dim}"
        return f"{role}_{kind}_{dim}"

    def get(self, role: str, kind: str, dim: int, max_positions: int, option: str,
            layout: str = "concatenated") -> nn.Module:
        """The absolute position table of ``role`` (source/target): sinusoidal (in ``layout``) or learned."""
        key = self.key(role, kind, dim, layout)
        if kind == "sinusoidal":
            return self.shared(key, lambda: SinusoidalPositionTable(dim, layout))
        if kind == "learned":
            return self.shared(key, lambda: LearnedPositionTable(max_positions, dim, option, role))
        raise ValueError(f"unknown position embedding kind {kind!r}; valid: sinusoidal, learned")

    def layer_norm(self, table_key: str, dim: int) -> nn.Module:
        """The LayerNorm of the rows of the table ``table_key``, shared by the layers like the table."""
        return self.shared(f"{table_key}_layernorm", lambda: nn.LayerNorm(dim))


RELATIVE_EMBEDDING_HEADS = ("sliced", "shared")
RELATIVE_SINUSOIDS = ("d-model", "head")


def interleaved_sinusoids(positions: Tensor, dim: int, d_model: int) -> Tensor:
    """The first ``dim`` dimensions of the d_model-dimensional sinusoidal encoding in the papers' layout
    (PEA Eqs. 1-2; Vaswani et al. 2017): PE_{p,2i} = sin(p / 10000^(2i/d_model)), PE_{p,2i+1} =
    cos(p / 10000^(2i/d_model)), every pair of dimensions the sine and cosine of one frequency."""
    i = torch.arange((dim + 1) // 2, dtype=torch.float32, device=positions.device)
    angles = float_positions(positions).unsqueeze(-1) / torch.pow(10000.0, 2 * i / d_model)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)[..., :dim]


class RelativePositionTable(nn.Module):
    """Embeddings of the clipped relative distances -K..K for the H heads of a layer; ``forward()`` gives
    the (H, 2K+1, D_h) vectors, head h's in row h. ``heads``:

      - ``sliced``: one D-dim vector per distance, head h uses slice h (D_h dims) of it: (2K+1) D
        parameters per table (GPA Table 8: (2K+1) D + 4D^2 for Shaw and rPosNet; Tables 2, 3, 6 need it);
      - ``shared``: one D_h-dim vector per distance shared by all heads, (2K+1) D_h parameters
        (Shaw et al. 2018, Section 3.2; PEA Section 3.2: "the distance terms are shared across attention heads").

    ``kind`` ``learned``, or ``sinusoidal`` (Analysis of positional encodings, Eqs. 8-9: distance d's vector
    is the first D_h dimensions of the D-dim encoding PE_d, Eqs. 1-2; sliced, head h's are h D_h ..
    (h+1) D_h - 1). ``sinusoids="head"``, kept for checkpoints stored without a defaults version only: shared
    heads, a D_h-dim [sin | cos] encoding over all D_h / 2 frequencies.
    """

    def __init__(self, k: int, embed_dim: int, num_heads: int, kind: str, heads: str = "shared",
                 sinusoids: str = "d-model"):
        super().__init__()
        if heads not in RELATIVE_EMBEDDING_HEADS:
            raise ValueError(f"unknown relative embedding layout {heads!r}; "
                             f"valid: {', '.join(RELATIVE_EMBEDDING_HEADS)}")
        if sinusoids not in RELATIVE_SINUSOIDS:
            raise ValueError(f"unknown relative sinusoids {sinusoids!r}; valid: {', '.join(RELATIVE_SINUSOIDS)}")
        self.k, self.num_heads, self.head_dim, self.heads = k, num_heads, embed_dim // num_heads, heads
        width = embed_dim if heads == "sliced" else self.head_dim
        if kind == "learned":
            self.weight = nn.Parameter(torch.empty(2 * k + 1, width))
            nn.init.xavier_uniform_(self.weight)
        elif kind == "sinusoidal":
            distances = torch.arange(-k, k + 1)
            if sinusoids == "head":
                if heads != "shared":
                    raise ValueError("the per-head relative sinusoids (of checkpoints stored without a defaults "
                                     "version) exist only with shared relative embeddings")
                table = sinusoidal_encoding(distances, self.head_dim)
            else:
                table = interleaved_sinusoids(distances, width, embed_dim)
            self.register_buffer("weight", table, persistent=False)
        else:
            raise ValueError(f"unknown position embedding kind {kind!r}; valid: sinusoidal, learned")

    def forward(self) -> Tensor:
        """(H, 2K+1, D_h): the vectors of head h in row h (a view: no copy)."""
        if self.heads == "sliced":
            return self.weight.view(2 * self.k + 1, self.num_heads, self.head_dim).transpose(0, 1)
        return self.weight.unsqueeze(0).expand(self.num_heads, -1, -1)


def position_kernels(positions: int, groups: int, dim: int) -> nn.Parameter:
    """(P, G, d, d) PosNet kernels, N(0, 1/d): x @ Phi keeps the scale of x."""
    return nn.Parameter(torch.randn(positions, groups, dim, dim) * dim ** -0.5)


def apply_position_kernels(x: Tensor, positions: Tensor, padding_mask: Optional[Tensor], kernels: Tensor,
                           option: str) -> Tensor:
    """out[b, s, g] = x[b, s, g] @ kernels[positions[b, s], g]: a (d x d) kernel per true position and
    group (PosNet, Eqs. 23-24); x (B, S, G, d), kernels (P, G, d, d), a position >= P an error naming
    ``option``. A whole sentence (S > 1) is aligned so that column p holds position p, which lets one
    batched product use kernels[:S] (no per-token copy of the kernels); a decoding step gathers its own."""
    table_size = kernels.size(0)
    longest = int(positions.max()) if positions.numel() else 0
    if longest >= table_size:
        raise ValueError(f"position {longest} is beyond the PosNet kernel table of {table_size} positions; "
                         f"raise {option}")
    kernels = kernels.to(x.dtype)
    if x.size(1) == 1:
        return torch.einsum("bgd,bgde->bge", x[:, 0], kernels[positions[:, 0]]).unsqueeze(1)
    order, _ = left_aligned(padding_mask, x.size(0), x.size(1), x.device)  # column p of a row = position p
    width = min(x.size(1), table_size)  # padding may make the batch wider than any sentence
    aligned = torch.gather(x, 1, order[:, :, None, None].expand_as(x))[:, :width]
    aligned = torch.einsum("bpgd,pgde->bpge", aligned, kernels[:width])
    return torch.gather(aligned, 1, positions[:, :, None, None].expand_as(x))
