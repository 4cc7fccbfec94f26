#!/usr/bin/env python3
"""Figures of the import graph of ``scheduler``, ``plugins`` and ``actions``.

Prints, as JSON: the rooms (packages of the layout, each loose top-level module of
``scheduler`` counted apart), the arrows between rooms, the arrows that run up the layers, and
the circles of the runtime import graph (imports under ``if TYPE_CHECKING:`` left out, imports
inside functions kept: they run too). ``--edges`` lists the upward arrows and the circles'
modules.

    python hack/import_graph.py [--edges]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The layers, lowest first (``tests/unit/test_layering.py`` holds each module to them). A room
# is placed by the longest prefix listed here; a module no prefix names is a loose module of the
# top level (ranked with the commands).
RANKS: dict[str, int] = {
    "scheduler.api": 0,
    "scheduler.confyaml": 0,
    "scheduler.logs": 0,
    "scheduler.metrics": 0,
    "scheduler.collector": 0,
    "scheduler.httpserver": 1,
    "scheduler.signals": 1,
    "scheduler.devices": 1,
    "scheduler.api.devices": 1,  # where the device families lived before scheduler/devices/
    "scheduler.framework": 2,
    "plugins": 3,
    "actions": 3,
    "scheduler.cache": 3,
    "scheduler.conf": 4,
    "scheduler.deviceconf": 5,
    "scheduler.loop": 6,
    "scheduler.cluster": 7,
    "scheduler.replay": 8,
    "scheduler.web": 8,  # the web view: beside the commands, fed by a hook of the loop
    "scheduler.commands": 9,
}
LOOSE_RANK = 9


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, module: str, *, typing: bool = False) -> set[str]:
    """Modules ``path`` imports when it runs (absolute and relative imports); with ``typing``,
    also those imported for type checking only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not typing and isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from scheduler import metrics`` imports the module ``scheduler.metrics``
            names.update(f"{base}.{alias.name}" for alias in node.names)
            names.add(base)
    return names


def room_of(module: str) -> str:
    if module == "scheduler.devices" and (ROOT / "scheduler" / "devices.py").exists():
        return "scheduler.deviceconf"  # the conf glue's name before scheduler/devices/ existed
    best = ""
    for prefix in RANKS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return best or module


def rank_of(room: str) -> int:
    return RANKS.get(room, LOOSE_RANK)


def graph(*, typing: bool = False) -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    for folder in ("scheduler", "plugins", "actions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            modules[module_name(path)] = path
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges[module] = {
            name for name in imports(path, module, typing=typing)
            if name in modules and name != module and not _empty_package(modules[name])
        }
    return edges


def _empty_package(path: Path) -> bool:
    return path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip()


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
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


def figures(edges: dict[str, set[str]], typed: dict[str, set[str]]) -> dict[str, object]:
    rooms = {room_of(m) for m in edges}
    cross = sorted((a, b) for a in edges for b in edges[a] if room_of(a) != room_of(b))
    upward = [(a, b) for a, b in cross if rank_of(room_of(a)) < rank_of(room_of(b))]
    loose = sorted(r for r in rooms if r not in RANKS and r.startswith("scheduler."))
    found = circles(edges)
    typed_found = circles(typed)
    return {
        "modules": len(edges),
        "rooms": len(rooms),
        "loose_top_level_modules": loose,
        "cross_room_arrows": len(cross),
        "upward_arrows": len(upward),
        "circles": len(found),
        "modules_in_circles": sum(len(c) for c in found),
        "circles_with_type_only_imports": len(typed_found),
        "_upward": [f"{a} -> {b}" for a, b in upward],
        "_circles": found,
        "_circles_with_type_only_imports": typed_found,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true",
                        help="also list the upward arrows and the circles' modules")
    args = parser.parse_args(argv)
    result = figures(graph(), graph(typing=True))
    if not args.edges:
        result = {k: v for k, v in result.items() if not k.startswith("_")}
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
