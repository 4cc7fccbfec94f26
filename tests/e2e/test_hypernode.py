"""Network-topology scheduling against a real API server: HyperNodes discovered from node
labels by ``lahar run --hypernode-discovery-config``, hard jobs kept inside one HyperNode, a job
that fits in none left pending with its reason, and a HyperNode edited while the scheduler runs.

Each case labels its own nodes with a label key of its own, so the HyperNodes it makes or
discovers never mix with another case's; it deletes them when done.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from scheduler.commands.cli import main
from tests.e2e.conftest import Case
from tests.e2e.kube import ROOT, eventually, ignore_missing, raw

TOPOLOGY = ("topology.volcano.sh", "v1alpha1")
SOURCE_LABEL = "volcano.sh/network-topology-source"
CONF = """
actions: "enqueue, allocate, backfill"
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


@pytest.fixture
def topology_case(own_case: Case) -> Iterator[Case]:
    """``own_case`` with the HyperNode CRD served; HyperNodes of the case deleted after."""
    reason = _ensure_hypernode_crd(own_case)
    if reason:
        pytest.skip(reason)
    yield own_case
    for process in own_case.processes:  # no discovery writing while we clean up
        process.terminate()
    for hypernode in _hypernodes(own_case):
        ignore_missing(own_case.kube.custom.delete_cluster_custom_object, *TOPOLOGY,
                       "hypernodes", hypernode["metadata"]["name"])


def _ensure_hypernode_crd(case: Case) -> str | None:
    if case.kube.served(*TOPOLOGY, "hypernodes"):
        return None
    path = ROOT / "conf" / "crds" / "topology.volcano.sh_hypernodes.yaml"
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            try:
                raw(case.kube.extensions.create_custom_resource_definition, document)
            except ApiException as error:
                if error.status == 404:
                    return "the API server serves no hypernodes and takes no CRDs"
                raise
    eventually(lambda: case.kube.served(*TOPOLOGY, "hypernodes"), timeout=60.0,
               what="CRD hypernodes served")
    return None


def _label_key(case: Case) -> str:
    return f"lahar.e2e/tor-{case.case_id}"


def _hypernodes(case: Case) -> list[dict[str, Any]]:
    """The HyperNodes of this case: discovered from its label key, or named after it."""
    items = raw(case.kube.custom.list_cluster_custom_object, *TOPOLOGY,
                "hypernodes").get("items") or []
    return [h for h in items if _label_key(case) in (h["metadata"].get("labels") or {})
            or case.case_id in h["metadata"]["name"]]


def _members(hypernode: dict[str, Any]) -> list[str]:
    return sorted(m["selector"]["exactMatch"]["name"] for m in hypernode["spec"]["members"])


def _label_nodes(case: Case, tors: dict[str, str]) -> None:
    for node, tor in tors.items():
        raw(case.kube.core.patch_node, node, {"metadata": {"labels": {_label_key(case): tor}}})


def _hypernode(case: Case, name: str, nodes: list[str], *, tier: int = 1) -> dict[str, Any]:
    return {"apiVersion": "/".join(TOPOLOGY), "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": "leaf", "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": node}}}
                for node in nodes]}}


def _topology_job(case: Case, name: str, *, pods: int, tier: int = 1) -> list[str]:
    raw(case.kube.custom.create_namespaced_custom_object, "scheduling.volcano.sh", "v1beta1",
        case.namespace, "podgroups",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": name, "namespace": case.namespace},
         "spec": {"minMember": pods,
                  "networkTopology": {"mode": "hard", "highestTierAllowed": tier}}})
    names = [f"{name}-{i}" for i in range(pods)]
    for pod in names:
        case.pod(pod, group=name)
    return names


def _discovery_config(case: Case, tmp_path: Path) -> str:
    path = tmp_path / f"discovery-{case.case_id}.conf"
    path.write_text(yaml.safe_dump({"networkTopologyDiscovery": [{
        "source": "label", "enabled": True,
        "config": {"networkTopologyTypes": {f"e2e{case.case_id}": [
            {"nodeLabel": _label_key(case)}, {"nodeLabel": "kubernetes.io/hostname"}]}}}]}))
    return str(path)


def _discovered_by_value(case: Case) -> dict[str, dict[str, Any]]:
    key = _label_key(case)
    return {h["metadata"]["labels"][key]: h for h in _hypernodes(case)
            if (h["metadata"].get("labels") or {}).get(SOURCE_LABEL) == "label"}


