"""The layout shows the architecture and keeps showing it: each package imports only from the
layers below it (datastore ← sessionstore ← matching ← fixgw), no modules import each other in
a circle, and no module of the shipped packages grows far past 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.gateway_helpers import ROOT

LAYERS = ["datastore", "sessionstore", "matching", "fixgw"]  # lowest first
MAX_LINES = 650  # "about 500": a module past this is split before it grows further


def modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The shipped modules ``name`` imports (absolute or relative), at any depth of the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in known}
    return found - {name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_each_package_imports_only_from_the_layers_below_it() -> None:
    upward = [f"{m} imports {t}" for m, targets in graph().items() for t in targets
              if LAYERS.index(t.split(".")[0]) > LAYERS.index(m.split(".")[0])]
    assert not upward, upward


def test_no_modules_import_each_other_in_a_circle() -> None:
    edges = graph()
    # A package's __init__ re-exporting its own modules is not a circle of the code's structure.
    edges = {m: {t for t in targets if not (t == m.split(".")[0] and "." in m)} for m, targets in edges.items()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                circles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not circles, [" -> ".join(c) for c in circles]


def test_no_module_is_far_past_five_hundred_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long
