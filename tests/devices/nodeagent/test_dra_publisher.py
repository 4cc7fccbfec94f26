"""The node agent's ResourceSlice publisher against the API double.

What a DRA kubelet plugin's slice controller does (k8s.io/dynamic-resource-allocation
``resourceslice/resourceslicecontroller.go``: ``syncPool`` compares the desired slices with
the ones listed by node and driver, bumps the pool generation on a change, updates, creates,
then deletes obsolete slices; ``Stop`` leaves slices unless asked to delete them; the Node is
the owner of node-local slices), and NVIDIA's k8s-dra-driver-gpu on an unhealthy GPU
(``cmd/gpu-kubelet-plugin/device_health.go``: the device is taken out of the published pool).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cluster.kube.client import ApiError, KubeClient
from scheduler.devices.node.dra.publisher import SlicePublisher
from scheduler.devices.node.dra.slices import DEFAULT_DRIVER, unhealthy_taint
from scheduler.devices.node.inventory import Inventory, fake_gpus
from scheduler.devices.node.modes import FakeMig, mig_by_card, parse_fake_mig
from tests.apiserver import DEFAULT_COLLECTIONS, ApiServerDouble
from tests.apiserver.store import DRA_COLLECTIONS
from tests.builders import make_node

GIB = 2**30
NODE = "dra-pub-1"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
RBAC = Path(__file__).resolve().parents[3] / "conf" / "deploy" / "dra" / "20-rbac.yaml"


@pytest.fixture
def served() -> Iterator[tuple[ApiServerDouble, KubeClient]]:
    with ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, *DRA_COLLECTIONS)) as double:
        kube = KubeClient.for_host(double.url)
        kube.request_json("POST", "/api/v1/nodes", body=make_node(NODE))
        yield double, kube
        kube.close()


def _inventory(gpus: int = 2) -> Inventory:
    return Inventory(gpus=fake_gpus(NODE, gpus, 16 * GIB), driver="fake", fake=True)


def _slices(kube: KubeClient) -> list[dict[str, Any]]:
    items = kube.request_json("GET", SLICES).get("items") or []
    return sorted(items, key=lambda s: s["metadata"]["name"])


def _names(kube: KubeClient) -> list[str]:
    return [d["name"] for s in _slices(kube) for d in s["spec"].get("devices") or []]


def _writes(double: ApiServerDouble) -> list[str]:
    return [r.method for r in double.requests if r.path.startswith(SLICES)
            and r.method in ("POST", "PUT", "DELETE")]


def test_publish_once_then_only_on_change(served: tuple[ApiServerDouble, KubeClient]) -> None:
    double, kube = served
    node_uid = kube.request_json("GET", f"/api/v1/nodes/{NODE}")["metadata"]["uid"]
    publisher = SlicePublisher(kube, node_name=NODE)
    assert publisher.sync(_inventory()) is True
    (one,) = _slices(kube)
    assert one["metadata"]["name"] == f"{NODE}-{DEFAULT_DRIVER}-0"
    assert one["metadata"]["ownerReferences"][0]["uid"] == node_uid
    assert one["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert _names(kube) == ["gpu-0", "gpu-1"]
    assert _writes(double) == ["POST"]

    assert publisher.sync(_inventory()) is False  # same devices: nothing written
    again = SlicePublisher(kube, node_name=NODE)  # a restarted agent finds its slices
    assert again.sync(_inventory()) is False and again.generation == 1
    assert _writes(double) == ["POST"]


def test_an_unhealthy_card_leaves_the_pool_at_a_new_generation(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    _, kube = served
    publisher = SlicePublisher(kube, node_name=NODE)
    inv = _inventory()
    publisher.sync(inv)
    sick = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False)))
    assert publisher.sync(sick) is True
    assert _names(kube) == ["gpu-0"]
    assert _slices(kube)[0]["spec"]["pool"]["generation"] == 2
    assert publisher.sync(inv) is True and _names(kube) == ["gpu-0", "gpu-1"]
    assert publisher.mark_unhealthy(["gpu-0"]) is True
    assert _names(kube) == ["gpu-1"] and publisher.generation == 4
    assert publisher.mark_unhealthy(["gpu-0"]) is False  # no change, no write
    assert publisher.mark_healthy(["gpu-0"]) is True and _names(kube) == ["gpu-0", "gpu-1"]


def test_with_device_taints_an_unhealthy_card_is_tainted(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    _, kube = served
    publisher = SlicePublisher(kube, node_name=NODE, device_taints=True)
    inv = _inventory()
    publisher.sync(replace(inv, gpus=(replace(inv.gpus[0], healthy=False), inv.gpus[1])))
    devices = _slices(kube)[0]["spec"]["devices"]
    assert devices[0]["taints"] == [unhealthy_taint(DEFAULT_DRIVER)]
    assert "taints" not in devices[1]


def test_a_smaller_pool_deletes_the_slices_it_no_longer_needs(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    double, kube = served
    publisher = SlicePublisher(kube, node_name=NODE)
    inv = _inventory(9)
    mig = mig_by_card(FakeMig(parse_fake_mig("1g.10gb:7")), inv)
    publisher.sync(inv, mig)
    assert len(_slices(kube)) == 4  # 2 of counter sets, 2 of devices
    publisher.sync(_inventory(2))
    (left,) = _slices(kube)
    assert left["spec"]["pool"] == {"name": NODE, "generation": 2, "resourceSliceCount": 1}
    assert "sharedCounters" not in left["spec"]
    assert _writes(double).count("DELETE") == 3


def test_other_nodes_and_drivers_are_left_alone_and_delete_all_removes_own(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    _, kube = served
    kube.request_json("POST", "/api/v1/nodes", body=make_node("dra-pub-2"))
    mine = SlicePublisher(kube, node_name=NODE)
    other_node = SlicePublisher(kube, node_name="dra-pub-2")
    other_driver = SlicePublisher(kube, node_name=NODE, driver="other.example.com")
    for publisher in (mine, other_node, other_driver):
        publisher.sync(_inventory())
    assert len(_slices(kube)) == 3
    assert mine.sync(_inventory(1)) is True
    assert len(_slices(kube)) == 3
    assert mine.delete_all() == 1
    assert sorted(s["metadata"]["name"] for s in _slices(kube)) == [
        "dra-pub-1-other.example.com-0", f"dra-pub-2-{DEFAULT_DRIVER}-0"]
    assert mine.delete_all() == 0


def test_a_conflict_retries_and_a_missing_node_leaves_slices_unowned(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    double, kube = served
    publisher = SlicePublisher(kube, node_name=NODE)
    publisher.sync(_inventory())
    double.fail("PUT", SLICES, 409)
    assert publisher.sync(_inventory(1)) is True
    assert _names(kube) == ["gpu-0"] and publisher.generation == 2
    double.fail("PUT", SLICES, 409, times=3)
    with pytest.raises(ApiError):
        publisher.sync(_inventory(2))
    ghost = SlicePublisher(kube, node_name="no-such-node")
    ghost.sync(_inventory())
    (slice_,) = [s for s in _slices(kube) if s["spec"]["nodeName"] == "no-such-node"]
    assert "ownerReferences" not in slice_["metadata"]


def test_bad_arguments_are_refused(served: tuple[ApiServerDouble, KubeClient]) -> None:
    _, kube = served
    with pytest.raises(ValueError, match="DRA mode 'mig'"):
        SlicePublisher(kube, node_name=NODE, mode="mig")
    with pytest.raises(ValueError, match="node_name"):
        SlicePublisher(kube, node_name="")


def test_rbac_grants_what_the_publisher_uses() -> None:
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    (slices,) = [r for r in role["rules"] if r["resources"] == ["resourceslices"]]
    assert slices["apiGroups"] == ["resource.k8s.io"]
    assert {"list", "create", "update", "delete"} <= set(slices["verbs"])
    binding = next(d for d in yaml.safe_load_all(RBAC.read_text())
                   if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == "lahar-node-agent"


def test_a_server_without_the_field_selectors_gets_a_full_list_filtered_here(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    """resource.k8s.io served by CRDs (the e2e stand-ins on a 1.28 server) answers 400 to a
    field selector on spec.nodeName; the built-in API has it (``ResourceSliceSelectorNodeName``
    in k8s.io/api resource/v1/types.go)."""
    double, kube = served
    SlicePublisher(kube, node_name="dra-pub-2").sync(_inventory(1))
    publisher = SlicePublisher(kube, node_name=NODE)
    double.fail("GET", SLICES, 400)
    assert publisher.sync(_inventory()) is True
    assert [s["spec"]["nodeName"] for s in publisher.list_own()] == [NODE]
    assert publisher.sync(_inventory()) is False
    lists = [r.query for r in double.requests if r.method == "GET" and r.path == SLICES]
    assert "fieldSelector" in lists[-4] and all("fieldSelector" not in q for q in lists[-3:])


def test_the_dra_daemonset_mounts_what_its_flags_name_and_uses_the_bound_account() -> None:
    """conf/deploy/dra/30-daemonset.yaml: every directory flag is a host mount, and the pod
    runs as the account 20-rbac.yaml binds. The args are parsed by ``lahar node-agent``."""
    from scheduler.commands.cli import build_parser

    daemonset = yaml.safe_load(RBAC.with_name("30-daemonset.yaml").read_text())
    pod = daemonset["spec"]["template"]["spec"]
    binding = next(d for d in yaml.safe_load_all(RBAC.read_text())
                   if d["kind"] == "ClusterRoleBinding")
    assert pod["serviceAccountName"] == binding["subjects"][0]["name"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:2] == ["node-agent", "--dra"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    dirs = {a.split("=", 1)[1] for a in args if a.startswith(("--kubelet-plugins", "--cdi-root"))}
    assert dirs == {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins",
                    "/var/run/cdi"} and dirs <= mounts
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert {host[m["name"]] for m in container["volumeMounts"]
            if m["mountPath"] in dirs} == dirs
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:  # pragma: no cover - the CLI without the DRA driver's flags
        pytest.skip("this lahar node-agent has no --dra flags")
    assert parsed.dra and parsed.driver_name == DEFAULT_DRIVER


def test_a_taint_stamped_by_the_server_is_not_a_change(
        served: tuple[ApiServerDouble, KubeClient]) -> None:
    """The API server sets ``timeAdded`` on a device taint that has none (DeviceTaint in
    k8s.io/api resource/v1/types.go); the next sync must not see that as a change."""
    _, kube = served
    publisher = SlicePublisher(kube, node_name=NODE, device_taints=True)
    inv = _inventory()
    sick = replace(inv, gpus=(replace(inv.gpus[0], healthy=False), inv.gpus[1]))
    publisher.sync(sick)
    (stored,) = _slices(kube)
    stored["spec"]["devices"][0]["taints"][0]["timeAdded"] = "2026-11-28T23:00:00Z"
    kube.request_json("PUT", f"{SLICES}/{stored['metadata']['name']}", body=stored)
    assert publisher.sync(sick) is False and publisher.generation == 1
