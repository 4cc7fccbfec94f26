"""What loads but would not look the same in a cluster is a warning, in one format:
``warning: FILE#DOC: Kind ns/name: what`` (a conf's: ``warning: FILE: where: what``).

Peers: a pod's ``spec.nodeName`` is where the kubelet runs it (no node, no run); Volcano's
HyperNode tiers grow towards the root (pkg/scheduler/api/hyper_node_info.go); Volcano's
``parseActions`` runs an action as often as it is listed (pkg/scheduler/util.go); the
network-topology-aware plugin uses ``fading`` as given (plugins/network-topology-aware);
a ConfigMap given as ``--conf`` is read from its data key, as Volcano's scheduler reads the
mounted ``volcano-scheduler.conf`` (cmd/scheduler/app/server.go).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", *args], cwd=REPO, capture_output=True,
        text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def _warnings(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


def test_cluster_shapes_a_cluster_would_show_differently_are_warned() -> None:
    result = _simulate(f"{BAD}/warn-cluster.yaml", f"{BAD}/device-negative.yaml",
                       f"{BAD}/queue-cycle.yaml")
    assert result.returncode == 0, result.stderr
    assert _warnings(result) == [
        f"warning: {BAD}/warn-cluster.yaml#2: Pod default/ghost: bound to node 'n9', which no "
        "manifest defines; it runs nowhere but counts as bound",
        f"warning: {BAD}/warn-cluster.yaml#3: HyperNode rack: field spec.members[0]: tier 1 "
        "holds HyperNode 'spine' of higher tier 2; tiers grow towards the root",
        f"warning: {BAD}/device-negative.yaml#2: Device gpu-node-0: field spec.devices[0]."
        "resources[koordinator.sh/gpu-memory]: '-80Gi' is negative; 0 is used",
        f"warning: {BAD}/queue-cycle.yaml#1: Queue a: field spec.parent: the queues' parents "
        "form a cycle (a -> b -> a)",
        f"warning: {BAD}/queue-cycle.yaml#2: Queue b: field spec.parent: the queues' parents "
        "form a cycle (b -> a -> b)",
    ]


def test_a_file_of_unknown_kinds_and_conf_oddities_are_warned() -> None:
    result = _simulate(f"{BAD}/unknown-kinds.yaml", "conf/samples/quickstart.yaml",
                       "--conf", f"{BAD}/actions-twice.conf")
    assert result.returncode == 0, result.stderr
    warnings = _warnings(result)
    assert warnings[:2] == [
        f"warning: {BAD}/actions-twice.conf: actions: 'allocate' is listed 2 times; it runs "
        "each time, as in Volcano",
        f"warning: {BAD}/actions-twice.conf: tiers[0].plugins[1] (network-topology-aware): "
        "argument 'hypernode.binpack.normal-pod.fading' is above 1: higher tiers weigh more "
        "than lower ones (it is used as given, as in Volcano)",
    ]
    (unread,) = warnings[2:]
    assert unread.startswith(
        f"warning: {BAD}/unknown-kinds.yaml: none of its 2 object(s) is of a kind Lahar reads "
        "(has Deployment, Service; reads Node, Pod, PodGroup, Queue, PriorityClass, ")


def test_conf_given_as_the_deployed_configmap_is_read_from_its_data_key() -> None:
    result = _simulate("conf/samples/quickstart.yaml", "--conf", "conf/deploy/30-configmap.yaml")
    assert result.returncode == 0, result.stderr
    assert _warnings(result) == []
    check = subprocess.run(
        [sys.executable, "-m", "scheduler", "conf", "check", "conf/deploy/30-configmap.yaml"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert check.stdout.startswith(
        "conf/deploy/30-configmap.yaml (data[lahar-scheduler.conf]): ok (actions: enqueue, ")
    assert "gang" in check.stdout


def test_a_configmap_without_a_conf_key_is_refused_naming_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: b\n")
    result = _simulate("conf/samples/quickstart.yaml", "--conf", str(path))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: {path}: a ConfigMap, not a conf: its data has no single conf key (looked for "
        "lahar-scheduler.conf or volcano-scheduler.conf, or one key ending in .conf; has a)")


def test_log_warnings_of_simulate_take_the_one_format() -> None:
    """The HyperNode tree's warnings (the cache logs them as ``lahar run`` does, Volcano's
    hypernode cache: pkg/scheduler/api/hyper_node_info.go) come out as load warnings do."""
    result = _simulate(f"{BAD}/hypernode-missing-member.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[:2] == [
        f"warning: {BAD}/hypernode-missing-member.yaml#2: HyperNode rack: member HyperNode "
        "nothere does not exist; it adds no node until it is created",
        f"warning: {BAD}/hypernode-missing-member.yaml#4: HyperNode rack3: Node n1 is also in "
        "rack2 of tier 1; rack2 is taken as its tier-1 HyperNode",
    ]


def test_a_logged_object_warning_names_its_file() -> None:
    from scheduler.commands.warnlines import _line

    sources = {"Device gpu-0": "a.yaml#3", "PodGroup team/pg": "b.yaml#1"}
    assert _line({"event": "object ignored", "object": "Device gpu-0",
                  "error": "field spec.devices[0].minor: must be an integer",
                  "timestamp": "t"}, "warning", sources) == (
        "warning: a.yaml#3: Device gpu-0: ignored: field spec.devices[0].minor: must be an "
        "integer")
    assert _line({"event": "PodGroup spec.subGroupPolicy entries without matchLabelKeys "
                  "select no pod", "podgroup": "team/pg", "sub_groups": ["a"]}, "warning",
                 sources) == (
        "warning: b.yaml#1: PodGroup team/pg: PodGroup spec.subGroupPolicy entries without "
        "matchLabelKeys select no pod (sub_groups=['a'])")


WARNING_LINE = re.compile(r"^warning: [^\s#:]+#\d+: [A-Z][A-Za-z]+ (?:[a-z0-9.-]+/)?[^\s/:]+: \S")


@pytest.mark.parametrize("name", ["queue-cycle", "hypernode-missing-member", "hypernode-tangle",
                                  "device-negative", "warn-cluster", "hypernode-backtracking"])
def test_every_warning_line_names_file_document_and_object(name: str) -> None:
    """Every warning of a bad file, whether found at load or logged by the cache, the queue
    tree, the HyperNode tree (Volcano's pkg/scheduler/api/hyper_node_info.go) or a device
    family, reads ``warning: FILE#DOC: Kind ns/name: ...``."""
    result = _simulate("--conf", "conf/vgpu.conf", f"{BAD}/{name}.yaml")
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert lines, result.stderr
    assert [line for line in lines if not WARNING_LINE.match(line)] == []
    assert all(f"{BAD}/{name}.yaml#" in line for line in lines)
