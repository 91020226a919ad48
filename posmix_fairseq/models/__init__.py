from . import posmix_transformer  # noqa: F401
from . import architectures  # noqa: F401
