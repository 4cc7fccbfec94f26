"""Conf YAML read as ``yaml.safe_load`` reads it, with the keys given twice in one map noted;
and the one way a YAML file (a conf or manifests) is read from disk.

Volcano decodes its conf without strict checks, so a key written twice in one map takes the
later value; Lahar does the same but names every such key, so that the earlier value is not
dropped silently.

Files are decoded as UTF-8 whatever the locale says (Kubernetes' YAML and JSON are UTF-8), and
a file that is not UTF-8 is an error naming the file and where decoding stopped, so every
command reports it the same way instead of a decoder's traceback.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

__all__ = ["STDIN", "RepeatedKey", "UnreadableFile", "load_conf_yaml", "read_text", "source_name"]

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


class UnreadableFile(ValueError):
    """A file that cannot be read as UTF-8 text; the message starts with the path."""


_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


STDIN = "-"
"""The path that names standard input, as ``kubectl apply -f -`` reads it."""


def source_name(path: str | Path) -> str:
    """How messages name ``path``: ``<stdin>`` for :data:`STDIN`."""
    return "<stdin>" if str(path) == STDIN else str(path)


def read_text(path: str | Path) -> str:
    """The text of the file at ``path`` (standard input for ``-``), decoded as UTF-8; raises
    :class:`UnreadableFile`."""
    try:
        data = sys.stdin.buffer.read() if str(path) == STDIN else Path(path).read_bytes()
    except OSError as exc:
        raise UnreadableFile(f"{source_name(path)}: cannot read: {exc.strerror or exc}") from None
    path = source_name(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data.startswith(_UTF16_MARKS):
            where = "UTF-16, by its byte order mark; save it as UTF-8"
        else:
            line = data.count(b"\n", 0, exc.start) + 1
            where = f"byte 0x{data[exc.start]:02x} at offset {exc.start}, line {line}"
        raise UnreadableFile(f"{path}: not UTF-8 text ({where})") from None
