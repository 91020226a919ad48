"""What every ``posmix-*`` command shares: its parser, its errors and exit statuses, its text files.

Exit statuses follow sacreBLEU's and argparse's convention: 0 success, 1 a failure the user can act
on (a bad file, a bad value found while working), 2 a usage error (a bad option or combination).
``run(main, prog)`` turns :class:`CommandError` / :class:`UsageError`, and the ``ValueError``,
``OSError`` and ``UnicodeDecodeError`` that reading files raises, into one line ``prog: message`` on
stderr, without a traceback unless ``--debug`` is given; any other exception is one line naming its type (an
input no check caught). Every console script and every script under ``scripts/`` runs through it
(``tests/test_entry_points.py``). Text inputs are read by one reader (:func:`read_text`: UTF-8 checked with
the line of a bad byte, a byte-order mark dropped, CRLF and CR read as LF), and every file a command writes
over is written by one writer (:func:`write_atomic`: a temporary file renamed over it). Every parser made by :func:`build_parser`
prints plain-text help (reST markup stripped) with each option's default, and has ``--version``,
``--quiet`` and ``--debug``. A file argument ``-`` is stdin (inputs) or stdout (outputs).

Every numeric option takes a :class:`Number` or :class:`NumberList` type (``POSITIVE_INT``, ...): a zero,
a negative, NaN, text or an inverted list is argparse's usage error (exit status 2) naming the option and
its range, before any work; ``tests/test_bad_numbers.py`` feeds every such option of every command values
just outside its range. Languages are ``-s/--source-lang`` and ``-t/--target-lang`` (fairseq's spelling,
:func:`add_language_options`); ``--src``/``--ref`` are files. posmix-freeze's "nothing to freeze" is exit
status 3 (``pipeline.NOTHING_TO_FREEZE``), neither a failure nor a usage error.

This module is part of the library floor: it imports nothing heavy (no torch, no fairseq), so
``--help`` and the commands that score text files start in a fraction of a second.
"""
import argparse
import contextlib
import gzip
import io
import json
import logging
import os
import re
import sys
import tempfile
import traceback
import warnings
from typing import Callable, Iterator, List, Optional, Sequence

from .. import __version__
from ..core.number_ranges import NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT, Number  # noqa: F401  (the commands' types)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class CommandError(ValueError):
    """A failure the user can act on: printed as ``prog: message``; exit status 1. A ValueError, so that
    code which reports bad input by catching ValueError reports these too."""

    exit_status = EXIT_FAILURE


class UsageError(CommandError):
    """Options that cannot work together or a value out of range: exit status 2 (argparse's)."""

    exit_status = EXIT_USAGE


_REST = [
    (re.compile(r":[a-z]+:`([^`]+)`"), r"\1"),  # :class:`X` -> X
    (re.compile(r"``([^`]+)``"), r"\1"),  # ``code`` -> code
    (re.compile(r"`([^`<]+?)\s*<[^>]+>`_+"), r"\1"),  # `text <url>`_ -> text
    (re.compile(r"`([^`]+)`_+"), r"\1"),  # `ref`_ -> ref
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),  # **bold** -> bold
    (re.compile(r"::$", re.MULTILINE), ":"),  # literal-block marker
]


def plain_text(doc: Optional[str]) -> str:
    """``doc`` with its reST inline markup removed (what ``--help`` prints)."""
    text = (doc or "").strip()
    for pattern, repl in _REST:
        text = pattern.sub(repl, text)
    return text


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and appends each option's default to its help, as
    ``ArgumentDefaultsHelpFormatter`` does, unless the help already states it or there is none to
    state (a switch that is off, an option without a default)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text.lower() or not action.option_strings:
            return text
        if action.default in (None, False, argparse.SUPPRESS) or action.default == [] or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that applies ``--quiet`` once the options are parsed."""

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        check_languages(self, ns)
        if getattr(ns, "quiet", False):
            logging.disable(logging.INFO)  # only warnings and errors: lines a user acts on
        return ns, rest


def version_string() -> str:
    return __version__


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--quiet`` and ``--debug`` (``run`` reads ``--debug`` from the raw arguments)."""
    group = parser.add_argument_group("common options")
    group.add_argument("--version", action="version", version=f"%(prog)s (posmix_fairseq {version_string()})",
                       help="print the version and exit")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="no log lines from the libraries below the command (only their warnings and errors)")
    group.add_argument("--debug", action="store_true", help="show the traceback of an error")


