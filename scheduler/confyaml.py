"""Conf YAML read as ``yaml.safe_load`` reads it, with the keys given twice in one map noted;
and the one way a YAML file (a conf or manifests) is read from disk.

Volcano decodes its conf without strict checks, so a key written twice in one map takes the
later value; Lahar does the same but names every such key, so that the earlier value is not
dropped silently.

Files are decoded as UTF-8 whatever the locale says (Kubernetes' YAML and JSON are UTF-8), and
a file that is not UTF-8 is an error naming the file and where decoding stopped, so every
command reports it the same way instead of a decoder's traceback.

Hostile YAML is refused before it is built: a document whose aliases expand it far beyond its
own size ("billion laughs") by the API server's YAML decoder's rule (go-yaml's
``allowedAliasRatio``, decode.go: up to 99% of a small document's nodes may come from aliases,
scaling down to 10% of one of four million nodes), an alias to the node that contains it, and
nesting deeper than :data:`MAX_DEPTH` (libyaml's composer recurses in C and would overflow the
stack). Both raise :class:`YamlTooLarge`, a :class:`yaml.YAMLError`, so every reader already
reports it as invalid YAML naming the file.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

__all__ = [
    "MAX_DEPTH", "STDIN", "RepeatedKey", "UnreadableFile", "YamlTooLarge", "check_expansion",
    "check_nesting", "load_conf_yaml", "load_yaml", "may_alias", "read_text", "source_name",
]

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


class YamlTooLarge(yaml.YAMLError):
    """A document refused before it is built: excessive aliasing or nesting."""


MAX_DEPTH = 500
"""The deepest nesting of maps and lists accepted (Kubernetes objects nest a few dozen deep)."""

_C_SAFE_DEPTH = 10_000
"""Below this many collections not closed at once libyaml's C composer cannot run out of
stack, so a text with fewer openers needs no scan before it is composed."""

_OPENER = re.compile(r"[\[{](?![ \t]*[\]}])")  # an empty ``[]`` or ``{}`` cannot nest
_DEEP_BLOCK = re.compile(rf"^[ \t?:-]{{{_C_SAFE_DEPTH}}}", re.MULTILINE)

# go-yaml's alias budget (decode.go, allowedAliasRatio and decoder.unmarshal)
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000


def _allowed_alias_ratio(count: int) -> float:
    if count <= _RATIO_LOW:
        return 0.99
    if count >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (count - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


def may_alias(text: str) -> bool:
    """False when ``text`` cannot hold an alias (no ``&`` anchor or no ``*``), so that
    :func:`check_expansion` can be skipped at no cost for the usual manifest."""
    return "&" in text and "*" in text


def check_nesting(text: str) -> None:
    """Raise :class:`YamlTooLarge` if ``text`` nests deeper than :data:`MAX_DEPTH`, when it
    could nest deep enough to overflow libyaml's composer; call before composing with it.
    The exact count (parser events, no recursion) runs only for texts with that many
    non-empty flow collections or a line indented that far."""
    if len(_OPENER.findall(text)) < _C_SAFE_DEPTH and not _DEEP_BLOCK.search(text):
        return
    depth = 0
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                where = f" (line {event.start_mark.line + 1})" if event.start_mark else ""
                raise YamlTooLarge(f"maps and lists nested more than {MAX_DEPTH} deep{where}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def check_expansion(root: yaml.Node) -> None:
    """Raise :class:`YamlTooLarge` if the composed document ``root`` is an alias bomb or an
    alias refers to a node that contains it. One pass over the distinct nodes in document
    order (an alias is the node object met again); the expanded size is summed, never built."""
    expanded: dict[int, int] = {}  # a node's size with its aliases expanded, once left
    entered: set[int] = set()
    from_aliases = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
        elif key in entered:  # an alias: its node was written before
            if key not in expanded:
                raise YamlTooLarge(
                    f"an alias at line {node.start_mark.line + 1} refers to a node that "
                    "contains it")
            from_aliases += expanded[key]
        else:
            entered.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(list(_children(node))))
    total = expanded[id(root)]
    if (from_aliases > 100 and total > 1000
            and from_aliases / total > _allowed_alias_ratio(total)):
        raise YamlTooLarge(
            f"document contains excessive aliasing ({total} nodes once its aliases are "
            f"expanded, {from_aliases} of them from aliases)")


def load_yaml(text: str) -> Any:
    """The single document of ``text`` as ``yaml.safe_load`` gives it, refusing alias bombs
    and deep nesting as the manifest and conf readers do."""
    return load_conf_yaml(text)[0]


def load_conf_yaml(text: str) -> tuple[Any, list[RepeatedKey]]:
    """The document as ``yaml.safe_load`` gives it, and the keys repeated within one map;
    raises :class:`YamlTooLarge` (a :class:`yaml.YAMLError`) for an alias bomb or deep
    nesting."""
    check_nesting(text)
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooLarge("maps and lists nested too deep to load") from None
        if node is None:
            return None, loader.repeated
        if may_alias(text):
            check_expansion(node)
        return loader.construct_document(node), loader.repeated
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
