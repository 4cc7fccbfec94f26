"""``lahar run --hypernode-discovery-config`` against the API server double: HyperNodes made
from node labels over HTTP, kept in step with label changes, hand-made ones untouched, and a
hard job placed inside one of them by the same process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_helpers import RunningScheduler, make_node, make_pod, wait_until

from tests.apiserver import DEFAULT_COLLECTIONS, ApiServerDouble

HYPERNODES = "topology.volcano.sh/v1alpha1/hypernodes"
SOURCE = "volcano.sh/network-topology-source"
TOR = "volcano.sh/tor"
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""
DISCOVERY = f"""networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        a2:
          - nodeLabel: {TOR}
          - nodeLabel: kubernetes.io/hostname
"""


def _discovered(apiserver: ApiServerDouble) -> dict[str, list[str]]:
    """tor value → member names of the discovered HyperNode."""
    out = {}
    for key in apiserver.sorted_keys(HYPERNODES):
        obj = apiserver.get(HYPERNODES, key) or {}
        labels = obj["metadata"].get("labels") or {}
        if labels.get(SOURCE) == "label":
            out[labels[TOR]] = sorted(m["selector"]["exactMatch"]["name"]
                                      for m in obj["spec"]["members"])
    return out


def _hard_job(apiserver: ApiServerDouble, name: str, pods: int) -> list[str]:
    apiserver.create("scheduling.volcano.sh/v1beta1/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"minMember": pods, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})
    names = []
    for index in range(pods):
        pod = make_pod(f"{name}-{index}", namespace="team", group=name)
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        apiserver.create("v1/pods", pod)
        names.append(f"team/{name}-{index}")
    return names


def test_discovery_writes_hypernodes_and_the_scheduler_uses_them(tmp_path: Path) -> None:
    """discovery/label/label.go generateHyperNodeInfo and hypernode_controller.go
    reconcileTopology over HTTP; the same process's cache takes the HyperNodes from its watch
    and allocate keeps a hard tier-1 job inside one of them."""
    apiserver = ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, HYPERNODES),
                                status_subresources=("queues", "pods", "hypernodes"))
    apiserver.start()
    for index, tor in enumerate(["t1", "t1", "t2", "t2"]):
        apiserver.create("v1/nodes", make_node(f"n{index}", cpu="4", labels={TOR: tor}))
    hand: dict[str, Any] = {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "hand-made"},
        "spec": {"tier": 2, "members": [{"type": "Node",
                                         "selector": {"regexMatch": {"pattern": "^n"}}}]}}
    hand_stored = apiserver.create(HYPERNODES, hand)
    (tmp_path / "lahar.conf").write_text(CONF)
    (tmp_path / "discovery.conf").write_text(DISCOVERY)
    scheduler = RunningScheduler(
        "--master", apiserver.url, "--leader-elect=false", "--schedule-period=50ms",
        "--scheduler-conf", str(tmp_path / "lahar.conf"),
        "--hypernode-discovery-config", str(tmp_path / "discovery.conf"))
    try:
        wait_until(lambda: _discovered(apiserver) == {"t1": ["n0", "n1"], "t2": ["n2", "n3"]},
                   timeout=10.0, message="HyperNodes discovered")
        pods = _hard_job(apiserver, "gang", 4)  # 8 cpu: exactly one tor's two nodes

        def nodes_of_job() -> set[str]:
            return {(apiserver.get("v1/pods", key) or {}).get("spec", {}).get("nodeName", "")
                    for key in pods}

        wait_until(lambda: "" not in nodes_of_job(), timeout=10.0, message="job bound")
        assert nodes_of_job() in ({"n0", "n1"}, {"n2", "n3"})
        node = apiserver.get("v1/nodes", "n3") or {}
        node["metadata"]["labels"] = {TOR: "t1"}
        apiserver.update("v1/nodes", node)
        wait_until(lambda: _discovered(apiserver) == {"t1": ["n0", "n1", "n3"],
                                                      "t2": ["n2"]},
                   timeout=10.0, message="relabelled node moved")
        # hypernode_handler.go syncHyperNodeStatus: every HyperNode's status.nodeCount, the
        # hand-made one's too (its regex picks the four nodes); its spec is never written.
        def counts() -> dict[str, int]:
            return {key: (apiserver.get(HYPERNODES, key) or {}).get("status", {}).get(
                "nodeCount", -1) for key in apiserver.sorted_keys(HYPERNODES)}

        wait_until(lambda: sorted(counts().values()) == [1, 3, 4], timeout=10.0,
                   message="status.nodeCount written")
        assert counts()["hand-made"] == 4
        assert (apiserver.get(HYPERNODES, "hand-made") or {})["spec"] == hand_stored["spec"]
        writes = [r for r in apiserver.requests
                  if r.path.startswith("/apis/topology.volcano.sh/") and r.method != "GET"]
        assert writes and all(not r.path.endswith("/hand-made") for r in writes)
    finally:
        assert scheduler.stop() == 0
        apiserver.stop()