def test_discovery_creates_and_updates_hypernodes_from_node_labels(
        topology_case: Case, tmp_path: Path) -> None:
    """Volcano's label discovery (pkg/controllers/hypernode/discovery/label/label.go
    generateHyperNodeInfo, hypernode_controller.go reconcileTopology): one tier-1 HyperNode
    per label value holding the nodes that carry it, marked source=label; relabelling a node
    moves it, and a value no node carries any more loses its HyperNode."""
    case = topology_case
    nodes = case.add_nodes(3, units=2)
    _label_nodes(case, {nodes[0]: "a", nodes[1]: "a", nodes[2]: "b"})
    scheduler = case.start_scheduler(conf=CONF, extra_args=(
        "--hypernode-discovery-config", _discovery_config(case, tmp_path)))
    scheduler.wait_serving()

    def settled(expected: dict[str, list[str]]) -> bool:
        found = _discovered_by_value(case)
        return {value: _members(h) for value, h in found.items()} == expected

    eventually(lambda: settled({"a": sorted(nodes[:2]), "b": [nodes[2]]}),
               what="HyperNodes discovered from the labels", timeout=60.0)
    first = _discovered_by_value(case)
    assert first["a"]["spec"]["tier"] == 1
    assert first["a"]["spec"]["tierName"] == _label_key(case)
    assert first["a"]["metadata"]["name"].startswith(f"hypernode-e2e{case.case_id}-tier1-")
    _label_nodes(case, {nodes[2]: "a"})
    eventually(lambda: settled({"a": sorted(nodes)}), what="relabelled node moved",
               timeout=60.0)
    assert _discovered_by_value(case)["a"]["metadata"]["name"] == first["a"]["metadata"]["name"]


def test_hard_job_is_placed_inside_one_hypernode(topology_case: Case,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """allocate's hypernode path (Volcano's allocateForJob): a hard job with
    highestTierAllowed 1 lands on the nodes of one tier-1 HyperNode, though spreading would
    put it on all four nodes; ``lahar inspect topology --kubeconfig`` shows it there."""
    case = topology_case
    nodes = case.add_nodes(4, units=2)
    groups = {f"left-{case.case_id}": nodes[:2], f"right-{case.case_id}": nodes[2:]}
    for name, members in groups.items():
        raw(case.kube.custom.create_cluster_custom_object, *TOPOLOGY, "hypernodes",
            _hypernode(case, name, members))
    scheduler = case.start_scheduler(conf=CONF)
    scheduler.wait_serving()
    pods = _topology_job(case, "gang", pods=4)
    eventually(lambda: len(case.bound(pods)) == 4, what="hard job bound", timeout=60.0)
    used = {case.node_of(pod) for pod in pods}
    holder = next((name for name, members in groups.items() if used <= set(members)), None)
    assert holder is not None, used
    capsys.readouterr()
    assert main(["inspect", "topology", "--kubeconfig", case.settings.kubeconfig,
                 "--hypernode", holder, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (shown,) = [h for h in report["hypernodes"] if h["name"] == holder]
    assert [(j["name"], j["boundPods"]) for j in shown["jobs"]] == [
        (f"{case.namespace}/gang", 4)]
    assert shown["nodeCount"] == 2


def test_job_that_fits_no_hypernode_stays_pending_with_the_reason(topology_case: Case) -> None:
    """Six one-unit pods, hard tier 1, two HyperNodes of four units each: the cluster has
    room, no HyperNode does; no pod is bound and the PodGroup says why."""
    case = topology_case
    nodes = case.add_nodes(4, units=2)
    for index, members in enumerate((nodes[:2], nodes[2:])):
        raw(case.kube.custom.create_cluster_custom_object, *TOPOLOGY, "hypernodes",
            _hypernode(case, f"leaf{index}-{case.case_id}", members))
    scheduler = case.start_scheduler(conf=CONF)
    scheduler.wait_serving()
    pods = _topology_job(case, "toobig", pods=6)

    def unschedulable() -> dict[str, Any] | None:
        group = case.kube.podgroup(case.namespace, "toobig")
        for condition in (group.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
                return dict(condition)
        return None

    condition = eventually(unschedulable, what="Unschedulable condition", timeout=60.0)
    assert condition["message"], condition
    assert case.bound(pods) == []
    print(f"reason: {condition.get('reason')}: {condition['message']}")


def test_hypernode_edited_while_running_lets_the_job_in(topology_case: Case) -> None:
    """The HyperNode watch feeds the cache incrementally: a job waiting because no HyperNode
    holds it is placed once a HyperNode is edited to hold enough nodes."""
    case = topology_case
    nodes = case.add_nodes(3, units=2)
    name = f"edit-{case.case_id}"
    raw(case.kube.custom.create_cluster_custom_object, *TOPOLOGY, "hypernodes",
        _hypernode(case, name, nodes[:1]))
    raw(case.kube.custom.create_cluster_custom_object, *TOPOLOGY, "hypernodes",
        _hypernode(case, f"other-{case.case_id}", nodes[1:]))
    scheduler = case.start_scheduler(conf=CONF)
    scheduler.wait_serving()
    pods = _topology_job(case, "waits", pods=5)  # 5 units: only all three nodes hold it
    eventually(lambda: case.kube.podgroup(case.namespace, "waits").get("status"),
               what="first session over the job", timeout=60.0)
    assert case.bound(pods) == []
    raw(case.kube.custom.delete_cluster_custom_object, *TOPOLOGY, "hypernodes",
        f"other-{case.case_id}")
    current = raw(case.kube.custom.get_cluster_custom_object, *TOPOLOGY, "hypernodes", name)
    current["spec"] = _hypernode(case, name, nodes)["spec"]
    raw(case.kube.custom.replace_cluster_custom_object, *TOPOLOGY, "hypernodes", name, current)
    eventually(lambda: len(case.bound(pods)) == 5, what="job bound after the edit",
               timeout=60.0)
