"""No import cycle among ``specdec`` modules.

Every module's module-level imports are read with ``ast``: statements at the top of the file and
inside module-level ``if`` / ``try`` / ``with`` blocks, ``if TYPE_CHECKING:`` included (a cycle
that only type checkers follow still ties two modules into one). Imports inside a function or a
class body are left out: they run late, by design. ``from pkg import name`` counts as an import
of ``pkg.name`` where that is a module, else of ``pkg``. A cycle is a strongly connected group of
two or more modules (Tarjan's algorithm), or a module importing itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from specdec.testing.paths import REPO

PACKAGE = REPO / "specdec"


def module_name(path: Path, package: Path) -> str:
    """``specdec.bench.records`` for ``<package>/bench/records.py`` (a package: its folder)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(body: list[ast.stmt]):
    """The statements run at import time: the body, and module-level blocks' bodies."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    yield from _top_level(
                        child.body if isinstance(child, ast.ExceptHandler) else [child]
                    )


def module_imports(path: Path, package: Path, modules: set[str]) -> set[str]:
    """The ``specdec`` modules ``path`` imports at module level."""
    me = module_name(path, package)
    base = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out: set[str] = set()
    for node in _top_level(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:  # relative: from the importer's package up
                up = base[: len(base) - (node.level - 1)]
                source = ".".join(up + ([node.module] if node.module else []))
            out |= {
                f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                for a in node.names
            }
    return {m for m in out if m in modules}


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at module level."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    return {m: module_imports(p, package, set(files)) for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules, and self-imports (sorted)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth: the longest import chain (tens)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_finder_sees_a_type_checking_cycle(tmp_path):
    pkg = tmp_path / "specdec"
    (pkg / "bench").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bench" / "__init__.py").write_text("")
    (pkg / "bench" / "rows.py").write_text("from specdec.bench.repeats import aggregate\n")
    (pkg / "bench" / "repeats.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from specdec.bench.rows import Row\n"
    )
    (pkg / "bench" / "late.py").write_text("def f():\n    from specdec.bench import lazy\n")
    (pkg / "bench" / "lazy.py").write_text("from . import late\n")
    graph = import_graph(pkg)
    assert graph["specdec.bench.lazy"] == {"specdec.bench.late"}
    assert graph["specdec.bench.late"] == set()  # function-level: not counted
    assert cycles(graph) == [["specdec.bench.repeats", "specdec.bench.rows"]]


def test_no_import_cycle_in_specdec():
    graph = import_graph(PACKAGE)
    assert len(graph) > 100  # the package was found
    found = cycles(graph)
    assert found == [], f"import cycles (module-level imports): {found}"
