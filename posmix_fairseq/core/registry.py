"""One generic registry for named, interchangeable parts (token mixers, position encodings). Each
entry has a builder and may declare its own options, which the model turns into one flag per place
the part can go (``--encoder-self-<option>``, ``--encoder-<option>``), refused where the part does not
read it."""
from dataclasses import dataclass, field
from typing import Callable, Dict, Generic, List, TypeVar


@dataclass
class Entry:
    """A registered part: its builder, a one-line description and its own options
    (option name -> argparse kwargs, ``default`` included)."""

    builder: Callable
    description: str
    options: Dict[str, Dict] = field(default_factory=dict)


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    """name -> entry. Registering the same builder twice (the package imported under two module
    names) is a no-op; registering another builder under a taken name raises."""

    def __init__(self, kind: str):
        self.kind = kind  # e.g. "token mixer", for messages
        self._entries: Dict[str, E] = {}

    def register(self, name: str, entry: E) -> E:
        old = self._entries.get(name)
        qualname = getattr(entry.builder, "__qualname__", None)
        if old is not None and getattr(old.builder, "__qualname__", None) != qualname:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str, option: str) -> E:
        """The entry of ``name``; a clear error naming ``option`` and the valid names otherwise."""
        if name not in self._entries:
            raise ValueError(f"{option}: unknown {self.kind} {name!r}; valid: {', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> List[str]:
        return sorted(self._entries)

    def __contains__(self, name) -> bool:
        return name in self._entries

    def items(self):
        return sorted(self._entries.items())

    def declared_options(self) -> Dict[str, Dict]:
        """Every option any entry declares -> its argparse kwargs (without the default, which
        belongs to each entry: an option never given stays None and the entry's default applies)."""
        merged = {}
        for _, entry in self.items():
            for option, kwargs in entry.options.items():
                merged.setdefault(option, {k: v for k, v in kwargs.items() if k != "default"})
        return merged

    def readers(self, option: str) -> List[str]:
        """The entries that read ``option``."""
        return [name for name, entry in self.items() if option in entry.options]
