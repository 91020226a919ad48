"""posmix_fairseq: position-based token mixing for fairseq NMT (a ``--user-dir`` plugin).

Importing this package registers the ``posmix_transformer`` model, its named architectures,
the token mixers and position encodings, the ``validation_plateau`` learning-rate scheduler and the
``posmix_translation`` and ``translation_window`` tasks. Registration is idempotent: importing the package under a second module
name (``--user-dir`` pointing at a copy, a test importing it by path) does not raise fairseq's
"Cannot register duplicate" errors. Importing it also lets torch's weights-only loader read fairseq
checkpoints (see ``checkpoint_files``); it never turns weights-only loading off.
"""
import importlib.util
import os

# torch >= 2.6 loads checkpoints weights-only, which by itself rejects the argparse.Namespace that fairseq
# stores in every checkpoint; registering the few types fairseq stores lets fairseq-generate and
# --restore-file load them while a pickle that needs anything else is still refused.
if importlib.util.find_spec("torch") is not None:
    from .checkpoint_files import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()

# The registrations need fairseq; posmix_fairseq.kernels (and its benchmark) must import without it
# (a GPU host with only torch and Triton), so they happen only where fairseq is installed.
if importlib.util.find_spec("fairseq") is not None:
    from . import mixers  # noqa: E402,F401  (registers the token mixers)
    from . import position_encodings  # noqa: E402,F401  (registers the embedding-level position modules)
    from . import models  # noqa: E402,F401  (registers the model and the named architectures)
    from . import schedulers  # noqa: E402,F401  (registers --lr-scheduler validation_plateau)
    from . import tasks  # noqa: E402,F401  (registers --task posmix_translation and translation_window)

__version__ = "0.1.0"
USER_DIR = os.path.dirname(os.path.abspath(__file__))
