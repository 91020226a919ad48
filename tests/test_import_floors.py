"""The two floors: the library (what fairseq's ``--user-dir`` loads) never imports the research harness
(``posmix_fairseq.harness``) above it, at module level or inside a function."""
import ast
import os

import pytest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "posmix_fairseq")
HARNESS = "posmix_fairseq.harness"


def module_name(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].split(os.sep)
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def imported_modules(path: str):
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    name = module_name(path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # "from . import x" imports the module x
                yield node.lineno, f"{target}.{alias.name}"


def python_files():
    for root, _, files in os.walk(PACKAGE_DIR):
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(root, f)


def library_files():
    return [p for p in python_files() if not module_name(p).startswith(HARNESS)]


def test_the_harness_is_one_visible_subpackage():
    assert os.path.isfile(os.path.join(PACKAGE_DIR, "harness", "__init__.py"))
    assert len(library_files()) < len(list(python_files()))


@pytest.mark.parametrize("path", library_files(), ids=lambda p: module_name(p))
def test_the_library_never_imports_the_harness(path):
    upward = [f"line {line}: {target}" for line, target in imported_modules(path)
              if target == HARNESS or target.startswith(HARNESS + ".")]
    assert not upward, f"{module_name(path)} imports the harness: {upward}"
