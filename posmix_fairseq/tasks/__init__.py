"""fairseq tasks of the plugin (registered on import)."""
from . import translation  # noqa: F401  (registers posmix_translation)
