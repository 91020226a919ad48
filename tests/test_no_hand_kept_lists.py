"""No hand-kept list of mixers, position encodings or variants: what the tests sweep and the docs tabulate comes
from the registries and the arch table, so a new mixer is its file and its arch row.

A hand-kept list, in a test, is a list, tuple or set of two or more items that are all bare names of registered
mixers, position encodings or variants of the arch table (a module-level constant or a parametrization): such a
list has to grow with every new part. Names inside flags (``"--arch", "rposnet_iwslt_de_en"``), tables of the
papers' numbers keyed by name, and single cases stay. In the docs, a hand-kept list is a line outside the
generated blocks (docs/generated.py) that names four or more mixers or variants in backticks, or a table row
that starts with one."""
import ast
import os
import re

import pytest

from posmix_fairseq.harness.docs import generated_blocks
from posmix_fairseq.mixers import MIXER_REGISTRY
from posmix_fairseq.models.architectures import VARIANTS
from posmix_fairseq.position_encodings.base import POSITION_ENCODING_REGISTRY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
MIXERS = set(MIXER_REGISTRY.names())
NAMES = MIXERS | set(POSITION_ENCODING_REGISTRY.names()) | set(VARIANTS)


def bare_names(node):
    """The items of a list/tuple/set literal when there are two or more and all are registered names, else None."""
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)) or len(node.elts) < 2:
        return None
    items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return items if len(items) == len(node.elts) and all(item in NAMES for item in items) else None


def hand_kept_lists(source: str):
    """(line, items) of every hand-kept list of ``source``: module-level or class-level constants and the values
    of a parametrization."""
    tree, found = ast.parse(source), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef)):
            for statement in node.body:
                if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                    found += [(statement.lineno, bare_names(statement.value))]
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize" and len(node.args) > 1:
            found += [(node.lineno, bare_names(node.args[1]))]
    return [(line, items) for line, items in found if items]


def test_the_finder_finds_hand_kept_lists_and_leaves_cases():
    source = ('SELF_ONLY = {"none", "t5bias"}\n'
              'FLAGS = ["--arch", "rposnet_iwslt_de_en"]\n'
              'PAIRS = [("decoder-cross", "t5bias")]\n'
              'class A:\n    METHODS = ("shaw", "lstmpe", "rposnet")\n'
              '@pytest.mark.parametrize("arch", ["hc_sa", "nope"])\n'
              'def test(arch):\n    for name in ["mha", "shaw"]:\n        pass\n')
    assert [line for line, _ in hand_kept_lists(source)] == [1, 5, 6]


def test_no_test_keeps_a_list_of_mixers_by_hand():
    found = []
    for name in sorted(os.listdir(TESTS)):
        if name.endswith(".py"):
            with open(os.path.join(TESTS, name), encoding="utf-8") as f:
                found += [f"tests/{name}:{line}: {items}" for line, items in hand_kept_lists(f.read())]
    assert not found, "hand-kept lists (derive them from the registries or the arch table):\n" + "\n".join(found)


BACKTICKED = re.compile(r"`([a-z0-9_]+)`")


TABLE_OF_PARTS = {"mixer", "mixers", "variant", "variants", "arch", "archs"}  # a table with one row per mixer or variant


def hand_kept_lines(text: str):
    """(line number, names) of the doc lines outside generated blocks that list mixers or variants: a line naming
    four or more, or a row of a table whose first column is the mixer or variant."""
    inside = set()
    for start, end in generated_blocks(text):
        inside.update(range(start, end + 1))
    lines, found, header = text.splitlines(), [], None
    for number, line in enumerate(lines, 1):
        cells = [cell.strip() for cell in line.split("|")[1:-1]] if line.startswith("|") else []
        if not cells:
            header = None
        elif header is None and number < len(lines) and lines[number].startswith("| ---"):
            header = cells[0].lower()
        if number in inside:
            continue
        names = [n for n in BACKTICKED.findall(line) if n in MIXERS | set(VARIANTS)]
        row_of_parts = header in TABLE_OF_PARTS and cells and not line.startswith("| ---") and cells[0].lower() != header
        if len(set(names)) >= 4 or row_of_parts:
            found.append((number, names or cells[:1]))
    return found


def test_the_doc_finder_finds_tables_of_mixers_and_long_lines():
    text = ("| mixer | what |\n| --- | --- |\n| `shaw` | relative |\n\n"
            "| encoding | what |\n| --- | --- |\n| `posnet` | kernels |\n\n"
            "`mha`, `shaw`, `relattn` and `rposnet` take it.\n`shaw` and `rposnet` do.\n")
    assert [number for number, _ in hand_kept_lines(text)] == [3, 9]


DOCS = ["README.md"] + [f"docs/{name}" for name in sorted(os.listdir(os.path.join(ROOT, "docs"))) if name.endswith(".md")]


@pytest.mark.parametrize("doc", DOCS)
def test_no_doc_keeps_a_list_of_mixers_or_variants_by_hand(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        found = hand_kept_lines(f.read())
    assert not found, f"{doc}: lines listing mixers or variants outside a generated block: {found}"
