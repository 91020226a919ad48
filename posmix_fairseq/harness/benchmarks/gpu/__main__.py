from . import cli

raise SystemExit(cli())
