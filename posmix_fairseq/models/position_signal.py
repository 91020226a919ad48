"""Whether a side of the model sees word order at all."""
from ..core.placement import PLACEMENTS
from ..mixers import MIXER_REGISTRY


def side_has_position_signal(args, side) -> bool:
    """An embedding-level position module, or a position-aware mixer on the side's queries."""
    if side.read(args, "position-encoding", "sinusoidal") != "none":
        return True
    placements = [p for p in PLACEMENTS if p.owner == side]
    return any(MIXER_REGISTRY.get(p.read(args, "mixer", "mha"), p.flag("mixer")).uses_positions for p in placements)
