"""The sharding controller's policies, pipeline, configuration and node rates.

Each test cites the Volcano test or function (pkg/controllers/sharding/...) it follows.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cluster.sharding.assign import assign, needs_update
from scheduler.cluster.sharding.config import (
    DEFAULT_SCHEDULER_CONFIGS,
    ShardingConfigError,
    parse_legacy,
    parse_sharding_yaml,
)
from scheduler.cluster.sharding.metrics import NodeMetrics, node_metrics, pod_load
from scheduler.cluster.sharding.policies import PolicyContext, PolicyError, build_policy
from tests.builders import make_node, make_pod


def context(**cpu: float | None) -> PolicyContext:
    metrics = {name: NodeMetrics(cpu=value, memory=0.0, pods=0)
               for name, value in cpu.items() if value is not None}
    return PolicyContext(scheduler="s", metrics=metrics, labels={})


@pytest.mark.parametrize(("low", "high", "rate", "kept"), [
    (0.3, 0.7, 0.5, True), (0.3, 0.7, 0.2, False), (0.3, 0.7, 0.8, False),
    (0.3, 0.7, 0.30, True), (0.0, 1.0, None, False), (0.0, 1.0, -1.0, False),
    (0.3, 0.7, 0.704, True),  # rounded to two decimals first (roundUtil)
], ids=["in-range", "below", "above", "boundary", "missing", "negative", "rounded"])
def test_allocation_rate_filter(low: float, high: float, rate: float | None,
                                kept: bool) -> None:
    """TestAllocationRatePolicyFilter (policy/allocationrate/allocationrate_test.go)."""
    policy = build_policy("allocation-rate", {"minCPUUtil": low, "maxCPUUtil": high})
    assert policy.keep(context(n=rate), "n") is kept


@pytest.mark.parametrize(("low", "high", "rate", "score"), [
    (0.0, 1.0, 0.5, 0.5), (0.0, 1.0, 1.0, 1.0), (0.4, 0.6, 0.5, 0.5), (0.4, 0.6, 0.4, 0.0),
    (0.4, 0.6, 0.6, 1.0), (0.5, 0.5, 0.5, 1.0), (0.4, 0.6, 0.9, 1.0), (0.4, 0.6, 0.1, 0.0),
    (0.0, 1.0, None, 0.0), (0.0, 1.0, -1.0, 0.0),
])
def test_allocation_rate_score(low: float, high: float, rate: float | None,
                               score: float) -> None:
    """TestAllocationRatePolicyScore: the rate's place in the band, clamped to [0, 1]."""
    policy = build_policy("allocation-rate", {"minCPUUtil": low, "maxCPUUtil": high})
    assert policy.score(context(n=rate), "n") == pytest.approx(score)


@pytest.mark.parametrize(("name", "args", "message"), [
    ("allocation-rate", {"minCPUUtil": 0.8, "maxCPUUtil": 0.2}, "invalid CPU utilization"),
    ("allocation-rate", {"minCPUUtil": -0.1, "maxCPUUtil": 0.2}, "invalid CPU utilization"),
    ("allocation-rate", {"minCPUUtil": 0.0, "maxCPUUtil": 1.5}, "invalid CPU utilization"),
    ("allocation-rate", {"minCPUUtil": "low"}, "argument minCPUUtil: must be a number"),
    ("node-limit", {"minNodes": -1}, "invalid minNodes -1"),
    ("node-limit", {"minNodes": 5, "maxNodes": 2}, "maxNodes must be >= minNodes"),
    ("warmup", {"warmupLabel": ""}, "warmupLabel: must not be empty"),
    ("bin-pack", {}, "policy bin-pack not found"),
])
def test_bad_policy_arguments_are_refused(name: str, args: dict[str, object],
                                          message: str) -> None:
    """TestAllocationRatePolicyInitialize and nodelimit's Initialize checks."""
    with pytest.raises(PolicyError, match=message):
        build_policy(name, args)


VOLCANO_README = """
schedulerConfigs:
  - name: volcano
    type: volcano
    policies:
      - name: allocation-rate
        weight: 1
        arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.6}
      - name: warmup
        weight: 2
      - name: node-limit
        arguments: {minNodes: 2, maxNodes: 2}
shardSyncPeriod: 30s
enableNodeEventTrigger: false
"""


