"""Token mixers: interchangeable modules for the three attention sublayers.

Each top-level module of this package is a variant (or, named ``<variant>_*.py``, a part of one) and
registers its mixer with :func:`register_mixer`; every such module is imported here, so a new mixer
is one new file. The machinery they share is in :mod:`.engine` (what a mixer is made of) and
:mod:`.paths` (how a sublayer mixes).
"""
import importlib
import pkgutil

from .engine import (MIXER_REGISTRY, EnergyMixingAttention, MixerSpec, TokenMixer, build_mixer,  # noqa: F401
                     frozen_mixers, register_mixer)

VARIANT_MODULES = tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg and not m.name.startswith("_"))
for _name in VARIANT_MODULES:
    importlib.import_module(f"{__name__}.{_name}")
