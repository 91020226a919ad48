"""Options several mixers declare: K, the kind of a mixer's own position table, relative embeddings."""
from ...core.position_tables import RELATIVE_EMBEDDING_HEADS, RelativePositionTable
from .registry import MixerSpec


def max_relative_position_option():
    """K, the clipping distance of relative positions (declared by the mixers that read it)."""
    return {"max-relative-position": dict(type=int, default=16, metavar="K",
                                          help="clip relative distances to [-K, K] (default 16; 8 in *_big)")}


def position_table_option(default: str):
    """The kind of the mixer's own position table (absolute n~, m~ or relative a^K, a^V)."""
    return {"position-table": dict(choices=("sinusoidal", "learned"), default=default,
                                   help="position table of this position-aware mixer: sinusoidal or learned "
                                        "(default: aposnet sinusoidal, the others learned; GPA Section 5.2)")}


def relative_embeddings_options(default: str):
    """How the heads of a layer use its relative-distance embeddings (GPA Table 8 or Shaw et al. 2018)."""
    return {"relative-embedding-heads": dict(
        choices=RELATIVE_EMBEDDING_HEADS, default=default,
        help="relative-distance embeddings of a layer: sliced (one D-dim vector per distance, head h uses "
             "slice h; GPA Table 8) or shared (one D_h-dim vector for all heads; Shaw et al. 2018). Default: "
             "the paper of the mixer/arch (docs/choices.md)")}


def relative_position_table(spec: MixerSpec, k: int, kind: str):
    """The relative-distance table of ``spec``'s mixer, laid out by its own options and, for checkpoints
    stored without the defaults version, their stored legacy reading ``relative-sinusoids head``."""
    return RelativePositionTable(k, spec.embed_dim, spec.num_heads, kind, spec.options["relative-embedding-heads"],
                                 spec.options.get("relative-sinusoids") or "d-model")


def max_relative_position(spec: MixerSpec) -> int:
    k = spec.options["max-relative-position"]
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"{spec.flag('max-relative-position')} must be an integer >= 1 (got {k!r})")
    return k