def test_weighted_sum_puts_warmup_nodes_first() -> None:
    """The example of policy/README.md (TestPipelineWeightedSum): a 0.05 warmup node scores
    1 × 0.083 + 2 × 1 and goes before a 0.55 plain node (0.92); a 0.7 node is filtered out;
    node-limit keeps two."""
    config = parse_sharding_yaml(VOLCANO_README)
    assert config.sync_period == 30.0 and config.node_event_trigger is False
    metrics = {"busy": NodeMetrics(0.55, 0, 0), "warm": NodeMetrics(0.05, 0, 0),
               "full": NodeMetrics(0.7, 0, 0), "idle": NodeMetrics(0.0, 0, 0)}
    labels = {"warm": {"node.volcano.sh/warmup": "true"}}
    got = assign(list(metrics), config.schedulers, metrics=metrics, labels=labels)
    assert got == {"volcano": ["warm", "busy"]}


def two_schedulers(max_nodes: int) -> str:
    return f"""
schedulerConfigs:
  - name: a
    policies:
      - {{name: allocation-rate, arguments: {{minCPUUtil: 0.0, maxCPUUtil: 1.0}}}}
      - {{name: node-limit, arguments: {{maxNodes: {max_nodes}}}}}
  - name: b
    policies:
      - {{name: allocation-rate, arguments: {{minCPUUtil: 0.0, maxCPUUtil: 1.0}}}}
      - {{name: node-limit, arguments: {{maxNodes: {max_nodes}}}}}
"""


def test_earlier_schedulers_take_first_and_nodes_are_never_shared() -> None:
    """TestPipelineDropAssigned: a node taken by one scheduler is not offered to the next."""
    nodes = [f"n{i:03d}" for i in range(30)]
    metrics = {n: NodeMetrics(0.0, 0, 0) for n in nodes}
    got = assign(nodes, parse_sharding_yaml(two_schedulers(20)).schedulers, metrics=metrics,
                 labels={})
    assert len(got["a"]) == 20 and len(got["b"]) == 10
    assert not set(got["a"]) & set(got["b"])


def test_volcano_batches_of_fifty_cap_each_batch_not_the_shard() -> None:
    """calculateShardAssignmentsBatched (sharding_manager.go): past 50 nodes each batch of 50
    is assigned on its own, so maxNodes 100 lets the first scheduler take all 200 nodes;
    --assignment-batch-size 0 caps the shard at 100."""
    nodes = [f"n{i:03d}" for i in range(200)]
    metrics = {n: NodeMetrics(0.0, 0, 0) for n in nodes}
    configs = parse_sharding_yaml(two_schedulers(100)).schedulers
    volcano = assign(nodes, configs, metrics=metrics, labels={})
    assert (len(volcano["a"]), len(volcano["b"])) == (200, 0)
    whole = assign(nodes, configs, metrics=metrics, labels={}, batch_size=0)
    assert whole == {"a": nodes[:100], "b": nodes[100:]}


@pytest.mark.parametrize(("current", "wanted", "update"), [
    (["n1", "n2"], ["n1"], True),
    (["n1", "n2"], ["n1", "n3"], True),
    ([f"n{i}" for i in range(20)], [f"n{i}" for i in range(1, 21)], False),
    ([f"n{i}" for i in range(20)], [f"n{i}" for i in range(2, 22)], True),
    (["n1"], ["n1"], False),
])
def test_a_shard_is_rewritten_past_a_tenth_of_new_nodes(current: list[str], wanted: list[str],
                                                        update: bool) -> None:
    """assignmentNeedsUpdate (sharding_controller.go): another count, or at least
    max(1, len/10) new nodes."""
    assert needs_update(current, wanted) is update


def test_legacy_strings_match_volcanos_defaults() -> None:
    """parseOldFormat + applyPolicyDefaults (config.go): allocation-rate and node-limit; the
    warmup flag is not acted on (the chain is already filled)."""
    config = parse_legacy(DEFAULT_SCHEDULER_CONFIGS)
    names = {s.name: [w.policy.NAME for w in s.policies] for s in config.schedulers}
    assert names == {"volcano": ["allocation-rate", "node-limit"],
                     "agent-scheduler": ["allocation-rate", "node-limit"]}


