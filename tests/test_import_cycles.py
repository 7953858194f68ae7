"""No import cycle in the project (``chunker/``, ``jobs/``, ``serving/``, as one graph: a cycle may cross them): a
static check of the import graph, every import counted.

Lazy imports inside functions and imports under ``TYPE_CHECKING`` count too: a cycle that only a lazy import keeps
from failing today fails the day someone moves that import to the top, and it already tangles the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = ("chunker", "jobs", "serving")
ROOT = Path(__file__).resolve().parents[1]


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    out = {}
    for path in sorted(p for package in packages for p in (root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict[str, Path]) -> set[str]:
    """The project modules one import statement loads: ``from a.b import c`` loads ``a.b.c`` when that is a
    module, else ``a.b``; ``import a.b.c`` loads the longest known prefix."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
        return found
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per extra dot
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in known:
            found.add(full)
        elif base in known:
            found.add(base)
    return found


def import_graph(root: Path, *packages: str) -> dict[str, set[str]]:
    known = _modules(root, packages)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _targets(node, module, path.name == "__init__.py", known)
        edges.discard(module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_and_its_members():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_relative_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import X\n")
    (pkg / "c.py").write_text("def f():\n    from .sub import b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.sub.b"}
    assert cycles(graph) == [["pkg.c", "pkg.sub.b"]]


def test_the_graph_spans_packages(tmp_path):
    # A cycle through two packages is a cycle too: jobs -> chunker -> jobs would tangle the layers as much.
    for pkg in ("lib", "app"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "lib" / "core.py").write_text("from app.main import run\n")
    (tmp_path / "app" / "main.py").write_text("from lib.core import x\n")
    assert cycles(import_graph(tmp_path, "lib", "app")) == [["app.main", "lib.core"]]
    assert cycles(import_graph(tmp_path, "lib")) == []  # one package alone cannot see it


def test_the_project_has_no_import_cycle():
    graph = import_graph(ROOT, *PACKAGES)
    for package in PACKAGES:
        assert any(m.split(".")[0] == package for m in graph), f"the walk found {package}/'s modules"
    assert len(graph) > 100
    assert cycles(graph) == [], "import cycles (break them: the lower layer must not import the higher)"


def _imported_roots(path: Path) -> set[str]:
    """Top-level names of every absolute import in a file (lazy ones included)."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_layers_import_downwards_only():
    # ARCHITECTURE.md: chunker/ is the library and imports no Ray (nor jobs/ or serving/); serving/ never imports
    # jobs/; the framework retrievers' packages are optional, so only their own adapter modules may import them.
    optional = {"langchain_core": "chunker/client/langchain.py", "llama_index": "chunker/client/llamaindex.py"}
    for path in sorted((ROOT / "chunker").rglob("*.py")):
        roots = _imported_roots(path)
        rel = path.relative_to(ROOT).as_posix()
        assert not roots & {"ray", "jobs", "serving"}, f"{rel} imports {roots & {'ray', 'jobs', 'serving'}}"
        for package, home in optional.items():
            assert package not in roots or rel == home, f"{rel} imports the optional {package}"
    for path in sorted((ROOT / "serving").rglob("*.py")):
        assert "jobs" not in _imported_roots(path), path
