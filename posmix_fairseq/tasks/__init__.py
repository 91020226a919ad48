"""Tasks registered with fairseq (``--task NAME``)."""
from . import translation_window  # noqa: F401