def test_scalar_fields_make_the_policy_chain() -> None:
    """applyPolicyDefaults (TestApplyPolicyDefaultsSynthesisLegacy): no policies → an
    allocation-rate band from cpuUtilizationMin/Max, warmup for preferWarmupNodes and
    node-limit for minNodes/maxNodes."""
    config = parse_sharding_yaml("""
schedulerConfigs:
  - {name: agent, type: agent, cpuUtilizationMin: 0.7, cpuUtilizationMax: 1.0,
     preferWarmupNodes: true, minNodes: 1, maxNodes: 5}
""")
    (scheduler,) = config.schedulers
    assert [(w.policy.NAME, w.weight) for w in scheduler.policies] == [
        ("allocation-rate", 1), ("warmup", 1), ("node-limit", 1)]


@pytest.mark.parametrize(("text", "message"), [
    ("schedulerConfigs: []", "at least one schedulerConfig entry"),
    ("schedulerConfigs: [{type: x}]", r"schedulerConfigs\[0\]: field name: must not be empty"),
    ("schedulerConfigs: [{name: a, cpuUtilizationMin: 2}]", "cpuUtilizationMin: 2.00 out of"),
    ("schedulerConfigs: [{name: a, minNodes: 3, maxNodes: 1}]", r"maxNodes \(1\) must be >="),
    ("schedulerConfigs: [{name: a, policies: [{name: warmup, weight: -1}]}]",
     "weight must be an integer >= 0"),
    ("schedulerConfigs: [{name: a, policies: [{name: warmup, arguments: {maxNodes: 3}}]}]",
     "maxNodes is only supported by the node-limit policy"),
    ("schedulerConfigs: [{name: a, policies: [{name: spread}]}]", "policy spread not found"),
    ("schedulerConfigs: [{name: a}]\nshardSyncPeriod: soon", "field shardSyncPeriod"),
    ("- a list", "must be a mapping with schedulerConfigs"),
])
def test_bad_configuration_names_the_entry_and_field(text: str, message: str) -> None:
    """ParseShardingConfig and validatePolicies (config.go)."""
    with pytest.raises(ShardingConfigError, match=message):
        parse_sharding_yaml(text, source="sharding.yaml")


def test_bad_legacy_string_is_refused() -> None:
    with pytest.raises(ShardingConfigError, match="expected 7 colon-separated parts"):
        parse_legacy(["volcano:volcano:0.0:0.6"])


def test_rates_count_running_pods_against_capacity() -> None:
    """calculateMetricsFromPodsAndNode (node_utilization.go): requests of pods neither
    Succeeded nor Failed nor mirrored, over capacity, capped at 1."""
    node = make_node("n1", cpu="4", memory="8Gi")
    node["status"]["allocatable"]["cpu"] = "2"  # capacity, not allocatable, is the divisor
    pods = [make_pod("a", cpu="1", memory="2Gi", node="n1"),
            make_pod("b", cpu="500m", node="n1", phase="Succeeded"),
            make_pod("c", cpu="1", node="n1", annotations={"kubernetes.io/config.mirror": "x"}),
            make_pod("d", cpu="2", node="n1", phase="Pending")]
    loads = [load for pod in pods if (load := pod_load(pod)) is not None]
    metrics = node_metrics(node, loads)
    assert metrics == NodeMetrics(cpu=0.75, memory=0.25, pods=2)
    crowded = node_metrics(node, [(3.0, 0.0), (3.0, 0.0)])
    assert crowded.cpu == 1.0


def test_the_config_file_is_read_again_when_it_changes(tmp_path: Any) -> None:
    """Volcano reloads its sharding ConfigMap on change and keeps the last good one on an
    error (reloadFromConfigMap); here the mounted file."""
    import os

    from scheduler.cluster.kube.shardcontroller import FileReload, file_signature

    path = tmp_path / "sharding.yaml"
    path.write_text("schedulerConfigs: [{name: a}]\n")
    reload = FileReload(str(path), file_signature(str(path)))
    assert reload() is None  # unchanged
    path.write_text("schedulerConfigs: [{name: a}, {name: b}]\n")
    os.utime(path, ns=(1, 2))
    fresh = reload()
    assert fresh is not None and [s.name for s in fresh.schedulers] == ["a", "b"]
    path.write_text("schedulerConfigs: []\n")
    os.utime(path, ns=(3, 4))
    assert reload() is None  # refused and reported; the caller keeps its config
