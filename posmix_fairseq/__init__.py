"""posmix_fairseq: position-based token mixing for fairseq NMT (a ``--user-dir`` plugin).

:func:`register` registers the ``posmix_transformer`` model, its named architectures, the token
mixers and position encodings, the ``validation_plateau`` learning-rate scheduler and the
``posmix_translation`` and ``translation_window`` tasks; importing the package calls it when fairseq
is already imported (``--user-dir``, the hub API). Registration is idempotent: importing the package
under a second module name (``--user-dir`` pointing at a copy, a test importing it by path) does not
raise fairseq's "Cannot register duplicate" errors. Registering also lets torch's weights-only loader
read fairseq checkpoints (see ``fairseq_checkpoints``); the package never turns weights-only loading off.
"""
import os
import sys

__version__ = "0.1.0"
USER_DIR = os.path.dirname(os.path.abspath(__file__))


def register() -> None:
    """Register the model, the named architectures, the token mixers, the position encodings, the
    scheduler and the tasks with fairseq (importing the modules that register them; idempotent).

    Importing the package does this by itself when fairseq is already imported, which is the case under
    ``--user-dir`` (fairseq imports the user directory after itself) and in the hub API. Code that
    imports the package first and builds or loads a model with fairseq afterwards calls it."""
    from . import mixers  # noqa: F401  (registers the token mixers)
    from . import position_encodings  # noqa: F401  (registers the embedding-level position modules)
    from . import models  # noqa: F401  (registers the model and the named architectures)
    from . import schedulers  # noqa: F401  (registers --lr-scheduler validation_plateau)
    from . import tasks  # noqa: F401  (registers --task posmix_translation and translation_window)
    from . import fairseq_bf16
    from .fairseq_checkpoints import allow_fairseq_checkpoints

    # torch >= 2.6 loads checkpoints weights-only, which by itself rejects the argparse.Namespace that fairseq
    # stores in every checkpoint; registering the few types fairseq stores lets fairseq-generate and
    # --restore-file load them while a pickle that needs anything else is still refused.
    allow_fairseq_checkpoints()
    fairseq_bf16.install()  # --bf16 without torch_xla trains in bf16 instead of asking for a TPU


# The registrations import torch and fairseq (seconds); commands that need no model (posmix-score on text
# files, any --help) import the package without them. posmix_fairseq.kernels must import without fairseq
# too (a GPU host with only torch and Triton).
if "fairseq" in sys.modules:
    register()
