"""One generic registry for named, interchangeable parts (token mixers, position encodings). Each
entry has a builder, the scopes it may fill (a mixer's placements, a position encoding's sides) and its
own options, which the model turns into one flag per scope where some entry reads it
(``--encoder-self-<option>``, ``--encoder-<option>``), refused where the scope's entry does not read it.

An option is declared once, as argparse keyword arguments with its ``default``: a numeric option's ``type``
is a :class:`~.number_ranges.Number` (its range: positive, an interval, ...), any other takes ``choices`` or
is text its entry parses. :meth:`Entry.check_options` is the one check of the values a part is built with
(the command line checks them earlier, through the same types). An option name means one thing: two entries
that declare it declare the same type, range, choices and help, and may differ only in its default.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, Generic, List, Optional, TypeVar

from .number_ranges import Number

#: the keys of an option's declaration that may differ between two entries declaring it (the rest is its meaning)
PER_ENTRY_KEYS = ("default",)


@dataclass
class Entry:
    """A registered part: its builder, a one-line description and its own options
    (option name -> argparse kwargs, ``default`` included)."""

    builder: Callable
    description: str
    options: Dict[str, Dict] = field(default_factory=dict)

    def available_at(self, scope) -> bool:
        """Whether the part may fill ``scope`` (every scope unless a kind of entry says otherwise)."""
        return True

    def where(self, option: str) -> str:
        """The flags ``option`` of the scopes the part may fill, for messages."""
        return "every scope"

    def check_options(self, scope, values: Dict) -> None:
        """A ValueError naming the flag and the valid values for a value of ``values`` (option -> value; None:
        unset, a rule of the part) outside its declared type, range or choices. Keys it does not declare
        (stored legacy readings) are the part's own business."""
        for option, kwargs in self.options.items():
            value = values.get(option)
            if value is None:
                continue
            if isinstance(kwargs.get("type"), Number):
                kwargs["type"].check(value, scope.flag(option))
            elif kwargs.get("choices") is not None and value not in kwargs["choices"]:
                raise ValueError(f"{scope.flag(option)}: {value!r} is not one of its values; valid values: "
                                 f"{', '.join(str(c) for c in kwargs['choices'])}")


E = TypeVar("E", bound=Entry)


def declaration_problem(option: str, kwargs: Dict) -> Optional[str]:
    """What is wrong with an option's declaration (None: nothing): a number without a declared range, or a
    default outside its own type, range or choices."""
    kind = kwargs.get("type")
    if kind in (int, float):
        return (f"option {option!r}: declare its range, e.g. type=Number({kind.__name__}, 1) "
                f"(posmix_fairseq.core.number_ranges)")
    default = kwargs.get("default")
    if default is None:
        return None
    if isinstance(kind, Number):
        try:
            kind.check(default, option)
        except ValueError as e:
            return f"option {option!r}: its default {default!r} is out of its range ({e})"
    elif kwargs.get("choices") is not None and default not in kwargs["choices"]:
        return f"option {option!r}: its default {default!r} is not one of its choices"
    return None


def meaning(kwargs: Dict) -> Dict:
    """What an option's declaration means across entries: all but the per-entry keys."""
    return {key: value for key, value in kwargs.items() if key not in PER_ENTRY_KEYS}


class Registry(Generic[E]):
    """name -> entry. Registering the same builder twice (the package imported under two module
    names) is a no-op; registering another builder under a taken name raises, and so does a declaration
    without a range or with a default outside it, or an option that means something else in another entry."""

    def __init__(self, kind: str):
        self.kind = kind  # e.g. "token mixer", for messages
        self._entries: Dict[str, E] = {}

    def register(self, name: str, entry: E) -> E:
        old = self._entries.get(name)
        qualname = getattr(entry.builder, "__qualname__", None)
        if old is not None and getattr(old.builder, "__qualname__", None) != qualname:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        for option, kwargs in entry.options.items():
            problem = declaration_problem(option, kwargs)
            if problem:
                raise ValueError(f"{self.kind} {name!r}: {problem}")
            for other, other_entry in self.items():
                if other != name and option in other_entry.options and \
                        meaning(other_entry.options[option]) != meaning(kwargs):
                    raise ValueError(f"{self.kind} {name!r} declares option {option!r} unlike {other!r} does: an "
                                     f"option name has one meaning (the same type, range, choices and help; only "
                                     f"the default may differ). Declare it as {other!r} does, or give it its own "
                                     f"name (e.g. {name}-{option})")
        self._entries[name] = entry
        return entry

    def get(self, name: str, option: str) -> E:
        """The entry of ``name``; a clear error naming ``option`` and the valid names otherwise."""
        if name not in self._entries:
            raise ValueError(f"{option}: unknown {self.kind} {name!r}; valid: {', '.join(self.names())}")
        return self._entries[name]

    def get_at(self, name: str, scope, option: str) -> E:
        """The entry of ``name`` for ``scope``; a clear error naming ``scope``'s flag ``option`` where the entry
        may not fill that scope (the scopes it may fill, and the names valid here)."""
        entry = self.get(name, scope.flag(option))
        if not entry.available_at(scope):
            raise ValueError(f"{scope.flag(option)} {name}: the {name} {self.kind} is defined for "
                             f"{entry.where(option)} only; "
                             f"valid for {scope.flag(option)}: {', '.join(self.names_at(scope))}")
        return entry

    def names(self) -> List[str]:
        return sorted(self._entries)

    def names_at(self, scope) -> List[str]:
        """The names of the entries that may fill ``scope``."""
        return [name for name, entry in self.items() if entry.available_at(scope)]

    def __contains__(self, name) -> bool:
        return name in self._entries

    def items(self):
        return sorted(self._entries.items())

    def declared_options(self, scope=None) -> Dict[str, Dict]:
        """Every option an entry declares (one that may fill ``scope``, if given) -> its argparse kwargs
        (without the default, which belongs to each entry: an option never given takes the entry's default)."""
        merged = {}
        for _, entry in self.items():
            if scope is not None and not entry.available_at(scope):
                continue
            for option, kwargs in entry.options.items():
                merged.setdefault(option, meaning(kwargs))
        return merged

    def readers(self, option: str, scope=None) -> List[str]:
        """The entries that read ``option`` (those that may fill ``scope``, if given)."""
        return [name for name, entry in self.items()
                if option in entry.options and (scope is None or entry.available_at(scope))]
