"""The dependency direction of the architecture, enforced on every module's imports.

The layers, lowest first: ``api`` (the data model) → ``devices`` (device families, card
placement, the node side) → ``framework`` → ``plugins``, ``actions``, ``cache`` → ``conf`` →
the device conf glue → ``loop`` → ``cluster`` → ``replay`` (the trace experiment) →
``commands``. ``hack/import_graph.py`` holds the ranks and prints the graph's figures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load_graph_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "hack" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


GRAPH = _load_graph_tool()
RUNTIME: dict[str, set[str]] = GRAPH.graph()
TYPED: dict[str, set[str]] = GRAPH.graph(typing=True)

# The small shared modules that may sit at the top level of ``scheduler``.
TOP_LEVEL = {"__main__", "conf", "confyaml", "deviceconf", "httpserver", "logs", "loop", "metrics",
             "signals", "collector"}

# Rooms of one rank that must still not import each other.
SIDEWAYS = {
    "plugins": ("scheduler.cache", "actions"),
    "actions": ("scheduler.cache", "plugins"),
    "scheduler.cache": ("plugins", "actions"),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _imports_of(prefix: str) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in TYPED.items() if _within(a, prefix) for b in targets)


def test_api_imports_nothing_above_it() -> None:
    assert [f"{a} imports {b}" for a, b in _imports_of("scheduler.api")
            if not _within(b, "scheduler.api")] == []


def test_devices_import_only_api() -> None:
    assert [f"{a} imports {b}" for a, b in _imports_of("scheduler.devices")
            if not (_within(b, "scheduler.api") or _within(b, "scheduler.devices"))] == []


def test_no_import_runs_up() -> None:
    upward = [
        f"{a} imports {b}"
        for a, targets in TYPED.items()
        for b in targets
        if GRAPH.rank_of(GRAPH.room_of(a)) < GRAPH.rank_of(GRAPH.room_of(b))
    ]
    assert upward == []


def test_rooms_of_one_rank_stay_apart() -> None:
    sideways = [
        f"{a} imports {b}"
        for layer, forbidden in SIDEWAYS.items()
        for a, b in _imports_of(layer)
        if any(_within(b, f) for f in forbidden)
    ]
    assert sideways == []


def test_only_commands_import_commands() -> None:
    """``python -m scheduler`` (``scheduler/__main__.py``) is the one entry point above them."""
    assert [f"{a} imports {b}" for a, targets in TYPED.items() for b in targets
            if _within(b, "scheduler.commands")
            and not (_within(a, "scheduler.commands") or a == "scheduler.__main__")] == []


def test_only_replay_and_commands_import_replay() -> None:
    outside = [
        f"{a} imports {b}"
        for a, targets in TYPED.items()
        for b in targets
        if _within(b, "scheduler.replay")
        and not (_within(a, "scheduler.replay") or _within(a, "scheduler.commands"))
    ]
    assert outside == []


def test_runtime_imports_have_no_circle() -> None:
    assert GRAPH.circles(RUNTIME) == []


def test_the_top_level_holds_only_the_small_shared_modules() -> None:
    loose = sorted(p.stem for p in (ROOT / "scheduler").glob("*.py") if p.stem != "__init__")
    assert sorted(set(loose) - TOP_LEVEL) == []


def test_every_room_has_a_rank() -> None:
    unranked = sorted({GRAPH.room_of(m) for m in TYPED} - set(GRAPH.RANKS)
                      - {f"scheduler.{name}" for name in TOP_LEVEL} - {"scheduler"})
    assert unranked == []


def test_the_checks_see_an_upward_import() -> None:
    """The rank table catches what the rules forbid (a devices module importing the framework,
    a framework module importing the replay)."""
    rank, room = GRAPH.rank_of, GRAPH.room_of
    assert rank(room("scheduler.devices.finegrained.placement")) < rank(
        room("scheduler.replay.trace"))
    assert rank(room("scheduler.devices.base")) < rank(room("scheduler.framework.session"))
    assert rank(room("scheduler.loop")) < rank(room("scheduler.commands.cli"))
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "b": {"a.x"}}
    assert GRAPH.circles(edges) == [["a.x", "a.y", "a.z"]]


def test_plugins_and_actions_do_not_import_each_other() -> None:
    for folder in ("plugins", "actions"):
        for module, targets in TYPED.items():
            if not _within(module, folder) or module == folder:
                continue
            others = [n for n in targets if _within(n, folder) and n != module and n != folder]
            assert others == [], f"{module} imports {others}"
