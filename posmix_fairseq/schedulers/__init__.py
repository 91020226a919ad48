"""Learning-rate schedulers registered with fairseq (``--lr-scheduler NAME``)."""
from . import validation_plateau  # noqa: F401
