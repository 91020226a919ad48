"""Helpers of the per-task recipes in examples/<task>/run.sh (the stages live in examples/common/stages.sh)."""
