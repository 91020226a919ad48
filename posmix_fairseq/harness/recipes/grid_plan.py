"""One summary of a grid of recipe runs (``posmix-reproduce --plan``), after each system's own plan:

- what differs between the systems (the settings whose values are not the same for all), and how
  many settings they share;
- the compute: updates x systems, and GPU-hours at a stated training throughput (target tokens per
  second per GPU, an assumption the caller gives, never a measurement of this machine);
- the disk the grid keeps (each system's checkpoints, as its plan counts them);
- each system's parameter count (its model built on the meta device) beside the paper's, where the
  paper's table has a parameter column;
- where the test-length check ran: on the real test set, or on stand-in data.
"""
from typing import Dict, List, Optional

from .plan import STAND_IN, build_model, checkpoint_disk, dictionary_sizes, gb

#: settings that name a system or its folder, not what it trains
NAMING_KEYS = {"NAME", "OUT", "STAGES"}


def differing_keys(recipes: List[object]) -> List[str]:
    keys = sorted(set().union(*(r.values for r in recipes)) - NAMING_KEYS)
    return [k for k in keys if len({r.get(k) for r in recipes}) > 1]


def paper_params(reported: Dict[str, float]) -> Optional[str]:
    """The paper's parameter count of a row (its column named 'Params', '#Param (M)', ...), as written."""
    for column, value in reported.items():
        if "param" in column.lower():
            return f"{value:g} M"
    return None


def grid_summary(table, systems: List[dict], throughput: float) -> str:
    """``systems``: per system, ``label``, ``recipe``, ``stages`` (its plan's Stages: facts, data paths) and
    ``plan`` (the plan's text)."""
    from .meta_model import num_parameters  # meta_model imports torch and fairseq (seconds): only here

    recipes = [s["recipe"] for s in systems]
    differ = differing_keys(recipes)
    shared = len(set().union(*(r.values for r in recipes)) - NAMING_KEYS) - len(differ)
    out = ["", f"## Grid summary: {table.name}, {len(systems)} systems", "",
           f"What differs ({len(differ)} settings; the other {shared} are the same for every system):", ""]
    head = ["system", *differ, "params (ours)", "params (paper)", "kept checkpoints"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    updates = gpu_seconds = disk = 0.0
    stand_in = []
    for s in systems:
        r, st = s["recipe"], s["stages"]
        facts = st.facts
        vocab, vocab_tgt, _ = dictionary_sizes(r, st.data_bin)
        try:
            params = num_parameters(build_model(st.model_flags(), vocab, vocab_tgt))
        except (ValueError, SystemExit):
            params = None
        kept = checkpoint_disk(r, facts, params)["kept"] if params else None
        disk += kept or 0
        n_updates = r.int("MAX_UPDATE")
        gpus, freq = facts.get("gpus", r.int("GPUS")), facts.get("update_freq", 1)
        updates += n_updates
        gpu_seconds += n_updates * r.int("MAX_TOKENS") * gpus * freq / throughput
        if STAND_IN in s["plan"]:
            stand_in.append(s["label"])
        ours = "cannot be built" if params is None else f"{params / 1e6:.1f} M"
        out.append("| " + " | ".join([s["label"], *[str(r.get(k)) or "-" for k in differ], ours,
                                       paper_params(table.reported.get(s["label"], {})) or "-",
                                       gb(kept) if kept else "-"]) + " |")
    per = {r.int("MAX_UPDATE") for r in recipes}
    out += ["", "Compute:",
            f"- {int(updates):,} updates in all ({len(systems)} systems x "
            + (f"{per.pop():,} updates" if len(per) == 1 else "their MAX_UPDATE") + ")",
            f"- about {gpu_seconds / 3600:,.1f} GPU-hours at {throughput:,.0f} tokens per second per GPU (an assumed "
            "training throughput, --throughput; tokens per update = MAX_TOKENS x GPUs x update frequency); "
            "evaluation comes on top",
            "", f"Disk: about {gb(disk)} of checkpoints for the grid (each system's kept checkpoints, as its plan "
                "counts them), plus the data"]
    if stand_in:
        out += ["", f"Test lengths: checked on stand-in data ({STAND_IN}) for {len(stand_in)} of {len(systems)} "
                    "systems; the paper's test set was not found (run the download stage, or give RAW)"]
    else:
        out += ["", "Test lengths: checked on each system's own test set"]
    return "\n".join(out) + "\n"
