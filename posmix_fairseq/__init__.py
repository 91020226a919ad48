"""posmix_fairseq: position-based token mixing for fairseq NMT (a ``--user-dir`` plugin).

Importing this package registers the ``posmix_transformer`` model, its named architectures,
the token mixers and position encodings, the ``validation_plateau`` learning-rate scheduler and the
``posmix_translation`` and ``translation_window`` tasks, and makes ``--bf16`` train and decode in
bfloat16 where torch_xla is absent (:mod:`posmix_fairseq.fairseq_bf16`). Registration is idempotent:
importing the package under a second module name (``--user-dir`` pointing at a copy, a test importing it
by path) does not raise fairseq's "Cannot register duplicate" errors.
"""
import os

# torch >= 2.6 loads checkpoints with weights_only=True, which rejects the argparse.Namespace
# that fairseq stores in every checkpoint (fairseq-generate and --restore-file would fail).
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import importlib.util  # noqa: E402

# The registrations need fairseq; posmix_fairseq.kernels (and its benchmark) must import without it
# (a GPU host with only torch and Triton), so they happen only where fairseq is installed.
if importlib.util.find_spec("fairseq") is not None:
    from . import mixers  # noqa: E402,F401  (registers the token mixers)
    from . import position_encodings  # noqa: E402,F401  (registers the embedding-level position modules)
    from . import models  # noqa: E402,F401  (registers the model and the named architectures)
    from . import schedulers  # noqa: E402,F401  (registers --lr-scheduler validation_plateau)
    from . import tasks  # noqa: E402,F401  (registers --task posmix_translation and translation_window)
    from . import fairseq_bf16  # noqa: E402

    fairseq_bf16.install()  # --bf16 without torch_xla trains in bf16 instead of asking for a TPU

__version__ = "0.1.0"
USER_DIR = os.path.dirname(os.path.abspath(__file__))
