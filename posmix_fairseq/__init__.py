"""posmix_fairseq: position-based token mixing for fairseq NMT (a ``--user-dir`` plugin).

Importing the package calls :func:`register` when fairseq is already imported (``--user-dir``, the hub
API); registering is idempotent, also under a second module name (``--user-dir`` pointing at a copy). It also
lets torch's weights-only loader read fairseq checkpoints (:mod:`.fairseq_checkpoints`).
"""
import os
import sys

__version__ = "0.1.0"
USER_DIR = os.path.dirname(os.path.abspath(__file__))


def register() -> None:
    """Register the model and its named architectures, the token mixers, the position encodings, the
    scheduler and the tasks with fairseq; code that imports the package before fairseq calls it."""
    # these import torch and fairseq (seconds): loaded when registering, not with the package (see below)
    from . import mixers, position_encodings, models, schedulers, tasks  # noqa: F401  (they register)
    from .fairseq_checkpoints import allow_fairseq_checkpoints
    from .fairseq_patches import install_bf16_parse_fix

    allow_fairseq_checkpoints()
    install_bf16_parse_fix()  # --bf16 without torch_xla trains in bf16 instead of asking for a TPU


# The registrations import torch and fairseq (seconds); commands that need no model (posmix-score on text
# files, any --help) import the package without them. posmix_fairseq.kernels must import without fairseq
# too (a GPU host with only torch and Triton).
if "fairseq" in sys.modules:
    register()
