"""Tasks registered with fairseq (``--task NAME``)."""
from . import translation  # noqa: F401  (posmix_translation: --source-prefix)
from . import checkpoint_window  # noqa: F401
