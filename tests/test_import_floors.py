"""The two floors: the library (what fairseq's ``--user-dir`` loads) never imports the research harness
(``posmix_fairseq.harness``) above it, at module level or inside a function."""
import ast
import io
import os
import tokenize

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


#: the library's floors, lowest first: a module imports modules of its own floor or lower ones, never higher
FLOORS = [
    ("posmix_fairseq.core", "posmix_fairseq.kernels", "posmix_fairseq.binarized_data",
     "posmix_fairseq.data_fingerprint", "posmix_fairseq.fairseq_checkpoints", "posmix_fairseq.fairseq_bf16",
     "posmix_fairseq.fairseq_patches"),
    ("posmix_fairseq.mixers.engine",),
    ("posmix_fairseq.mixers.paths",),
    ("posmix_fairseq.mixers", "posmix_fairseq.position_encodings"),
    ("posmix_fairseq.tasks", "posmix_fairseq.schedulers"),
    ("posmix_fairseq.models",),
    ("posmix_fairseq",),
]
#: the harness's floors, lowest first, above the library's: its plumbing (the modules beside the subpackages:
#: among them the papers' reported numbers and fairseq's loading for inference, which every floor above reads);
#: the recipes; the figures (drawing, from files); the analyses (evaluation: commands that may draw a figure);
#: the benchmarks
HARNESS_FLOORS = [
    tuple(f"{HARNESS}.{name}" for name in ("command", "pipeline", "raw_text", "checkpoint_files", "testing",
                                           "environment", "toy_corpus", "options", "freeze", "paper_tables",
                                           "fairseq_loading", "docs")),
    (f"{HARNESS}.recipes",),
    (f"{HARNESS}.figures",),
    (f"{HARNESS}.evaluation",),
    (f"{HARNESS}.benchmarks",),
    (HARNESS,),
]
#: budgets in lines of code (``code_lines``: blank and comment-only lines are free). A variant (a mixer or a position
#: encoding, ``mixers/<name>.py`` or ``position_encodings/<name>.py``) is one small module with a budget of its own,
#: so a new one costs the shared budget its arch row only (models/architectures.py is machinery); the machinery (the
#: rest of the library) has a total with declared headroom for its next features (docs/choices.md, "Line budgets")
VARIANT_LINES = 200
MACHINERY_LINES = 5000


def floor_of(module: str, floors=None) -> int:
    """The floor of ``module``: the longest prefix among ``floors`` (FLOORS, then HARNESS_FLOORS) that names it
    or a package above it."""
    floors = FLOORS + HARNESS_FLOORS if floors is None else floors
    best, depth = None, -1
    for level, prefixes in enumerate(floors):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and prefix.count(".") > depth:
                best, depth = level, prefix.count(".")
    assert best is not None, f"{module} is on no floor of FLOORS or HARNESS_FLOORS: add it"
    return best


def enclosing_packages(module: str):
    """The packages Python runs before ``module`` (its parents, outermost first)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(paths):
    """{module: modules of the package it imports (module level and inside functions), with the packages that
    enclose them (Python runs ``pkg/__init__.py`` before ``pkg.mod``)}; a package that encloses the importer is
    left out (Python has run it before the importer)."""
    modules = {module_name(p): p for p in python_files()}
    graph = {}
    for path in paths:
        name, edges = module_name(path), set()
        for _, target in imported_modules(path):
            while target and target not in modules:  # "from pkg.mod import function" imports pkg.mod
                target = target.rpartition(".")[0]
            for module in [*enclosing_packages(target), target] if target else []:
                if module in modules and module != name and not name.startswith(module + "."):
                    edges.add(module)
        graph[name] = edges
    return graph


def cycles(graph):
    """The import cycles of ``graph``: its strongly connected components of more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycles():
    found = cycles(import_graph(list(python_files())))
    assert not found, f"import cycles (module-level and function-level imports): {found}"


def upward_imports(paths):
    return [f"{name} (floor {floor_of(name)}) imports {target} (floor {floor_of(target)})"
            for name, targets in import_graph(paths).items() for target in sorted(targets)
            if floor_of(target) > floor_of(name)]


def test_library_imports_never_run_back_up_a_floor():
    upward = upward_imports(library_files())
    assert not upward, "\n".join(upward)


def test_harness_imports_never_run_back_up_a_floor():
    harness = [p for p in python_files() if module_name(p).startswith(HARNESS)]
    upward = upward_imports(harness)
    assert not upward, "\n".join(upward)


def test_the_harness_floors_lie_above_the_librarys():
    assert floor_of(HARNESS + ".command") > floor_of("posmix_fairseq")
    assert floor_of(HARNESS + ".evaluation.score") > floor_of(HARNESS + ".figures.plot")
    assert floor_of(HARNESS + ".paper_tables") < floor_of(HARNESS + ".recipes.readme")


def test_importing_a_module_counts_the_packages_above_it():
    """``from ..evaluation.paper_tables import X`` in a figure module runs evaluation/__init__.py, a floor above
    the figures: the graph has that edge, so an import that reaches down through a higher package is found."""
    assert enclosing_packages("posmix_fairseq.harness.evaluation.score") == [
        "posmix_fairseq", "posmix_fairseq.harness", "posmix_fairseq.harness.evaluation"]
    edges = import_graph([os.path.join(PACKAGE_DIR, "models", "plan.py")])["posmix_fairseq.models.plan"]
    assert {"posmix_fairseq.mixers", "posmix_fairseq.mixers.engine", "posmix_fairseq.mixers.engine.frozen_energy"} \
        <= edges  # from ..mixers.engine.frozen_energy import FROZEN_OPTION
    assert "posmix_fairseq" not in edges and "posmix_fairseq.models" not in edges  # they enclose plan.py


NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def code_lines(source: str) -> int:
    """The lines of ``source`` that hold code: every non-blank line a token other than a comment touches
    (a docstring's lines count, a comment-only line or a blank line does not), so comments saying why
    cost nothing against the budget."""
    lines = source.splitlines()
    touched = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in NOT_CODE:
            touched.update(range(token.start[0], token.end[0] + 1))
    return sum(1 for number in touched if number <= len(lines) and lines[number - 1].strip())


def test_code_lines_leave_out_comments_and_blank_lines():
    source = ('"""A module.\n'
              '\n'
              '# not a comment: inside the docstring"""\n'
              '\n'
              '# why the next line is as it is\n'
              'x = 1  # trailing comment\n'
              '    \n'
              'def f(a,\n'
              '      # a comment between arguments\n'
              '      b):\n'
              '    return a + b\n')
    assert code_lines(source) == 6


def is_variant(module: str) -> bool:
    """A module of one mixer or position encoding: beside the mixers' machinery (engine, paths) and the encodings'
    registry (base)."""
    parts = module.split(".")
    return len(parts) == 3 and parts[1] in ("mixers", "position_encodings") and \
        parts[2] not in ("engine", "paths", "base")


def test_each_variant_module_is_small():
    variants = {module_name(p): code_lines(open(p, encoding="utf-8").read()) for p in library_files()
                if is_variant(module_name(p))}
    assert "posmix_fairseq.mixers.shaw" in variants and "posmix_fairseq.position_encodings.lstm" in variants
    large = {name: lines for name, lines in variants.items() if lines > VARIANT_LINES}
    assert not large, f"variant modules over {VARIANT_LINES} lines of code (split off a part, <variant>_<part>.py): {large}"


def test_the_machinery_stays_within_its_budget():
    lines = sum(code_lines(open(p, encoding="utf-8").read()) for p in library_files() if not is_variant(module_name(p)))
    assert lines <= MACHINERY_LINES, (f"the library's machinery (every .py file outside harness/ but the variant "
                                      f"modules) has {lines} lines of code; its budget is {MACHINERY_LINES}")


def test_library_modules_outside_the_mixers_import_no_variant():
    """What walks a model asks its modules (position_limits, position_figure, table8_parameters,
    removes_sublayer...); it never imports a mixer variant (mixers/<name>.py) to test a type."""
    variants = {module_name(p) for p in library_files()
                if module_name(p).startswith("posmix_fairseq.mixers.") and module_name(p).count(".") == 2
                and not module_name(p).endswith((".engine", ".paths"))}
    assert "posmix_fairseq.mixers.rposnet" in variants
    found = [f"{name} imports {target}" for name, targets in import_graph(library_files()).items()
             if not name.startswith("posmix_fairseq.mixers") for target in sorted(targets & variants)]
    assert not found, found


def function_imports(tree):
    """(import statement, first statement of its block) of every import inside a function of ``tree``; a block
    is a run of import statements on consecutive lines of one statement list."""
    found = []

    def visit(node, in_function):
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                first = previous = None
                for statement in value:
                    if in_function and isinstance(statement, (ast.Import, ast.ImportFrom)):
                        if previous is None or statement.lineno != previous.end_lineno + 1:
                            first = statement
                        found.append((statement, first))
                        previous = statement
                    else:
                        previous = None
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def uncommented_function_imports(source: str):
    """The lines of the imports inside a function that no comment explains: a comment on the import's own
    lines, a comment line right above it, or a comment line right above the block of imports it belongs to."""
    lines = source.splitlines()
    commented = {token.start[0] for token in tokenize.generate_tokens(io.StringIO(source).readline)
                 if token.type == tokenize.COMMENT}

    def comment_line(number):
        return number >= 1 and lines[number - 1].lstrip().startswith("#")

    return [statement.lineno for statement, first in function_imports(ast.parse(source))
            if not commented & set(range(statement.lineno, statement.end_lineno + 1))
            and not comment_line(statement.lineno - 1) and not comment_line(first.lineno - 1)]


def test_the_comment_finder_tells_commented_imports_from_bare_ones():
    source = ("import os\n"
              "def f():\n"
              "    import json  # cheap, but here on purpose\n"
              "    import csv\n"
              "    # optional: matplotlib (plots only)\n"
              "    import matplotlib\n"
              "    import matplotlib.pyplot\n"
              "    x = 1\n"
              "    import gzip\n"
              "    if x:\n"
              "        # torch loads in seconds\n"
              "        from torch import (\n"
              "            nn)\n"
              "    def g():\n"
              "        import re\n"
              "    return os\n")
    assert uncommented_function_imports(source) == [4, 9, 15]


@pytest.mark.parametrize("path", list(python_files()), ids=lambda p: module_name(p))
def test_imports_inside_functions_say_why(path):
    """Imports sit at the top of a module; one inside a function carries a comment saying why (an optional
    dependency, or the seconds torch/fairseq take to import on a route that needs them not)."""
    bare = uncommented_function_imports(open(path, encoding="utf-8").read())
    assert not bare, f"{module_name(path)}: imports inside a function without a comment saying why, lines {bare}"
