"""``lahar inspect gpushare`` on hand-written clusters of both families, and on simulate output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main
from scheduler.commands.inspect import _list, inspect_gpus, render_table, report_json
from tests.builders import make_node

ROOT = Path(__file__).resolve().parents[2]


def pod(name: str, *, node: str | None = "gpu-1", phase: str = "Running",
        annotations: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        init_limits: dict[str, str] | None = None, namespace: str = "ml") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"limits": limits or {}}}]}
    if node:
        spec["nodeName"] = node
    if init_limits:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": init_limits}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": dict(annotations or {})},
            "spec": spec, "status": {"phase": phase}}


def share_node(name: str = "gpu-1", *, memory: str = "32000", number: str = "2",
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return make_node(name, annotations=annotations,
                     extra={"volcano.sh/gpu-memory": memory, "volcano.sh/gpu-number": number})


def share_pod(name: str, index: str, memory: str | None = "4000", **kw: Any) -> dict[str, Any]:
    limits = {"volcano.sh/gpu-memory": memory} if memory else {"volcano.sh/gpu-number": "2"}
    return pod(name, annotations={"volcano.sh/gpu-index": index,
                                  "volcano.sh/predicate-time": "1767225600000000000"},
               limits=limits, **kw)


VOLCANO_REGISTER = ("GPU-0aa1,10,32768,NVIDIA-Tesla V100,true,hami-core:"
                    "GPU-1bb2,4,16384,NVIDIA-Tesla T4,true,hami-core:")
HAMI_REGISTER = json.dumps([
    {"id": "GPU-h0", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA A10",
     "mode": "hami-core", "health": True},
    {"id": "GPU-h1", "index": 1, "count": 10, "devmem": 24576, "devcore": 100,
     "type": "NVIDIA A10", "mode": "hami-core", "health": True},
])


def vgpu_node(name: str, register: str, *, hami: bool = False) -> dict[str, Any]:
    key = "hami.io/node-nvidia-register" if hami else "volcano.sh/node-vgpu-register"
    return make_node(name, annotations={key: register})


def volcano_pod(name: str, devices: str, *, node: str = "vg-1", **kw: Any) -> dict[str, Any]:
    return pod(name, node=node, annotations={
        "volcano.sh/vgpu-node": node, "volcano.sh/vgpu-ids-new": devices,
        "volcano.sh/devices-to-allocate": devices, "volcano.sh/bind-phase": "success"}, **kw)


def hami_pod(name: str, devices: str, *, node: str = "hm-1") -> dict[str, Any]:
    return pod(name, node=node, annotations={
        "hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": devices,
        "hami.io/vgpu-devices-to-allocate": ";", "hami.io/bind-phase": "success"})


def cards(objects: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(c.node, c.family, c.index, c.memory_used, c.memory_total,
             [(s.pod, s.memory) for s in c.pods]) for c in inspect_gpus(objects).cards]


# -- GPU share -------------------------------------------------------------------------------
def test_gpushare_cards_memory_and_pods() -> None:
    objects = [
        share_node(annotations={"volcano.sh/gpu-unhealthy-ids": "1"}),
        share_pod("a", "0", "4000"),
        share_pod("b", "0", "6000"),
        share_pod("whole", "0,1", None),
        share_pod("finished", "1", "9000", phase="Succeeded"),
        share_pod("init-heavy", "1", None, init_limits={"volcano.sh/gpu-memory": "3000"}),
        share_pod("unbound", "1", "9000", node=None),
    ]
    report = inspect_gpus(objects)
    assert cards(objects) == [
        ("gpu-1", "gpushare", 0, 26000, 16000,
         [("ml/a", 4000), ("ml/b", 6000), ("ml/whole", 16000)]),
        ("gpu-1", "gpushare", 1, 19000, 16000, [("ml/whole", 16000), ("ml/init-heavy", 3000)]),
    ]
    assert [c.healthy for c in report.cards] == [True, False]
    assert report.warnings == []


def test_nodes_without_gpus_are_left_out() -> None:
    report = inspect_gpus([make_node("cpu-only"), pod("p", node="cpu-only")])
    assert report.cards == [] and report.warnings == []
    assert render_table(report) == "No GPU share or vGPU nodes found.\n"


# -- vGPU --------------------------------------------------------------------------------------
def test_volcano_vgpu_cards() -> None:
    objects = [
        vgpu_node("vg-1", VOLCANO_REGISTER),
        volcano_pod("train", "GPU-0aa1,NVIDIA,8000,30:GPU-1bb2,NVIDIA,4000,0:;"
                             "GPU-0aa1,NVIDIA,2000,10:"),
        volcano_pod("infer", "GPU-0aa1,NVIDIA,1024,0:"),
    ]
    report = inspect_gpus(objects)
    assert cards(objects) == [
        ("vg-1", "volcano", 0, 11024, 32768,
         [("ml/train", 8000), ("ml/train", 2000), ("ml/infer", 1024)]),
        ("vg-1", "volcano", 1, 4000, 16384, [("ml/train", 4000)]),
    ]
    first = report.cards[0]
    assert (first.uuid, first.split, first.cores_used, first.type) == (
        "GPU-0aa1", 10, 40, "NVIDIA-Tesla V100")


def test_hami_vgpu_cards_read_the_durable_annotation() -> None:
    objects = [vgpu_node("hm-1", HAMI_REGISTER, hami=True),
               hami_pod("p", "GPU-h1,NVIDIA,3000,20:;GPU-h1,NVIDIA,5000,0:;")]
    assert cards(objects) == [
        ("hm-1", "hami", 0, 0, 24576, []),
        ("hm-1", "hami", 1, 8000, 24576, [("ml/p", 3000), ("ml/p", 5000)]),
    ]


def test_both_families_and_the_cluster_total() -> None:
    objects = [share_node(), share_pod("a", "1", "1000"), vgpu_node("vg-1", VOLCANO_REGISTER),
               volcano_pod("v", "GPU-1bb2,NVIDIA,2000,0:")]
    report = inspect_gpus(objects)
    assert (report.memory_used, report.memory_total) == (3000, 32000 + 32768 + 16384)
    table = render_table(report)
    assert "Allocated/Total GPU memory in the cluster: 3000/81152 (3%)" in table
    assert "ml/v(2000)" in table and "1/4" in table


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("objects", "fragment"),
    [
        pytest.param([vgpu_node("vg-1", "GPU-a,ten,1,T4,true,hami-core:")],
                     "node vg-1: malformed volcano.sh/node-vgpu-register", id="bad-register"),
        # Volcano's decodeNodeDevices (vgpu/utils.go:63-67) reads no card of a five-field entry
        pytest.param([vgpu_node("vg-1", "GPU-a,10,1000,T4,true:")],
                     "node vg-1: malformed volcano.sh/node-vgpu-register (device entry 0 "
                     "'GPU-a,10,1000,T4,true' has 5 comma-separated fields, needs 6",
                     id="five-field-register"),
        pytest.param([vgpu_node("hm-1", "[{", hami=True)],
                     "node hm-1: malformed hami.io/node-nvidia-register", id="bad-hami-json"),
        pytest.param([vgpu_node("vg-1", VOLCANO_REGISTER), volcano_pod("p", "GPU-0aa1,NV:")],
                     "pod ml/p on node vg-1: unreadable vGPU annotation", id="bad-devices"),
        pytest.param([vgpu_node("vg-1", VOLCANO_REGISTER), volcano_pod("p", "GPU-zz,NVIDIA,1,0:")],
                     "pod ml/p on node vg-1 holds GPU GPU-zz", id="unknown-card"),
        pytest.param([vgpu_node("vg-1", "GPU-a,10,1000,T4,true,hami-core:"
                                            "GPU-a,10,1000,T4,true,hami-core:")],
                     "node vg-1 registers GPU GPU-a more than once", id="duplicate-uuid"),
        pytest.param([share_node(), share_pod("p", "zero")],
                     "pod ml/p on node gpu-1: unreadable volcano.sh/gpu-index", id="bad-index"),
        pytest.param([share_node(), share_pod("p", "7")],
                     "pod ml/p on node gpu-1 holds GPU index 7, but the node has 2", id="gone"),
        pytest.param([share_node(), share_pod("p", "0", "lots")],
                     "pod ml/p limit volcano.sh/gpu-memory", id="bad-limit"),
        pytest.param([share_node(), share_pod("p", "0", "-5")],
                     "pod ml/p limit volcano.sh/gpu-memory", id="negative-limit"),
        pytest.param([share_node(number="two")], "node gpu-1 volcano.sh/gpu-number",
                     id="bad-capacity"),
        pytest.param([share_node(annotations={"volcano.sh/gpu-unhealthy-ids": "x"})],
                     "node gpu-1: unreadable volcano.sh/gpu-unhealthy-ids", id="bad-unhealthy"),
    ],
)
def test_malformed_input_is_a_warning_naming_the_object(objects: list[dict[str, Any]],
                                                        fragment: str) -> None:
    report = inspect_gpus(objects)
    assert any(fragment in warning for warning in report.warnings), report.warnings
    render_table(report)
    report_json(report)


def test_objects_that_are_not_maps_are_ignored() -> None:
    assert inspect_gpus([None, "text", {"kind": "Pod"}]).cards == []  # type: ignore[list-item]


# -- command line ------------------------------------------------------------------------------
def write(tmp_path: Path, objects: list[dict[str, Any]], name: str = "cluster.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def test_cli_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [share_node(), share_pod("a", "0", "4000")])
    assert main(["inspect", "gpushare", path]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["NODE", "FAMILY", "GPU", "UUID", "MEMORY(used/total)",
                                           "SHARES", "CORES", "PODS"]
    assert "4000/16000 (25%)" in out and "ml/a(4000)" in out


def test_cli_json_is_stable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [vgpu_node("vg-1", VOLCANO_REGISTER),
                            volcano_pod("p", "GPU-1bb2,NVIDIA,2000,25:"),
                            vgpu_node("vg-0", "broken")])
    assert main(["inspect", "gpushare", path, "-o", "json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert list(data) == ["nodes", "total", "warnings"]
    assert [n["name"] for n in data["nodes"]] == ["vg-1"]
    assert data["nodes"][0]["cards"][1] == {
        "family": "volcano", "index": 1, "uuid": "GPU-1bb2", "type": "NVIDIA-Tesla T4",
        "healthy": True, "memoryUsed": 2000, "memoryTotal": 16384, "shares": 1,
        "splitCount": 4, "coresUsed": 25,
        "pods": [{"pod": "ml/p", "memory": 2000, "cores": 25}],
    }
    assert data["total"] == {"memoryUsed": 2000, "memoryTotal": 32768 + 16384}
    assert "node vg-0" in data["warnings"][0]
    assert "warning: node vg-0" in captured.err


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        pytest.param(["inspect", "gpushare"], 2, "FILEs or --kubeconfig", id="nothing"),
        pytest.param(["inspect", "gpushare", "/no/such/file.yaml"], 2, "cannot read",
                     id="missing-file"),
    ],
)
def test_cli_input_errors(argv: list[str], code: int, fragment: str,
                          capsys: pytest.CaptureFixture[str], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    # no kubeconfig anywhere: without FILEs there is nothing to read
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(argv) == code
    assert fragment in capsys.readouterr().err


def test_cli_invalid_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: [unclosed\n")
    assert main(["inspect", "gpushare", str(path)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_cluster_listing_follows_continue_tokens() -> None:
    class Pages:
        def __init__(self) -> None:
            self.queries: list[dict[str, Any]] = []

        def request_json(self, method: str, path: str, *, query: dict[str, Any]) -> dict[str, Any]:
            self.queries.append(dict(query))
            if "continue" not in query:
                return {"items": [{"metadata": {"name": "n1"}}], "metadata": {"continue": "t1"}}
            return {"items": [{"metadata": {"name": "n2"}}], "metadata": {}}

    client = Pages()
    items = _list(client, "/api/v1/nodes", "Node")
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [("Node", "n1"), ("Node", "n2")]
    assert client.queries == [{"limit": 500}, {"limit": 500, "continue": "t1"}]


# -- simulate, then inspect ----------------------------------------------------------------------
def _deviceshare_available() -> bool:
    from plugins import PLUGINS

    return "deviceshare" in PLUGINS and (ROOT / "conf/samples/gpushare.yaml").exists()


@pytest.mark.skipif(not _deviceshare_available(), reason="deviceshare plugin not available")
@pytest.mark.parametrize("family", ["gpushare", "vgpu"])
def test_simulate_then_inspect(family: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    conf, sample = ROOT / f"conf/{family}.conf", ROOT / f"conf/samples/{family}.yaml"
    assert main(["simulate", "--conf", str(conf), str(sample), "-o", "yaml"]) == 0
    out = tmp_path / "out.yaml"
    out.write_text(capsys.readouterr().out)
    assert main(["inspect", "gpushare", str(out), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    simulated = yaml.safe_load(out.read_text())["items"]
    bound = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in simulated
             if p["kind"] == "Pod" and (p.get("spec") or {}).get("nodeName")}
    shown = {share["pod"] for node in data["nodes"] for card in node["cards"]
             for share in card["pods"]}
    assert shown and shown <= bound
    for node in data["nodes"]:
        for card in node["cards"]:
            assert card["memoryUsed"] <= card["memoryTotal"], (node["name"], card)
            if card["splitCount"] is not None:
                assert card["shares"] <= card["splitCount"]


def test_a_bad_device_entry_is_left_out_and_the_others_count() -> None:
    """The scheduler reads a pod's device list entry by entry (devices/usage.py vgpu_record,
    as Volcano's decodeContainerDevices in pkg/scheduler/api/devices/nvidia/vgpu/utils.go):
    inspect counts the readable entry too, and names the one left out (it dropped the pod)."""
    objects = [vgpu_node("vg-1", VOLCANO_REGISTER),
               volcano_pod("p", "GPU-1bb2,NVIDIA,2000,0:GPU-0aa1,NV:")]
    report = inspect_gpus(objects)
    held = {(c.uuid, p.pod, p.memory) for c in report.cards for p in c.pods}
    assert held == {("GPU-1bb2", "ml/p", 2000)}
    assert any("ml/p" in w and "entry left out" in w and "GPU-0aa1,NV" in w
               for w in report.warnings), report.warnings
