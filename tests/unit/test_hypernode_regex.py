"""HyperNode ``regexMatch`` selectors read as Go's RE2, as Volcano reads them
(``pkg/scheduler/api/hyper_node_info.go`` ``nodeMatchSelector``: ``regexp.Compile`` then
``MatchString``): POSIX classes and ``\\z`` work, what RE2 refuses is a warning naming the
HyperNode (the member picks no node), and matching takes linear time on any input, so a
pattern that backtracks exponentially in Python's ``re`` cannot hang ``simulate`` or the
HyperNode cache of ``lahar run``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.api.goregex import compile_pattern
from scheduler.api.hypernode import build_tree, hypernode_from_object
from scheduler.cache.cache import SchedulerCache
from tests.builders import IgnoredWrites, make_hypernode, make_node

REPO = Path(__file__).resolve().parents[2]
NODES = {"node-1": {}, "node-12": {}, "gpu-a": {}, "rack7x": {}}


def _members(pattern: str) -> tuple[frozenset[str], list[str]]:
    hn = hypernode_from_object(make_hypernode("s0", tier=1, regex=pattern))
    tree = build_tree([hn], NODES)
    return tree.nodes_of("s0"), tree.warnings


@pytest.mark.parametrize(
    ("pattern", "picked"),
    [
        pytest.param("^node-[[:digit:]]+$", {"node-1", "node-12"}, id="posix-class"),
        pytest.param(r"[[:digit:]]\z", {"node-1", "node-12"}, id="end-of-text-z"),
        pytest.param(r"[[:digit:]]x\z", {"rack7x"}, id="posix-class-and-z"),
        pytest.param("(?i)GPU", {"gpu-a"}, id="case-insensitive-flag"),
        pytest.param("node", {"node-1", "node-12"}, id="unanchored"),
    ],
)
def test_re2_syntax_picks_what_go_picks(pattern: str, picked: set[str]) -> None:
    """hyper_node_info.go:768-774: Go's regexp (RE2). Python's re read ``[[:digit:]]`` as a set
    of the characters ``[:digt`` followed by ``]`` (matching no node) and refused ``\\z``."""
    nodes, warnings = _members(pattern)
    assert nodes == picked
    assert not warnings


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("^node(?=-1)", id="lookahead"),
        pytest.param("(?<!x)node", id="lookbehind"),
        pytest.param(r"(n)\1", id="backreference"),
        pytest.param(r"node\Z", id="python-only-Z"),
        pytest.param("(", id="unbalanced"),
    ],
)
def test_a_pattern_re2_refuses_is_a_warning_naming_the_hypernode(pattern: str) -> None:
    """hyper_node_info.go:769-772: a pattern that does not compile is logged and picks no node.
    Python's re accepted look-arounds, so they picked nodes Volcano never picks, and an
    invalid pattern raised an ObjectError that refused the whole HyperNode."""
    nodes, warnings = _members(pattern)
    assert nodes == frozenset()
    assert len(warnings) == 1
    assert warnings[0].startswith("HyperNode s0: member Node regexMatch pattern")
    assert repr(pattern) in warnings[0] and "RE2" in warnings[0]


def test_a_refused_pattern_leaves_the_other_members_in_place() -> None:
    obj = make_hypernode("s0", tier=1, nodes=["node-1"], regex="(?=x)")
    tree = build_tree([hypernode_from_object(obj)], NODES)
    assert tree.nodes_of("s0") == {"node-1"}


BAD = "tests/data/bad"
BACKTRACKING = "^(a|aa)+$"


def test_catastrophic_backtracking_is_linear_in_the_hypernode_cache() -> None:
    """The cache ``lahar run`` feeds from its watches builds the tree at the next snapshot;
    with Python's re the 40-character name took tens of seconds (each character more about
    1.6 times as long)."""
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    for name in ("a" * 40 + "-x", "aaaa"):
        cache.apply("ADDED", "Node", make_node(name))
    cache.apply("ADDED", "HyperNode", make_hypernode("s0", tier=1, regex=BACKTRACKING))
    start = time.perf_counter()
    tree = cache.snapshot().hypernodes
    assert time.perf_counter() - start < 0.5
    assert tree.nodes_of("s0") == {"aaaa"}
    start = time.perf_counter()
    assert not compile_pattern(BACKTRACKING).search("a" * 100_000 + "b")
    assert time.perf_counter() - start < 0.5


def test_catastrophic_backtracking_is_linear_in_simulate() -> None:
    """``lahar simulate`` of a node with a 252-character name under a HyperNode whose pattern
    backtracks exponentially in Python's re: it ends (well under a second of matching; the
    bound here leaves room for the interpreter's start) and places nothing there wrongly."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", f"{BAD}/hypernode-backtracking.yaml"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "HyperNode leaf-a: member Node matching /^(a|aa)+$/ picks no node" in result.stderr
    assert elapsed < 20
