"""Arguments of checkpoints made before issue 11 ("Match the papers") changed defaults.

Issue 11 changed what some unset options mean (an unset option takes its mixer's default at
build time, so a changed default would silently change an old model):

- LinearNet / gLinearNet (GPA Eq. 13): ``--S-linear-max-positions`` default 256 -> 128 (GPA
  Table 2's totals imply H N^2 with N = 128), and the model's max source/target positions now
  never exceed the table (so fairseq's own size filter applies before training/generation);
- PosNet-Attn (PosNet Eqs. 20, 23): Phi per head (P x H x D_h x D_h, P = 256) -> the paper's
  Phi in R^{P x d_k x d_k} shared by the heads, P = 128, with dropout on the PosNet output; the
  model's max positions never exceed P (as LinearNet's);
- PosNet-Embed (Eq. 24): act GeLU -> ReLU (the paper's released code);
- Adaptive-T5: ``--S-t5-adaptive on`` now means Wu et al. (2021)'s soft buckets; the former
  cumulative-increment formulation is ``--S-t5-adaptive cumulative``.

The relative tables, RPE and the LSTM (issue 11's other changes) are pinned by
``models/options.py`` ``upgrade_issue11_args``; ``upgrade_legacy_args`` runs both on arguments
stored without the marker.

New checkpoints store ``posmix_paper_readings`` (a model option whose argparse default is
VERSION, so every command line gets it; fairseq applies no argparse defaults to a loaded
checkpoint's arguments); a checkpoint without it gets the options its code used, written into
its arguments explicitly, before the architecture function fills today's defaults.
"""
from ..core.placement import PLACEMENTS, SIDES

MARKER = "posmix_paper_readings"
VERSION = 11  # the issue that set the current readings


def made_before_issue11(args) -> bool:
    """Stored arguments without the marker: made by the code before issue 11."""
    return getattr(args, MARKER, None) is None


def upgrade_pre_issue11_args(args) -> bool:
    """Pin the pre-issue-11 behaviour on arguments stored without the marker (call before the
    architecture function fills defaults). Returns whether anything was pinned."""
    if not made_before_issue11(args):
        return False
    for placement in PLACEMENTS:
        mixer = getattr(args, placement.attr("mixer"), None) or "mha"
        if mixer == "linear":
            attr = placement.attr("linear-max-positions")
            if getattr(args, attr, None) is None:
                setattr(args, attr, 256)
            table = getattr(args, attr)
            for role in {placement.query_side.role, placement.key_side.role}:
                limit = f"max_{role}_positions"
                if getattr(args, limit, None) is None or getattr(args, limit) > table:
                    setattr(args, limit, table)  # sentences beyond the table crashed before: now filtered
        elif mixer == "posnet":
            for option, old in (("posnet-kernel", "head"), ("posnet-max-positions", 256), ("posnet-dropout", 0.0)):
                if getattr(args, placement.attr(option), None) is None:
                    setattr(args, placement.attr(option), old)
            table = getattr(args, placement.attr("posnet-max-positions"))
            for role in {placement.query_side.role, placement.key_side.role}:
                limit = f"max_{role}_positions"
                if getattr(args, limit, None) is None or getattr(args, limit) > table:
                    setattr(args, limit, table)  # beyond the table it crashed before: now filtered
        elif mixer == "t5bias" and getattr(args, placement.attr("t5-adaptive"), None) == "on":
            setattr(args, placement.attr("t5-adaptive"), "cumulative")
    for side in SIDES:
        if getattr(args, f"{side}_position_encoding", None) == "posnet" and \
                getattr(args, f"{side}_posnet_activation", None) is None:
            setattr(args, f"{side}_posnet_activation", "gelu")
    setattr(args, MARKER, VERSION)
    return True
