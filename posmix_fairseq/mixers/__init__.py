"""Token mixers for the three attention sublayers. Each module here is a variant (or, named
``<variant>_*.py``, a part of one) registered with :func:`register_mixer`, and all are imported
below, so a new mixer is one new file; :mod:`.engine` and :mod:`.paths` are what they share."""
import importlib
import pkgutil

from .engine import (MIXER_REGISTRY, EnergyMixingAttention, MixerSpec, SideResources, TokenMixer,  # noqa: F401
                     build_mixer, frozen_mixers, register_mixer)

VARIANT_MODULES = tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg and not m.name.startswith("_"))
for _name in VARIANT_MODULES:
    importlib.import_module(f"{__name__}.{_name}")
