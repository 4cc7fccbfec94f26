"""HyperNode (``topology.volcano.sh/v1alpha1``): the network-topology tree nodes sit in.

A HyperNode is one network domain (a switch, a spine, a rack) at a numbered ``tier``; lower
tiers are closer. Its members are either nodes (chosen by exact name, a regular expression on
the node name, or a label selector) or other HyperNodes (by exact name only). The tree built
from all HyperNodes says, for each HyperNode, its parent, its children and the set of real
nodes under it.

Public surface:

- ``hypernode_from_object(obj) -> HyperNode`` parses one wire dict once; a malformed object is
  an ``ObjectError`` naming the HyperNode and the field.
- ``build_tree(hypernodes, nodes) -> HyperNodeTree`` builds and validates the tree from the
  parsed objects and ``{node name: labels}``. It never raises: what Volcano's
  ``HyperNodesInfo`` refuses (a cycle, a HyperNode claimed by two parents) makes the tree not
  ``ready`` (jobs with a network-topology constraint then wait, as in Volcano) and adds a line
  to ``warnings`` naming the objects; what Volcano tolerates (a missing member, a node in two
  HyperNodes of one tier, a selector no node matches, a ``regexMatch`` pattern Go's RE2 refuses)
  only adds a warning. Patterns are RE2, matched unanchored (``scheduler/api/goregex.py``).
- ``status_node_count(hypernode, nodes)``: ``status.nodeCount`` as Volcano's HyperNode
  controller writes it (the names its members select, not the nodes under it).
- ``HyperNodeTree``: ``tiers`` (ascending), ``by_tier``, ``tier_names``, ``info[name]``
  (``HyperNodeInfo``: tier, tier name, parent, children, nodes), ``nodes_of(name)``,
  ``hypernode_of(node, tier)``, ``containing(node)``, ``ancestors(name)``, ``lca(a, b)``,
  ``tier_of(name)``, ``roots()`` and ``walk()`` (depth-first ``(depth, HyperNodeInfo)``).

Matched against Volcano's ``pkg/scheduler/api/hyper_node_info.go`` (``BuildHyperNodeCache``,
``addChild``, ``GetAncestors``, ``GetLCAHyperNode``, ``HyperNodeTierNameMap``) and
``pkg/util/hypernode/member_selector.go`` (``GetMembers``). Volcano keeps the tree
incrementally and its outcome for conflicting objects depends on event order; Lahar rebuilds
it from the whole set in name order so the outcome is the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.goregex import compile_pattern
from scheduler.api.selectors import LabelSelector, parse_label_selector

__all__ = [
    "MEMBER_HYPERNODE",
    "MEMBER_NODE",
    "HyperNode",
    "HyperNodeInfo",
    "HyperNodeTree",
    "Member",
    "build_tree",
    "hypernode_from_object",
    "status_node_count",
]

MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"
_KIND = "HyperNode"


@dataclass(frozen=True, slots=True)
class Member:
    type: str
    """``Node`` or ``HyperNode``."""
    exact: str = ""
    regex: str = ""
    label: LabelSelector | None = None

    def describe(self) -> str:
        if self.exact:
            return f"{self.type} {self.exact}"
        if self.regex:
            return f"{self.type} matching /{self.regex}/"
        return f"{self.type} with labels"

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether node ``name`` is picked by this member (Volcano's ``GetMembers``)."""
        if self.exact:
            return name == self.exact
        if self.regex:
            return compile_pattern(self.regex).search(name)
        if self.label is not None:
            return bool(self.label.requirements) and self.label.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str = ""
    members: tuple[Member, ...] = ()


