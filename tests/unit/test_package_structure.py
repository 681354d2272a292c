"""The engine package keeps the shape docs/ARCHITECTURE.md describes: small modules,
no import cycles, no upward imports, and one way into the database (store/)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import workflow_runner

PACKAGE = Path(workflow_runner.__file__).parent
MAX_LINES = 500
# Layers from the bottom up: a module may import its own layer and those below it.
LAYERS = ["store", "definition", "engine", "aws", "local", "cli"]
# Packages at the level of another layer: entry points side by side at the top.
LEVEL = {
    **{name: level for level, name in enumerate(LAYERS)},
    "testing": LAYERS.index("cli"),
    "console": LAYERS.index("cli"),
    # Flow control is one room of its own (flow/), at the engine's level: it hooks
    # into the stages. Its constructs and keys are what definitions are built from,
    # and its store module is its way into the database, each at that layer.
    "flow": LAYERS.index("engine"),
}
MODULE_LEVEL = {
    "workflow_runner.flow": LAYERS.index("definition"),
    "workflow_runner.flow.constructs": LAYERS.index("definition"),
    "workflow_runner.flow.keys": LAYERS.index("definition"),
    "workflow_runner.flow.limits": LAYERS.index("store"),
    "workflow_runner.flow.store": LAYERS.index("store"),
    "workflow_runner.flow.store_reads": LAYERS.index("store"),
}
# Packages that only the store layer (and the embedded test server) may import.
DRIVER = "psycopg"
DRIVER_ALLOWED = {"store", "embedded"}
# Modules outside the store package that reach the database through named queries.
STORE_MODULES = {"workflow_runner.flow.store", "workflow_runner.flow.store_reads"}


def _level(name: str) -> int | None:
    return MODULE_LEVEL.get(name, LEVEL.get(_top(name)))


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    targets: set[str] = set()
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                targets.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {t for t in _imports(name, path, modules) if t in modules and t != name}
        for name, path in modules.items()
    }


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_engine_module_is_over_the_size_limit() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {n: s for n, s in sizes.items() if s > MAX_LINES} == {}


def test_the_package_has_no_import_cycle() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for name, targets in _graph().items():
        here = _level(name)
        for target in targets:
            there = _level(target)
            if here is not None and there is not None and there > here:
                upward.append(f"{name} -> {target}")
            elif here is None and (there or 0) >= 2:
                upward.append(f"{name} -> {target}")  # a shared module above the stores
    assert sorted(upward) == []


def test_only_the_store_reaches_the_database() -> None:
    files = [*(PACKAGE / "store").glob("queries*.sql"), *(PACKAGE / "flow").glob("queries*.sql")]
    store_sql = "\n".join(p.read_text() for p in files)
    query_names = set(re.findall(r"^-- name: (\w+)", store_sql, re.MULTILINE))
    offenders = defaultdict(list)
    for name, path in _modules().items():
        if _top(name) in DRIVER_ALLOWED or name in STORE_MODULES:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                if any(m.split(".")[0] == DRIVER for m in modules):
                    offenders[name].append("imports psycopg")
            elif isinstance(node, ast.Attribute) and node.attr == "conn":
                offenders[name].append(".conn")
            elif isinstance(node, ast.Constant) and node.value in query_names:
                offenders[name].append(f"query {node.value!r}")
    assert dict(offenders) == {}
