"""The dependency direction of the architecture, enforced on every module's imports."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# package prefix -> prefixes it must not import
FORBIDDEN = {
    "scheduler.api": (
        "scheduler.framework",
        "scheduler.cache",
        "scheduler.cluster",
        "scheduler.conf",
        "scheduler.commands.cli",
        "scheduler.loop",
        "scheduler.cluster.simulation",
        "plugins",
        "actions",
    ),
    "scheduler.framework": (
        "scheduler.cache",
        "scheduler.cluster",
        "scheduler.conf",
        "scheduler.commands.cli",
        "scheduler.loop",
        "scheduler.cluster.simulation",
        "plugins",
        "actions",
    ),
    "scheduler.cache": (
        "scheduler.cluster",
        "scheduler.commands.cli",
        "scheduler.loop",
        "scheduler.cluster.simulation",
        "plugins",
        "actions",
    ),
    "plugins": (
        "scheduler.cache",
        "scheduler.cluster",
        "scheduler.conf",
        "scheduler.commands.cli",
        "scheduler.loop",
        "actions",
    ),
    "actions": (
        "scheduler.cache",
        "scheduler.cluster",
        "scheduler.conf",
        "scheduler.commands.cli",
        "scheduler.loop",
        "plugins",
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_layers_import_only_downwards() -> None:
    violations = []
    for folder in ("scheduler", "plugins", "actions"):
        for path in (ROOT / folder).rglob("*.py"):
            module = _module_name(path)
            for layer, forbidden in FORBIDDEN.items():
                if module != layer and not module.startswith(layer + "."):
                    continue
                for name in _imports(path):
                    if any(name == f or name.startswith(f + ".") for f in forbidden):
                        violations.append(f"{module} imports {name}")
    assert violations == []


def test_plugins_and_actions_do_not_import_each_other() -> None:
    for folder in ("plugins", "actions"):
        for path in (ROOT / folder).glob("*.py"):
            if path.name == "__init__.py":
                continue
            own = f"{folder}.{path.stem}"
            others = [n for n in _imports(path) if n.startswith(folder + ".") and n != own]
            assert others == [], f"{own} imports {others}"
