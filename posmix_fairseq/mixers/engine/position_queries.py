"""The shared part of aPosNet and rPosNet (GPA Section 4.1): queries q_n = W^Q n~ from the absolute
position table n~ shared across the layers of a side. As q_n depends on the position n only, each energy
can be tabulated over positions (:meth:`PositionQueries.position_query_table`, the energies'
``energy_table``), where the mixing kernels, the window form and the frozen energies start.

The table's options (:func:`absolute_table_options`) follow the paper by default and the released GPA code
on request (docs/choices.md, "The released GPA code").
"""
import torch
import torch.nn.functional as F
from torch import Tensor

from ...core.number_ranges import DROPOUT
from ...core.position_tables import ABSOLUTE_SINUSOIDS, SharedPositionTables, refer_to_shared
from .energy import SoftmaxEnergy, head_scaling, split_heads, xavier_linear
from .registry import MixerSpec, SideResources, position_table_option

SWITCH = ("on", "off")


def absolute_table_options(default_kind: str):
    """The options of the absolute table n~ (m~) of aPosNet / rPosNet."""
    return {
        **position_table_option(default_kind),
        "absolute-sinusoids": dict(choices=ABSOLUTE_SINUSOIDS, default=None,
                                   help="layout of a sinusoidal n~, m~ table: concatenated (fairseq's [sin | cos], "
                                        "the default) or interleaved (sin at 2i, cos at 2i+1, frequencies "
                                        "10000^(-2i/D): Vaswani et al. 2017 and the released GPA code)"),
        "position-table-layernorm": dict(choices=SWITCH, default="off",
                                         help="LayerNorm on the n~, m~ rows before W^Q, W^K read them, one per table "
                                              "(off: the paper; on: the released GPA code's learned table)"),
        "position-table-dropout": dict(type=DROPOUT, default=0.0, metavar="P",
                                       help="dropout on the n~, m~ rows before W^Q, W^K read them (default 0; the "
                                            "released GPA code uses --dropout)"),
    }


def reads_absolute_table(spec) -> bool:
    """Whether the mixer of ``spec`` (a :class:`MixerSpec`, or a registry entry) has an absolute table n~: it
    declares the table's options."""
    return "absolute-sinusoids" in spec.options


def shared_table(spec: MixerSpec, resources: SideResources, side):
    """The absolute position table n~ (or m~) of ``side``, shared across the layers of its owner."""
    kind, layout = spec.options["position-table"], spec.options.get("absolute-sinusoids")
    if layout is not None and kind != "sinusoidal":
        raise ValueError(f"{spec.flag('absolute-sinusoids')} {layout} applies to sinusoidal tables only; "
                         f"{spec.flag('position-table')} is {kind}: drop the flag or make the table sinusoidal")
    positions = spec.max_query_positions if side == spec.placement.query_side else spec.max_key_positions
    return resources.shared_tables.get(side.role, kind, spec.embed_dim, positions, side.max_positions_option,
                                       layout or "concatenated")


def table_norm(spec: MixerSpec, resources: SideResources, side):
    """The LayerNorm of ``side``'s table (``--<sublayer>-position-table-layernorm on``), or None."""
    if spec.options.get("position-table-layernorm", "off") == "off":
        return None
    key = SharedPositionTables.key(side.role, spec.options["position-table"], spec.embed_dim,
                                   spec.options.get("absolute-sinusoids") or "concatenated")
    return resources.shared_tables.layer_norm(key, spec.embed_dim)


class PositionQueries(SoftmaxEnergy):
    def __init__(self, spec: MixerSpec, resources: SideResources):
        super().__init__()
        self.num_heads = spec.num_heads
        self.scaling = head_scaling(spec.embed_dim // spec.num_heads)
        self.table_dropout = float(spec.options.get("position-table-dropout", 0.0))  # in [0, 1): its declaration
        # Only the query side's table is built here: rPosNet never reads the key side's (a cross-attention
        # rPosNet would otherwise build an unused source table in the decoder).
        refer_to_shared(self, "query_table", shared_table(spec, resources, spec.placement.query_side))
        refer_to_shared(self, "_query_norm", table_norm(spec, resources, spec.placement.query_side))
        self.q_proj = xavier_linear(spec.embed_dim, spec.embed_dim)

    def table_rows(self, table, norm, positions: Tensor, dtype) -> Tensor:
        """The rows of ``table`` at ``positions`` as W^Q / W^K read them: normalised by ``norm`` (if
        any), then dropped out (``--<sublayer>-position-table-dropout``, training only)."""
        rows = table(positions).to(dtype)
        if norm is not None:
            rows = norm(rows)
        return F.dropout(rows, self.table_dropout, self.training) if self.table_dropout > 0 else rows

    def position_queries(self, query: Tensor, query_positions: Tensor) -> Tensor:
        """(B, H, T, D_h) scaled W^Q n~; ``query`` (any tensor) supplies only the dtype."""
        n = self.table_rows(self.query_table, self._query_norm, query_positions, query.dtype)  # (B, T, D)
        return split_heads(self.q_proj(n).transpose(0, 1) * self.scaling, self.num_heads)

    def position_query_table(self, num_positions: int) -> Tensor:
        """(H, P, D_h) scaled W^Q n~ for the positions 0 .. P-1 (float32)."""
        positions = torch.arange(num_positions, device=self.q_proj.weight.device)
        return self.position_queries(self.q_proj.weight, positions.unsqueeze(0))[0]
