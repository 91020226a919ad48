"""``python -m posmix_fairseq.harness.evaluation.claims``: the ``posmix-claims`` command."""
from . import cli

raise SystemExit(cli())
