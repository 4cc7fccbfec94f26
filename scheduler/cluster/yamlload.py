"""Fast loading of multi-document YAML into plain Python data, as ``yaml.safe_load_all`` would.

Kubernetes manifests are big trees of maps, lists and strings. With libyaml (PyYAML's
``CSafeLoader``) parsing and composing run in C, but two Python steps per node remain and
dominate: resolving each plain scalar's tag with a list of regular expressions, and PyYAML's
generic, generator-based constructor. Here a scalar's tag is resolved once per distinct text
(manifests repeat ``v1``, ``Pod``, namespaces and quantities thousands of times) and maps, lists
and strings are built by a direct recursion. Every other node — numbers, booleans, nulls,
timestamps, explicit tags, merge keys (``<<``) — goes to PyYAML's own safe constructor, so the
result is exactly what ``yaml.safe_load_all`` returns, aliases shared the same way.

Kubernetes reads YAML through JSON (``sigs.k8s.io/yaml``), whose YAML decoder keeps a plain
scalar that looks like a timestamp as text: ``creationTimestamp: 2026-01-01T00:00:00Z`` is the
string, not a date. ``timestamps_as_text`` does the same, so manifests load as the API server
reads them (a ``datetime`` would also stop ``-o json`` output).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduler.confyaml import YamlTooLarge, check_expansion, check_nesting, may_alias

__all__ = ["RepeatedKeyError", "load_all", "load_all_marked"]

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_DEFAULT_TAGS = {ScalarNode: _STR, SequenceNode: _SEQ, MappingNode: _MAP}


class _Loader(_BASE):
    """libyaml's safe loader with a per-load memo of plain scalars' resolved tags."""

    def __init__(self, stream: str, *, timestamps_as_text: bool = False,
                 unique_keys: bool = False) -> None:
        super().__init__(stream)
        self.plain_tags: dict[str, str] = {}
        self.timestamps_as_text = timestamps_as_text
        self.unique_keys = unique_keys
        self.may_alias = may_alias(stream)
        self.aliased = False
        """Whether the current document used an alias of a map or list (its expansion is
        then checked once it is built, still shared)."""
        self.shares = False
        """Whether the current document may use one map or list in two places (an alias,
        or a node left to PyYAML, which shares what it built for an anchor)."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            tag = self.plain_tags.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if tag == _TIMESTAMP and self.timestamps_as_text:
                    tag = _STR
                self.plain_tags[value] = tag
            return tag
        if self.yaml_path_resolvers:
            return str(super().resolve(kind, value, implicit))
        return _DEFAULT_TAGS[kind]  # what PyYAML's resolver ends with when nothing matches


def _build(node: Node, loader: _Loader, shared: dict[int, Any]) -> Any:
    kind, tag = type(node), node.tag
    if kind is ScalarNode:
        return node.value if tag == _STR else loader.construct_object(node)
    done = shared.get(id(node))
    if done is not None:
        loader.shares = True
        loader.aliased = True
        return done  # an alias of a node built already
    if kind is MappingNode and tag == _MAP:
        mapping: dict[Any, Any] = {}
        shared[id(node)] = mapping
        for key_node, value_node in node.value:
            # Plain strings, most keys and values, are taken as they are, without a call.
            if type(key_node) is ScalarNode and key_node.tag == _STR:
                key = key_node.value
            elif key_node.tag == _MERGE:
                # PyYAML builds a map with merge keys; what was built of it here is dropped
                # (an alias to one of those values is an equal copy: ``shares`` says so).
                del shared[id(node)]
                loader.shares = True
                return _construct(node, loader)
            else:
                key = _build(key_node, loader, shared)
                try:
                    hash(key)
                except TypeError:
                    raise ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        "found unhashable key", key_node.start_mark) from None
            if type(value_node) is ScalarNode and value_node.tag == _STR:
                mapping[key] = value_node.value
            else:
                mapping[key] = _build(value_node, loader, shared)
        if len(mapping) != len(node.value) and loader.unique_keys:
            _refuse_repeated_key(node)
        return mapping
    if kind is SequenceNode and tag == _SEQ:
        sequence: list[Any] = []
        shared[id(node)] = sequence
        sequence.extend([
            item.value if type(item) is ScalarNode and item.tag == _STR
            else _build(item, loader, shared)
            for item in node.value
        ])
        return sequence
    loader.shares = True
    return _construct(node, loader)


class RepeatedKeyError(yaml.YAMLError):
    """A key written twice in one map, where keys must be unique."""


def _refuse_repeated_key(node: Node) -> None:
    """A key written twice in one map: kubectl (go-yaml v3) refuses the file, where PyYAML
    would keep the later value silently (a later, empty ``resources:`` would drop requests)."""
    first: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if type(key_node) is not ScalarNode:
            continue
        key = (key_node.tag, key_node.value)
        if key in first:
            raise RepeatedKeyError(
                f"line {key_node.start_mark.line + 1}: mapping key {key_node.value!r} already "
                f"defined at line {first[key]}")
        first[key] = key_node.start_mark.line + 1


def _construct(node: Node, loader: _Loader) -> Any:
    """PyYAML's construction, which expands merge keys (``<<: *a``) as it goes: a node that
    may hold an alias is checked for a bomb first."""
    if loader.may_alias:
        check_expansion(node)
    return loader.construct_object(node, deep=True)


def load_all(text: str) -> Iterator[Any]:
    """The documents of ``text``, one at a time; raises :class:`yaml.YAMLError` like PyYAML."""
    for document, _ in load_all_marked(text):
        yield document


def load_all_marked(
    text: str, *, timestamps_as_text: bool = False, unique_keys: bool = False
) -> Iterator[tuple[Any, bool]]:
    """As :func:`load_all`, each document with whether it may use one map or list in two
    places (False: every map and list in it is its own, so it can be changed in place).
    With ``timestamps_as_text`` a plain scalar that looks like a timestamp stays a string, as
    Kubernetes reads it; with ``unique_keys`` a key written twice in one map is a
    :class:`RepeatedKeyError`, as kubectl refuses it. An alias bomb or nesting too deep raises
    :class:`~scheduler.confyaml.YamlTooLarge` before the document is built."""
    check_nesting(text)
    loader = _Loader(text, timestamps_as_text=timestamps_as_text, unique_keys=unique_keys)
    try:
        while loader.check_node():
            loader.shares = loader.aliased = False
            node = loader.get_node()
            try:
                document = _build(node, loader, {})
            except RecursionError:
                raise YamlTooLarge("maps and lists nested too deep to load") from None
            if loader.aliased:  # built with aliases shared; refused before anyone expands it
                check_expansion(node)
            # what PyYAML's construct_document resets between documents
            loader.constructed_objects = {}
            loader.recursive_objects = {}
            yield document, loader.shares
    finally:
        loader.dispose()