# -- numbers -------------------------------------------------------------------------------------------

def checked_text(check: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse ``type`` from a function that raises ValueError for a malformed value: the text itself,
    once ``check`` accepts it; its message becomes argparse's usage error (exit status 2) naming the option."""

    def convert(text: str) -> str:
        try:
            check(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text

    convert.__name__ = getattr(check, "__name__", "value")
    return convert


class ChoiceList:
    """An argparse ``type``: a comma-separated, non-empty list of ``choices`` (each once); anything else is argparse's
    usage error (exit status 2) naming the option and the valid values."""

    def __init__(self, choices: Sequence[str]):
        self.choices = tuple(choices)
        self.__name__ = "list"

    def __call__(self, text) -> List[str]:
        items = [x.strip() for x in str(text).split(",") if x.strip()]
        bad = [x for x in items if x not in self.choices]
        if bad or not items or len(set(items)) != len(items):
            what = f"{', '.join(bad)} not supported" if bad else "empty" if not items else "a value given twice"
            raise argparse.ArgumentTypeError(f"{text!r}: {what}; give a comma-separated list of {', '.join(self.choices)}")
        return items

    def out_of_range(self) -> List[str]:
        """Lists it refuses (an unknown item, none, an item twice): what a test feeds the option."""
        return [f"{self.choices[0]},no-such-choice", "", f"{self.choices[0]},{self.choices[0]}"]


#: the formats the figures are written in (posmix-plot, posmix-attention --heatmaps: --formats)
FIGURE_FORMATS = ChoiceList(("png", "svg", "pdf"))


class NumberList:
    """An argparse ``type``: a comma-separated list of numbers, each a :class:`Number` of ``item``, of
    ``length`` items if given, strictly increasing if ``increasing`` (an inverted range is refused); an
    empty text is the empty list if ``allow_empty``."""

    def __init__(self, item: Number, increasing: bool = False, length: Optional[int] = None, allow_empty: bool = False):
        self.item, self.increasing, self.length, self.allow_empty = item, increasing, length, allow_empty
        self.__name__ = "list"

    def __call__(self, text) -> list:
        if self.allow_empty and not str(text).strip():
            return []
        parts = [x.strip() for x in str(text).split(",")]
        if self.length is not None and len(parts) != self.length:
            raise argparse.ArgumentTypeError(f"{text!r}: give {self.length} comma-separated values")
        values = []
        for part in parts:
            try:
                values.append(self.item(part))
            except argparse.ArgumentTypeError as e:
                raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
        if self.increasing and any(b <= a for a, b in zip(values, values[1:])):
            raise argparse.ArgumentTypeError(f"{text!r}: the values must increase (each larger than the one before)")
        return values

    def out_of_range(self) -> List[str]:
        """Items out of range, and (``increasing``) a valid pair in inverted order."""
        bad = list(self.item.out_of_range())
        if self.increasing:
            first = (self.item.low or 0) + (1 if self.item.kind is int else 0.5)
            bad.append(f"{first * 2},{first}")
        return bad


class DeprecatedSpelling(argparse.Action):
    """An old spelling of an option: stores its value under the new option's destination and prints one
    line on stderr naming the spelling to use. Hidden from ``--help``."""

    def __init__(self, option_strings, dest, use: str = "", **kwargs):
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.use = use

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: {option_string} is deprecated here; use {self.use}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_language_options(parser: argparse.ArgumentParser, required: bool = False, source_default: Optional[str] = None,
                         target_default: Optional[str] = None, what: str = "",
                         dests: Sequence[str] = ("source_lang", "target_lang")) -> None:
    """``-s/--source-lang`` and ``-t/--target-lang`` (fairseq's spelling: a language code, never a file),
    with ``--src`` / ``--tgt`` accepted as deprecated spellings. In every posmix command, ``--src`` and
    ``--ref`` name files (posmix-score, posmix-concat-testset). ``required``: checked by
    :func:`check_languages` (argparse's own check cannot see the old spellings)."""
    for short, long, old, default, side, dest in (("-s", "--source-lang", "--src", source_default, "source", dests[0]),
                                                  ("-t", "--target-lang", "--tgt", target_default, "target", dests[1])):
        parser.add_argument(short, long, dest=dest, default=default, metavar="LANG",
                            help=f"{side} language code{what}, e.g. " + ("en" if side == "source" else "de"))
        parser.add_argument(old, dest=dest, action=DeprecatedSpelling, use=f"{short}/{long}", metavar="LANG")
    if required:
        parser.set_defaults(_languages_required=tuple(dests))


def check_languages(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage error argparse would give for a required language that none of its spellings gave."""
    dests = getattr(args, "_languages_required", None)
    if dests:
        missing = [flag for flag, dest in zip(("-s/--source-lang", "-t/--target-lang"), dests)
                   if getattr(args, dest, None) is None]
        if missing:
            parser.error(f"the following arguments are required: {', '.join(missing)}")


def build_parser(prog: str, doc: Optional[str], **kwargs) -> CommandParser:
    """The parser of command ``prog``: the first paragraph of ``doc`` is the description, the rest
    the epilog (both plain text); the common options are added."""
    paragraphs = plain_text(doc).split("\n\n", 1)
    kwargs.setdefault("description", paragraphs[0])
    if len(paragraphs) > 1:
        kwargs.setdefault("epilog", paragraphs[1])
    parser = CommandParser(prog=prog, formatter_class=HelpFormatter, **kwargs)
    add_common_options(parser)
    return parser


# -- devices -----------------------------------------------------------------------------------------

def device_option(text: str) -> str:
    """An argparse ``type`` for ``--device``: ``cpu``, or ``cuda``/``cuda:N`` where torch sees a GPU; a CUDA
    device on a host without one is argparse's usage error (exit status 2) naming the option, before any work."""
    kind, _, index = str(text).partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise argparse.ArgumentTypeError(f"{text!r}: give cpu, cuda or cuda:N")
    if kind == "cuda":
        import torch  # only for a CUDA device: this module imports no torch (--help, posmix-score on text)

        if not torch.cuda.is_available():
            why = "this torch was built without CUDA" if torch.version.cuda is None else "no GPU is visible"
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available here ({why}); use --device cpu")
        if index and int(index) >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: there are {torch.cuda.device_count()} GPU(s) (cuda:0 ...)")
    return text


device_option.__name__ = "device"


# -- files -------------------------------------------------------------------------------------------

def _label(path: str, option: Optional[str]) -> str:
    return f"{option} {path}" if option else path


def check_input_file(path: str, option: Optional[str] = None, allow_empty: bool = False) -> str:
    """``path`` if it names a readable file (``-``: stdin); otherwise a :class:`CommandError` naming
    the option and the file."""
    if path == "-":
        return path
    label = _label(path, option)
    if not os.path.exists(path):
        raise CommandError(f"{label}: no such file")
    if os.path.isdir(path):
        raise CommandError(f"{label}: is a directory; give a file")
    if not os.access(path, os.R_OK):
        raise CommandError(f"{label}: not readable (check its permissions)")
    if not allow_empty and os.path.getsize(path) == 0:
        raise CommandError(f"{label}: the file is empty")
    return path


def load_sentencepiece(path: str, option: str = "--spm-model"):
    """The SentencePiece model in ``path`` (checked as ``check_input_file``); a file sentencepiece cannot read is
    a :class:`CommandError` naming the option and the file."""
    check_input_file(path, option)
    import sentencepiece as spm  # only with a model given: scoring plain text does not load it

    try:
        return spm.SentencePieceProcessor(model_file=path)
    except (OSError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CommandError(f"{option} {path}: not a SentencePiece model ({first})") from None


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (links followed; a missing path names no existing file)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output_file(path: str, option: Optional[str] = None, parent_must_exist: bool = True,
                      inputs: Sequence[str] = ()) -> str:
    """``path`` if a file can be written there (``-``: stdout): not a directory, not one of the command's
    ``inputs`` (links followed), and in a directory that exists (unless the command creates it:
    ``parent_must_exist=False``)."""
    if path == "-":
        return path
    label = _label(path, option)
    if os.path.isdir(path):
        raise CommandError(f"{label}: is a directory; give a file name")
    for source in inputs:
        if source != "-" and same_file(path, source):
            raise CommandError(f"{label}: is also an input ({source}); writing it would replace the file being "
                               "read. Give another output file")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isfile(parent):
        raise CommandError(f"{label}: {parent} is a file, not a directory")
    if parent_must_exist and not os.path.isdir(parent):
        raise CommandError(f"{label}: directory {parent} does not exist")
    return path


def check_output_dir(path: str, option: Optional[str] = None) -> str:
    """``path`` if it is a directory or can be created as one."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CommandError(f"{_label(path, option)}: exists and is not a directory")
    return path


#: the first bytes of a file torch.save writes: a zip archive (torch >= 1.6) or a pickle (older torch)
CHECKPOINT_MAGIC = (b"PK\x03\x04", b"\x80")


def check_checkpoint(path: str, option: Optional[str] = None) -> str:
    """``path`` if it is a non-empty file that torch.save could have written (read: its first bytes)."""
    check_input_file(path, option)
    with open(path, "rb") as f:
        head = f.read(4)
    if not head.startswith(CHECKPOINT_MAGIC):
        raise CommandError(f"{_label(path, option)}: not a PyTorch checkpoint (neither a zip archive nor a pickle); "
                           "give a file written by fairseq-train, posmix-freeze or posmix-average")
    return path


def check_checkpoints(paths: str, option: str = "--path") -> List[str]:
    """The checkpoints of a ':'-separated list (fairseq-generate's ``--path`` for an ensemble), each checked."""
    return [check_checkpoint(path, option) for path in paths.split(":")]


def check_data_dir(path: str, option: Optional[str] = None) -> str:
    """``path`` if it is a directory holding fairseq-preprocess's dictionaries (``dict.*.txt``)."""
    label = _label(path, option) if option else f"data directory {path}"
    if not os.path.isdir(path):
        raise CommandError(f"{label}: " + ("is a file; give the directory fairseq-preprocess --destdir wrote"
                                           if os.path.exists(path) else "no such directory"))
    if not any(name.startswith("dict.") and name.endswith(".txt") for name in os.listdir(path)):
        raise CommandError(f"{label}: no dict.*.txt; give the directory fairseq-preprocess --destdir wrote")
    return path


BOM = "\ufeff"


def strip_bom(text: str) -> str:
    """``text`` without a leading byte-order mark (U+FEFF, which editors on Windows write first): left in, it
    would be part of the first word (the first sentence then scores as a different sentence)."""
    return text[1:] if text.startswith(BOM) else text


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as text, without a leading byte-order mark (:func:`strip_bom`); a :class:`CommandError` naming
    ``name`` and the line of the first bad byte."""
    try:
        return strip_bom(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CommandError(f"{name}: line {line} is not UTF-8 (byte 0x{data[e.start]:02x}); convert the file, "
                           f"e.g. iconv -f latin1 -t utf-8") from None


def read_text(path: str, option: Optional[str] = None, allow_empty: bool = False) -> str:
    """The UTF-8 text of ``path`` (``-``: stdin; ``.gz``: gunzipped), checked as ``check_input_file``,
    without a byte-order mark, with its line ends read as Python's text files read them (``\\r\\n`` and
    ``\\r`` become ``\\n``): the one reader of every command that reads text for scoring or data."""
    check_input_file(path, option, allow_empty)
    if path == "-":
        text = decode_utf8(sys.stdin.buffer.read(), "<stdin>")
    else:
        if path.endswith(".gz"):
            opener = gzip.open
        else:
            opener = open
        with opener(path, "rb") as f:
            text = decode_utf8(f.read(), _label(path, option))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text_lines(path: str, option: Optional[str] = None, allow_empty: bool = False) -> List[str]:
    """The lines of a UTF-8 text file without their newlines (a final newline ends the last line)."""
    text = read_text(path, option, allow_empty)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_json(path: str, option: Optional[str] = None, what: str = "JSON"):
    """The JSON value in ``path``; errors name the option, the file, the line and column, and ``what``
    the file should be."""
    text = read_text(path, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"{_label(path, option)}: line {e.lineno} column {e.colno}: not valid JSON ({e.msg}); "
                           f"expected {what}") from None


def write_atomic(path: str, writer: Callable[[io.BufferedWriter], None]) -> str:
    """Calls ``writer(file)`` on a temporary file in ``path``'s directory, flushes it to disk and renames it over
    ``path`` (``os.replace``): a crash or a kill mid-write leaves the old file whole (at worst a
    ``.<name>.*.tmp`` beside it, never a partial ``path``). A ``path`` that is a link is written where it points
    (the link stays); a new file gets the permissions ``open`` would give it, a replaced one keeps its own. The one
    writer of every file the commands write over."""
    target = os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    try:
        dir_fd = os.open(os.path.dirname(target), os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power loss
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover  (directories cannot be fsynced on some file systems)
        pass
    return path


def replace_file(path: str, data) -> str:
    """Writes ``data`` (bytes, or text as UTF-8) to ``path`` through :func:`write_atomic`."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    return write_atomic(path, lambda f: f.write(data))


def write_json(path: str, value, option: Optional[str] = "--json", inputs: Sequence[str] = ()) -> None:
    """``value`` as indented JSON in ``path`` (``-``: stdout), written whole (:func:`open_output`)."""
    with open_output(path, option, inputs=inputs) as f:
        json.dump(value, f, indent=1)


@contextlib.contextmanager
def open_output(path: str, option: Optional[str] = None, newline: Optional[str] = None,
                inputs: Sequence[str] = ()) -> Iterator[io.TextIOBase]:
    """A UTF-8 text file to write (``-``: stdout, left open), replaced whole when the block succeeds
    (:func:`replace_file`); an error inside the block leaves the old file as it was."""
    if path == "-":
        yield sys.stdout
        return
    check_output_file(path, option, inputs=inputs)
    buffer = io.StringIO(newline=newline)
    yield buffer
    replace_file(path, buffer.getvalue().encode("utf-8"))


# -- library noise ------------------------------------------------------------------------------------

# Warnings the libraries print while a model loads that a user of these commands cannot act on (each
# matched by its own message, never a whole category): Hydra's deprecation notices (fairseq 0.12 composes
# its configuration with Hydra 1.0's API), torch's pin_memory notice on a machine without a GPU, and
# torch.cuda.amp's deprecation (fairseq's trainer code).
LIBRARY_WARNINGS = [
    (r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental", UserWarning),
    (r"\s*The version_base parameter is not specified", UserWarning),
    (r"In '[^']*': Usage of deprecated keyword in package header", UserWarning),
    (r"\s*'[^']*' is validated against ConfigStore schema with the same name", UserWarning),
    (r"\s*The strict flag in the compose API is deprecated", UserWarning),
    (r"'pin_memory' argument is set as true but no accelerator is found", UserWarning),
    (r"`?torch\.cuda\.amp\.(autocast|GradScaler)\(args\.\.\.\)`? is deprecated", FutureWarning),
]


def silence_library_noise() -> None:
    """Filter the library warnings above (these messages only) and Hydra's DEBUG log lines."""
    for message, category in LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in ("hydra", "hydra.core", "omegaconf"):
        logging.getLogger(name).setLevel(logging.WARNING)


# -- running ------------------------------------------------------------------------------------------

def error_message(error: BaseException) -> str:
    """One line for ``error``: an OSError names its file; a decode error says the input is not UTF-8."""
    if isinstance(error, UnicodeDecodeError):
        return f"an input is not UTF-8 text ({error.reason} at byte {error.start}); convert it to UTF-8"
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error) or type(error).__name__


def run(main: Callable[[Optional[Sequence[str]]], object], prog: str, argv: Optional[Sequence[str]] = None) -> int:
    """Run ``main(argv)`` as command ``prog`` and return its exit status (what a console script
    passes to ``sys.exit``); ``main``'s return value is for tests and is not printed."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    silence_library_noise()
    try:
        main(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # argparse (--help: 0, usage: 2) or a command's own SystemExit(message)
        if isinstance(e.code, str):
            if debug and e.__context__ is not None:  # the error the command turned into this message
                traceback.print_exception(e.__context__, file=sys.stderr)
            message = e.code if e.code.startswith((f"{prog}:", f"{prog} ")) else f"{prog}: {e.code}"
            print(message, file=sys.stderr)
            return EXIT_FAILURE
        return int(e.code or 0)
    except CommandError as e:
        if debug:
            raise
        print(f"{prog}: {e}", file=sys.stderr)
        return e.exit_status
    except (ValueError, OSError) as e:  # UnicodeDecodeError is a ValueError
        if debug:
            raise
        message = error_message(e)
        message = message if message.startswith(f"{prog}:") else f"{prog}: {message}"
        print(f"{message}\n{prog}: (--debug shows where)", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:  # what no check turned into a message: one line still, the traceback with --debug
        if debug:
            raise
        print(f"{prog}: {type(e).__name__}: {error_message(e)}\n{prog}: an unexpected error (an input no check "
              "caught, or a bug); --debug shows where", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def console(main: Callable[[Optional[Sequence[str]]], object], prog: str) -> Callable[[], int]:
    """A console-script entry point for ``main``: returns the exit status, never ``main``'s result."""

    def cli() -> int:
        return run(main, prog)

    cli.__doc__ = f"Console entry point of {prog}: returns its exit status."
    return cli
