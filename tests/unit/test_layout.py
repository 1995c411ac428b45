"""The layout stays easy to find one's way in: no import circles among run_bash's modules, and no
Python file outside the pause list's own package over 1,000 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "run_bash"
MAX_LINES = 1000


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_at_module_level(path: Path, modules: set[str]) -> set[str]:
    """The run_bash modules ``path`` imports outside functions (``TYPE_CHECKING`` blocks count:
    a circle of annotations is still a circle to read)."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # `from pkg import sub` needs the submodule; `from pkg import name`, the package.
                subs = {f"{base}.{a.name}" for a in node.names} & modules
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(base)
            for field in ("body", "orelse", "handlers", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    visit([n for n in inner if isinstance(n, ast.stmt)])
                    for h in inner:
                        if isinstance(h, ast.ExceptHandler):
                            visit(h.body)

    visit(tree.body)
    return {m for m in found if m in modules and m != me}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    names = set(files)
    return {m: imports_at_module_level(p, names) for m, p in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_no_import_circles() -> None:
    assert cycles(graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """Control: a circle made up here is found."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_config_and_the_backends_do_not_need_each_other() -> None:
    edges = graph()
    assert "run_bash.backends" in edges["run_bash.config"]
    assert not any(m.startswith("run_bash.sandbox") for m in edges["run_bash.config"])
    assert edges["run_bash.backends"] == set()


def test_no_python_file_outside_the_checker_is_over_1000_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in [*PACKAGE.rglob("*.py"), *(ROOT / "rplugin").rglob("*.py")]
        if not p.is_relative_to(PACKAGE / "checker")
        and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
