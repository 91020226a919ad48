"""Numbers within a declared range: one check for every numeric option, the library's and the commands'.

A :class:`Number` is an argparse ``type`` (a value out of range is argparse's usage error, exit status 2,
naming the option) and checks values that bypass the command line too (:meth:`Number.check`: the stored
arguments of a checkpoint, a spec built in Python), with the same words. A mixer or position encoding
declares each numeric option with one (``dict(type=Number(int, 1), ...)``, core/registry.py).
"""
import argparse
import math
from typing import List


class Number:
    """A number of ``kind`` (int or float), finite, within ``low``..``high`` (either may be open or absent).
    Called on text (argparse) it returns the number or raises argparse's ``ArgumentTypeError``:
    ``argument --runs: 0 is out of range: must be an integer >= 1``."""

    def __init__(self, kind=int, low=None, high=None, low_open: bool = False, high_open: bool = False):
        self.kind, self.low, self.high, self.low_open, self.high_open = kind, low, high, low_open, high_open
        self.__name__ = "integer" if kind is int else "number"

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        if self.low is not None and self.high is not None:
            lo, hi = ("above " if self.low_open else "from "), (" (exclusive)" if self.high_open else "")
            return f"must be {what} {lo}{self.low} to {self.high}{hi}"
        if self.low is not None:
            return f"must be {what} {'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            return f"must be {what} {'<' if self.high_open else '<='} {self.high}"
        return f"must be {what}"

    def __call__(self, text) -> object:
        try:
            value = self.kind(text)
        except (TypeError, ValueError):
            what = "an integer" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}: {self.describe()}") from None
        if self.kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not finite: {self.describe()}")
        low_bad = self.low is not None and (value < self.low or (self.low_open and value == self.low))
        high_bad = self.high is not None and (value > self.high or (self.high_open and value == self.high))
        if low_bad or high_bad:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {self.describe()}")
        return value

    def check(self, value, flag: str):
        """``value`` (a number or its text) as a number of this range, or a ValueError naming ``flag``."""
        if isinstance(value, bool) or (self.kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"{flag}: {value!r} is not an integer: {self.describe()}")
        try:
            return self(str(int(value)) if self.kind is int and isinstance(value, float) else str(value))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{flag}: {e}") from None

    def out_of_range(self) -> List[str]:
        """Values just outside the range (and "nan" for a float): what a test feeds the option."""
        step = 1 if self.kind is int else 0.5
        bad = []
        if self.low is not None:
            bad.append(str(self.low if self.low_open else self.low - step))
        if self.high is not None:
            bad.append(str(self.high if self.high_open else self.high + step))
        return bad + (["nan"] if self.kind is float else ["x"])

    def _key(self):
        return self.kind, self.low, self.high, self.low_open, self.high_open

    def __eq__(self, other):
        return isinstance(other, Number) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Number({self.describe()})"


POSITIVE_INT = Number(int, 1)
NON_NEGATIVE_INT = Number(int, 0)
POSITIVE_FLOAT = Number(float, 0, low_open=True)
DROPOUT = Number(float, 0.0, 1.0, high_open=True)  # a probability of dropping: [0, 1)
