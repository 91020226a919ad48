"""Tasks registered with fairseq (``--task NAME``)."""
from . import translation, checkpoint_window  # noqa: F401  (posmix_translation, translation_window)