def hypernode_from_object(obj: Mapping[str, Any]) -> HyperNode:
    """Parse one HyperNode from its wire dict; errors name the object and field."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ObjectError(kind=_KIND, name="?", field="metadata.name", problem="is required")

    def err(where: str, problem: str) -> ObjectError:
        return ObjectError(kind=_KIND, name=name, field=where, problem=problem)

    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise err("spec", "is required")
    tier = spec.get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise err("spec.tier", "must be an integer")
    if tier < 0:
        raise err("spec.tier", f"must be at least 0, got {tier}")
    tier_name = spec.get("tierName", "") or ""
    if not isinstance(tier_name, str):
        raise err("spec.tierName", "must be a string")
    raw_members = spec.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        raise err("spec.members", "must be a non-empty list")
    members = tuple(_member(raw, f"spec.members[{i}]", err) for i, raw in enumerate(raw_members))
    return HyperNode(name=name, tier=tier, tier_name=tier_name, members=members)


def _member(raw: Any, where: str, err: Any) -> Member:
    if not isinstance(raw, Mapping):
        raise err(where, "must be an object")
    kind = raw.get("type")
    if kind not in (MEMBER_NODE, MEMBER_HYPERNODE):
        raise err(where + ".type", f"must be Node or HyperNode, got {kind!r}")
    selector = raw.get("selector")
    if not isinstance(selector, Mapping):
        raise err(where + ".selector", "is required")
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if len(given) != 1:
        raise err(
            where + ".selector",
            "exactly one of exactMatch, regexMatch or labelMatch must be given"
            + (f" (got {', '.join(given)})" if given else ""),
        )
    if given[0] == "exactMatch":
        exact = selector["exactMatch"]
        value = exact.get("name") if isinstance(exact, Mapping) else None
        if not isinstance(value, str) or not value:
            raise err(where + ".selector.exactMatch.name", "must be a non-empty string")
        return Member(type=kind, exact=value)
    if given[0] == "regexMatch":
        regex = selector["regexMatch"]
        pattern = regex.get("pattern") if isinstance(regex, Mapping) else None
        if not isinstance(pattern, str) or not pattern:
            raise err(where + ".selector.regexMatch.pattern", "must be a non-empty string")
        return Member(type=kind, regex=pattern)  # a pattern RE2 refuses is a tree warning
    label = parse_label_selector(selector["labelMatch"], where + ".selector.labelMatch", err)
    return Member(type=kind, label=label)


def status_node_count(hypernode: HyperNode, nodes: Mapping[str, Mapping[str, str]]) -> int:
    """Volcano's ``actualNodeCnt`` (``pkg/controllers/hypernode/hypernode_handler.go``) over
    ``GetMembers`` (``pkg/util/hypernode/member_selector.go``): the distinct names the members
    select, whatever their type. An exact name counts even when no such node exists (and a
    HyperNode member counts as one), a regex or label member counts the existing nodes it
    picks; so a spine of two leaves says 2, not the nodes under them."""
    names: set[str] = set()
    for member in hypernode.members:
        if member.exact:
            names.add(member.exact)
        else:
            names.update(n for n, labels in nodes.items() if member.matches(n, labels))
    return len(names)


@dataclass(slots=True)
class HyperNodeInfo:
    """One HyperNode placed in the tree."""

    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)
    nodes: frozenset[str] = frozenset()
    """Every real node under this HyperNode, through its children too."""
    members: tuple[Member, ...] = ()


@dataclass(slots=True)
class HyperNodeTree:
    info: dict[str, HyperNodeInfo] = field(default_factory=dict)
    tiers: list[int] = field(default_factory=list)
    by_tier: dict[int, list[str]] = field(default_factory=dict)
    """Tier → HyperNode names in name order."""
    tier_names: dict[str, int] = field(default_factory=dict)
    ready: bool = True
    warnings: list[str] = field(default_factory=list)
    told: set[str] = field(default_factory=set)
    """Problems of jobs with this tree already logged (each is logged once per tree)."""
    _node_tiers: dict[str, dict[int, str]] = field(default_factory=dict)
    _containing: dict[str, list[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.info)

    def nodes_of(self, name: str) -> frozenset[str]:
        hn = self.info.get(name)
        return hn.nodes if hn is not None else frozenset()

    def tier_of(self, name: str) -> int:
        return self.info[name].tier

    def hypernode_of(self, node: str, tier: int) -> str | None:
        """The HyperNode of ``tier`` holding ``node`` (the first in name order)."""
        return self._node_tiers.get(node, {}).get(tier)

    def containing(self, node: str) -> list[str]:
        """Every HyperNode whose node set holds ``node``, lowest tier first."""
        return self._containing.get(node, [])

    def leaf_of(self, node: str) -> str | None:
        """The node's HyperNode of the lowest tier (Volcano's ``FindHyperNodeForNode``)."""
        return self.hypernode_of(node, self.tiers[0]) if self.tiers else None

    def ancestors(self, name: str) -> list[str]:
        """``name`` then its parent, grandparent, … up to a root."""
        chain = [name]
        seen = {name}
        hn = self.info.get(name)
        while hn is not None and hn.parent and hn.parent not in seen:
            chain.append(hn.parent)
            seen.add(hn.parent)
            hn = self.info.get(hn.parent)
        return chain

    def lca(self, a: str, b: str) -> str:
        """Lowest common ancestor; ``""`` when ``a`` and ``b`` share no root."""
        if not a:
            return b
        if not b:
            return a
        mine = set(self.ancestors(a))
        return next((x for x in self.ancestors(b) if x in mine), "")

    def roots(self) -> list[str]:
        return sorted(
            (hn.name for hn in self.info.values() if not hn.parent),
            key=lambda n: (-self.info[n].tier, n),
        )

    def walk(self) -> Iterator[tuple[int, HyperNodeInfo]]:
        """Depth-first ``(depth, info)`` from each root, children in name order."""
        stack = [(0, name) for name in reversed(self.roots())]
        while stack:
            depth, name = stack.pop()
            hn = self.info[name]
            yield depth, hn
            stack.extend((depth + 1, c) for c in reversed(hn.children))


def build_tree(
    hypernodes: Iterable[HyperNode], nodes: Mapping[str, Mapping[str, str]]
) -> HyperNodeTree:
    """Build and validate the tree; see the module docstring for what is refused."""
    tree = HyperNodeTree()
    objects = sorted(hypernodes, key=lambda h: h.name)
    for hn in objects:
        tree.info[hn.name] = HyperNodeInfo(hn.name, hn.tier, hn.tier_name, members=hn.members)
    _link_children(tree, objects)
    _break_cycles(tree)
    for info in tree.info.values():
        info.children.sort()
    own_nodes = {hn.name: _node_members(tree, hn, nodes) for hn in objects}
    _collect_nodes(tree, own_nodes)
    for hn in objects:
        tree.by_tier.setdefault(hn.tier, []).append(hn.name)
        if hn.tier_name:
            known = tree.tier_names.setdefault(hn.tier_name, hn.tier)
            if known != hn.tier:
                tree.warnings.append(
                    f"HyperNode {hn.name}: tierName {hn.tier_name!r} is tier {hn.tier} here "
                    f"but tier {known} elsewhere; tier {known} is used"
                )
    tree.tiers = sorted(tree.by_tier)
    _index_nodes(tree)
    return tree


def _link_children(tree: HyperNodeTree, objects: list[HyperNode]) -> None:
    for hn in objects:
        for member in hn.members:
            if member.type != MEMBER_HYPERNODE:
                continue
            if not member.exact:
                tree.warnings.append(
                    f"HyperNode {hn.name}: a HyperNode member is chosen by exact name only; "
                    f"member {member.describe()} is ignored, as Volcano ignores it"
                )
                continue
            child = tree.info.get(member.exact)
            if child is None:
                tree.warnings.append(
                    f"HyperNode {hn.name}: member HyperNode {member.exact} does not exist; "
                    "it adds no node until it is created"
                )
                continue
            if child.parent and child.parent != hn.name:
                tree.ready = False
                tree.warnings.append(
                    f"HyperNode {hn.name}: member HyperNode {member.exact} is also a member of "
                    f"{child.parent}; it stays under {child.parent} and jobs with a "
                    "network-topology constraint wait until this is fixed"
                )
                continue
            if child.name == hn.name:
                tree.ready = False
                tree.warnings.append(f"HyperNode {hn.name}: lists itself as a member (a cycle)")
                continue
            if child.name not in tree.info[hn.name].children:
                child.parent = hn.name
                tree.info[hn.name].children.append(child.name)


def _break_cycles(tree: HyperNodeTree) -> None:
    """A parent chain that loops is cut at the edge closing it (name order decides)."""
    done: set[str] = set()
    for name in sorted(tree.info):
        path: list[str] = []
        current = name
        while current and current not in done:
            if current in path:
                loop = path[path.index(current) :]
                last = loop[-1]
                tree.ready = False
                tree.warnings.append(
                    f"HyperNode {last}: HyperNodes "
                    + " -> ".join([*loop, current])
                    + f" form a cycle; {last} is detached from {current} and jobs with a "
                    "network-topology constraint wait until this is fixed"
                )
                tree.info[current].children.remove(last)
                tree.info[last].parent = ""
                break
            path.append(current)
            current = tree.info[current].parent
        done.update(path)


def _node_members(
    tree: HyperNodeTree, hn: HyperNode, nodes: Mapping[str, Mapping[str, str]]
) -> set[str]:
    found: set[str] = set()
    for member in hn.members:
        if member.type != MEMBER_NODE:
            continue
        if member.exact:
            if member.exact in nodes:
                found.add(member.exact)
            else:
                tree.warnings.append(
                    f"HyperNode {hn.name}: member Node {member.exact} does not exist"
                )
            continue
        if member.regex and compile_pattern(member.regex).error:
            tree.warnings.append(
                f"HyperNode {hn.name}: member Node regexMatch pattern {member.regex!r} is not a "
                f"valid RE2 (Go regexp) pattern ({compile_pattern(member.regex).error}); it "
                "picks no node, as in Volcano"
            )
            continue
        picked = {n for n, labels in nodes.items() if member.matches(n, labels)}
        if not picked:
            tree.warnings.append(f"HyperNode {hn.name}: member {member.describe()} picks no node")
        found |= picked
    return found


def _collect_nodes(tree: HyperNodeTree, own: dict[str, set[str]]) -> None:
    memo: dict[str, frozenset[str]] = {}
    for name, hn in tree.info.items():
        hn.nodes = _nodes_under(name, tree=tree, own=own, memo=memo)


def _nodes_under(name: str, *, tree: HyperNodeTree, own: dict[str, set[str]],
                 memo: dict[str, frozenset[str]]) -> frozenset[str]:
    """The nodes of ``name`` and of every HyperNode below it. A module function rather than a
    nested one: a nested function that calls itself holds a reference cycle through its own
    closure, which only a full garbage collection frees."""
    cached = memo.get(name)
    if cached is not None:
        return cached
    result = set(own.get(name, ()))
    for child in tree.info[name].children:
        result |= _nodes_under(child, tree=tree, own=own, memo=memo)
    memo[name] = frozenset(result)
    return memo[name]


def _index_nodes(tree: HyperNodeTree) -> None:
    for tier in tree.tiers:
        for name in tree.by_tier[tier]:
            for node in sorted(tree.info[name].nodes):
                tree._containing.setdefault(node, []).append(name)
                per_tier = tree._node_tiers.setdefault(node, {})
                other = per_tier.setdefault(tier, name)
                if other != name:
                    tree.warnings.append(
                            f"HyperNode {name}: Node {node} is also in {other} of tier {tier}; "
                        f"{other} is taken as its tier-{tier} HyperNode"
                    )
