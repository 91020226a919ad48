"""Tasks registered with fairseq (``--task NAME``)."""
from . import translation, averaged_checkpoints  # noqa: F401  (posmix_translation, translation_window)
