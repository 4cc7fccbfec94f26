"""Conf YAML read as ``yaml.safe_load`` reads it, with the keys given twice in one map noted.

Volcano decodes its conf without strict checks, so a key written twice in one map takes the
later value; Lahar does the same but names every such key, so that the earlier value is not
dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

__all__ = ["RepeatedKey", "load_conf_yaml"]

_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class RepeatedKey:
    key: str
    first_line: int
    line: int
    """1-based lines of the first and of the later (used) occurrence."""


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[RepeatedKey] = []


def _map(loader: _Loader, node: yaml.MappingNode) -> Any:
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
            continue
        line = key_node.start_mark.line + 1
        key = (key_node.tag, key_node.value)
        if key in seen:
            loader.repeated.append(RepeatedKey(key_node.value, seen[key], line))
        seen[key] = line
    return SafeConstructor.construct_yaml_map(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:map", _map)


def load_conf_yaml(text: str) -> tuple[Any, list[RepeatedKey]]:
    """The document as ``yaml.safe_load`` gives it, and the keys repeated within one map."""
    loader = _Loader(text)
    try:
        return loader.get_single_data(), loader.repeated
    finally:
        loader.dispose()
