"""The cache's NodeShard mirror: reacting to shard changes, the status it writes, bad input.

Matches Volcano's pkg/scheduler/cache/shard_coordinator.go (RefreshNodeShards,
getAvailableNodesFromShard, generateNodeShardWithStatus) and event_handlers.go
(AddNodeShard / UpdateNodeShard / DeleteNodeShard).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.api.nodeshard import ShardScope
from scheduler.cache.cache import SchedulerCache
from scheduler.cache.shards import NodeShardStore
from tests.builders import IgnoredWrites, make_node

Obj = dict[str, Any]


class ShardWriter(IgnoredWrites):
    def __init__(self) -> None:
        self.statuses: list[tuple[str, Mapping[str, Any]]] = []
        self.events: list[str] = []

    def update_node_shard_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        self.statuses.append((name, dict(status)))

    def record_event(self, **kwargs: Any) -> None:
        self.events.append(kwargs["message"])


def shard(name: str, desired: list[str], *, in_use: list[str] | None = None,
          to_add: list[str] | None = None, to_remove: list[str] | None = None) -> Obj:
    obj: Obj = {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
                "metadata": {"name": name}, "spec": {"nodesDesired": desired}}
    status = {key: value for key, value in (("nodesInUse", in_use), ("nodesToAdd", to_add),
                                            ("nodesToRemove", to_remove)) if value is not None}
    if status:
        obj["status"] = status
    return obj


def cache(mode: str = "hard", name: str = "a") -> tuple[SchedulerCache, ShardWriter]:
    writer = ShardWriter()
    built = SchedulerCache(writer=writer, clock=lambda: 0.0, sharding_mode=mode,
                           sharding_name=name)
    for node in ("n1", "n2", "n3", "n4"):
        built.apply("ADDED", "Node", make_node(node))
    return built, writer


def test_available_nodes_leave_out_what_other_shards_use() -> None:
    """TestGetAvailableNodesFromShard "basic calculation": desired less the union of the other
    shards' nodesInUse."""
    store = NodeShardStore(mode="hard", name="a")
    store.apply(False, shard("b", ["n3"], in_use=["n2"]))
    store.apply(False, shard("c", [], in_use=["n3"]))
    store.apply(False, shard("a", ["n1", "n2", "n3"]))
    assert store.in_use == {"n1"}
    assert store.scope() == ShardScope(mode="hard", nodes=frozenset({"n1"}))


def test_the_snapshot_follows_shard_changes() -> None:
    """UpdateNodeShard / DeleteNodeShard refresh the set; a deleted own shard leaves the last
    set in place (RefreshNodeShards returns early), a node released by another shard's
    status becomes ours."""
    built, _ = cache()
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset())
    built.apply("ADDED", "NodeShard", shard("a", ["n1", "n2"]))
    built.apply("ADDED", "NodeShard", shard("b", ["n3"], in_use=["n2", "n3"]))
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset({"n1"}))
    built.apply("MODIFIED", "NodeShard", shard("b", ["n3"], in_use=["n3"]))
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset({"n1", "n2"}))
    built.apply("MODIFIED", "NodeShard", shard("a", ["n4"]))
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset({"n4"}))
    built.apply("DELETED", "NodeShard", shard("a", ["n4"]))
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset({"n4"}))


def test_status_is_written_only_when_it_changes() -> None:
    """generateNodeShardWithStatus: nodesInUse, nodesToAdd (desired, not usable yet) and
    nodesToRemove (usable, no longer desired); nothing written when all three stand
    (TestGenerateNodeShardWithStatusRecordsTransitionNodes)."""
    built, writer = cache()
    built.apply("ADDED", "NodeShard", shard("b", [], in_use=["n2"]))
    built.apply("ADDED", "NodeShard", shard("a", ["n1", "n2"]))
    built.flush()
    assert writer.statuses == [("a", {"nodesInUse": ["n1"], "nodesToAdd": ["n2"],
                                      "nodesToRemove": []})]
    writer.statuses.clear()
    # Our own write comes back through the watch: nothing more to write.
    built.apply("MODIFIED", "NodeShard", shard("a", ["n1", "n2"], in_use=["n1"],
                                               to_add=["n2"], to_remove=[]))
    built.flush()
    assert writer.statuses == []


def test_sharding_off_ignores_node_shards() -> None:
    built, writer = cache(mode="none")
    built.apply("ADDED", "NodeShard", shard("a", ["n1"]))
    built.flush()
    assert built.snapshot().shard is None
    assert writer.statuses == []


@pytest.mark.parametrize(("spec", "problem"), [
    ({"nodesDesired": "n1"}, "field spec.nodesDesired: must be a list of node names"),
    ({"nodesDesired": ["n1", 3]}, "field spec.nodesDesired: must be a list of node names"),
])
def test_a_malformed_shard_is_reported_and_the_last_good_one_kept(spec: Obj,
                                                                  problem: str) -> None:
    built, writer = cache()
    built.apply("ADDED", "NodeShard", shard("a", ["n1"]))
    bad = shard("a", [])
    bad["spec"] = spec
    built.apply("MODIFIED", "NodeShard", bad)
    built.flush()
    assert problem in built.broken["NodeShard a"]
    assert any(problem in message for message in writer.events)
    assert built.snapshot().shard == ShardScope(mode="hard", nodes=frozenset({"n1"}))


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="sharding mode 'firm'"):
        NodeShardStore(mode="firm")


@pytest.mark.parametrize("flags", [["--scheduler-sharding-mode=firm"],
                                   ["--scheduler-sharding-name="],
                                   ["--scheduler-sharding-name=Shard_A"]])
def test_bad_sharding_flags_are_refused_naming_the_flag(flags: list[str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from scheduler.cluster.kube.flags import add_run_arguments

    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(flags)
    assert "--scheduler-sharding-" in capsys.readouterr().err


def test_node_shards_are_watched_only_with_sharding_on() -> None:
    """Volcano starts its NodeShard informer only in hard or soft mode (cache.go)."""
    from scheduler.cluster.kube.reflector import NODESHARDS, RESOURCES
    from scheduler.cluster.kube.run import resources_watched
    from tests.integration.kube_helpers import parse_run_args

    assert resources_watched(parse_run_args()) == RESOURCES
    for mode in ("hard", "soft"):
        watched = resources_watched(parse_run_args(f"--scheduler-sharding-mode={mode}"))
        assert watched == (*RESOURCES, NODESHARDS)
