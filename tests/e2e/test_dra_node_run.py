"""End to end, both halves of DRA as processes: ``lahar run`` allocates the claims of plain pods,
``lahar node-agent --dra --dra-mode shared --fake-gpus 4`` publishes the node's ResourceSlices
and prepares what was allocated, and the fake DRA kubelet calls it as kubelet does.

Runs on a server that keeps a pod's ``spec.resourceClaims`` (the suite's, or the private 1.28
control plane with the ``DynamicResourceAllocation`` gate of :func:`tests.e2e.dra.dra_cluster`,
skipped with the reason where neither can be had), with the DeviceClasses as shipped in
``conf/deploy/dra/10-deviceclasses.yaml``. Nothing here writes an allocation: the test only
plays what the control plane's controllers and kubelet do (a template's claim created for its
pod and deleted with it; prepare once a pod is bound, unprepare once it is gone).

Peers: kubelet's DRA manager (``pkg/kubelet/cm/dra/manager.go`` ``prepareResources`` calls the
driver for the claims of a pod bound to the node, ``unprepareResources`` once no pod on the
node uses a claim); kube-scheduler's DynamicResources plugin for the allocation
(``bindClaim``); HAMi's DRA driver (``Project-HAMi/k8s-dra-driver``,
``cmd/hami-kubelet-plugin``) for the shared GPU: a card allows multiple allocations, with
``memory`` and ``cores`` capacity whose request policy defaults to the whole card (so a share
names both), and its share's HAMi-core limits in the claim's CDI spec.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.resource import parse_quantity
from tests.devices.nodeagent.drakubelet import FakeDraKubelet
from tests.e2e.conftest import Case, open_own_case
from tests.e2e.dra import (
    GATES,
    NodeAgentProcess,
    allocated,
    claim_name_of,
    claim_pod,
    claim_template,
    create,
    delete_pod,
    dra_api_served,
    dra_cluster,
    get_claim,
    node_slices,
    one_device,
    reserved_for,
)
from tests.e2e.kube import ROOT, eventually

CLASSES = ROOT / "conf/deploy/dra/10-deviceclasses.yaml"
CARD_MEMORY = "16Gi"
MIB = 2**20


@dataclass
class Node:
    """One fake node with the agent and a fake DRA kubelet on it, and ``lahar run``."""

    case: Case
    name: str
    agent: NodeAgentProcess
    kubelet: FakeDraKubelet

    def devices(self) -> dict[str, dict[str, Any]]:
        """The devices of the node's ResourceSlices by name (once there are some)."""
        slices = eventually(lambda: node_slices(self.case.kube, self.name) or None,
                            timeout=60.0, what=f"node {self.name}'s ResourceSlices")
        return {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}

    def claim_of(self, pod: str) -> dict[str, Any]:
        return get_claim(self.case, claim_name_of(self.case, pod))

    def prepare(self, pod: str) -> tuple[dict[str, Any], Any]:
        """Kubelet's prepare of a bound pod's claim: (the claim, the plugin's answer)."""
        claim = self.claim_of(pod)
        meta = claim["metadata"]
        answers = self.kubelet.prepare((meta["namespace"], meta["name"], meta["uid"]))
        answer = answers[meta["uid"]]
        assert answer.error == "", (pod, answer.error, self.agent.log_tail())
        return claim, answer

    def gone(self, pod: str) -> str:
        """The pod is deleted (its template claim with it, as the garbage collector does) and
        kubelet unprepares the claim; the claim's UID."""
        meta = self.claim_of(pod)["metadata"]
        delete_pod(self.case, pod)
        answer = self.kubelet.unprepare((meta["namespace"], meta["name"], meta["uid"]))
        assert answer[meta["uid"]].error == ""
        return str(meta["uid"])


def _install_classes(case: Case) -> None:
    """The DeviceClasses of ``conf/deploy/dra`` (kept when the cluster has them already)."""
    for document in yaml.safe_load_all(CLASSES.read_text()):
        if not document:
            continue
        try:
            create(case, "deviceclasses", document, namespaced=False)
        except Exception as error:
            if getattr(error, "status", None) != 409:
                raise


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    workdir = tmp_path_factory.mktemp("lahar-e2e-dra-node-run")
    with dra_cluster(workdir) as settings, dra_api_served(settings.kube), \
            open_own_case(settings) as case:
        _install_classes(case)
        name = case.add_nodes(1, units=16)[0]
        agent = NodeAgentProcess(kubeconfig=settings.kubeconfig, node=name, args=(
            "--dra-mode", "shared", "--fake-gpus", "4", "--fake-gpu-memory", CARD_MEMORY,
            "--dra-delete-slices"))
        kubelet = FakeDraKubelet(agent.registry)
        try:
            case.start_scheduler(extra_args=GATES).wait_serving()
            kubelet.discover(timeout=60.0)
            yield Node(case=case, name=name, agent=agent, kubelet=kubelet)
        except BaseException:
            print(agent.log_tail())
            raise
        finally:
            kubelet.close()
            agent.stop()


def _env(entry: dict[str, Any]) -> dict[str, str]:
    return dict(e.split("=", 1) for e in entry["containerEdits"].get("env") or [])


def _bound(case: Case, pods: list[str], what: str) -> None:
    eventually(lambda: len(case.bound(pods)) == len(pods) or None, timeout=60.0, what=what)


def _clean_up(node: Node, pods: list[str]) -> None:
    for pod in pods:
        with contextlib.suppress(Exception):  # the test's own failure says what went wrong
            node.gone(pod)


def test_the_agents_resource_slices_appear(node: Node) -> None:
    devices = node.devices()
    assert sorted(devices) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    for device in devices.values():
        assert device["attributes"]["type"] == {"string": "gpu"}
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"]["memory"]["value"] == CARD_MEMORY
    slices = node_slices(node.case.kube, node.name)
    assert {s["spec"]["driver"] for s in slices} == {node.agent.driver}
    assert {s["spec"]["pool"]["name"] for s in slices} == {node.name}


def test_a_gangs_claims_are_allocated_by_lahar_run_and_prepared(node: Node) -> None:
    """A PodGroup of minMember 3, each pod with a whole GPU from a template: ``lahar run``
    allocates the three claims (distinct cards, each reserved for its pod, as ``bindClaim``
    leaves them) and the agent prepares each: one CDI device ``<claim UID>-<device>`` with the
    card's device node and ``NVIDIA_VISIBLE_DEVICES`` set to its UUID, answered by CDI id. On
    a card published for sharing, a request that names no capacity consumes the request
    policy's defaults, the whole card, so HAMi-core's limits are the card's."""
    case = node.case
    devices = node.devices()
    claim_template(case, "whole", one_device("gpu.lahar.dev"))
    case.kube.create_podgroup(case.namespace, "train", min_member=3)
    pods = [f"train-{i}" for i in range(3)]
    uids = {p: claim_pod(case, p, group="train", template="whole")["metadata"]["uid"]
            for p in pods}
    _bound(case, pods, "the gang bound")
    held = []
    try:
        for pod in pods:
            claim, answer = node.prepare(pod)
            [(pool, device)] = allocated(claim)
            assert pool == node.name and reserved_for(claim) == [uids[pod]]
            held.append(device)
            uid = claim["metadata"]["uid"]
            [prepared] = answer.devices
            assert (prepared.pool_name, prepared.device_name) == (pool, device)
            assert list(prepared.cdi_device_ids) == [
                f"k8s.{node.agent.driver}/claim={uid}-{device}"]
            spec = node.agent.cdi_spec(uid)
            assert spec["kind"] == f"k8s.{node.agent.driver}/claim"
            [entry] = spec["devices"]
            assert entry["name"] == f"{uid}-{device}"
            attributes = devices[device]["attributes"]
            env = _env(entry)
            assert env["NVIDIA_VISIBLE_DEVICES"] == attributes["uuid"]["string"]
            # a shared-mode card given whole: the request policy's defaults, all of it
            assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{parse_quantity(CARD_MEMORY) // MIB}m"
            assert env["CUDA_DEVICE_SM_LIMIT"] == "100"
            assert [n["path"] for n in entry["containerEdits"]["deviceNodes"]] == [
                f"/dev/nvidia{attributes['minor']['int']}"]
            assert uid in node.agent.checkpoint()
        assert len(set(held)) == 3
    finally:
        _clean_up(node, pods)


def test_two_shared_gpu_pods_share_one_card_within_its_memory(node: Node) -> None:
    """Two pods whose claims ask the shared class for 6Gi and 10Gi of a card's memory, with 60
    cores and with none (HAMi's request policy gives a request that names no cores all 100 of
    them; 0 leaves the share unthrottled): both land on one card, and the HAMi-core limits of
    their CDI specs are their shares, which add up to no more than the card's memory."""
    case = node.case
    devices = node.devices()
    shares = {"infer-a": ("6Gi", "60"), "infer-b": ("10Gi", "0")}
    for pod, (memory, cores) in shares.items():
        spec = one_device("shared-gpu.lahar.dev", memory)
        spec["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["cores"] = cores
        claim_template(case, pod, spec)
        case.kube.create_podgroup(case.namespace, pod, min_member=1)
        claim_pod(case, pod, group=pod, template=pod)
    pods = list(shares)
    _bound(case, pods, "the shared pair bound")
    try:
        cards, memory_limits = set(), []
        for pod in pods:
            claim, _ = node.prepare(pod)
            [(_, device)] = allocated(claim)
            cards.add(device)
            [entry] = node.agent.cdi_spec(claim["metadata"]["uid"])["devices"]
            env = _env(entry)
            memory, cores = shares[pod]
            assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{parse_quantity(memory) // MIB}m"
            assert env["CUDA_DEVICE_SM_LIMIT"] == cores
            memory_limits.append(int(env["CUDA_DEVICE_MEMORY_LIMIT_0"].rstrip("m")))
        [card] = cards
        total = parse_quantity(devices[card]["capacity"]["memory"]["value"]) // MIB
        assert sum(memory_limits) <= total, (memory_limits, total)
    finally:
        _clean_up(node, pods)


def test_a_deleted_pods_claim_is_unprepared_and_its_card_freed(node: Node) -> None:
    """Four one-GPU pods take the four cards and a fifth waits; one of the four is deleted:
    kubelet unprepares its claim (the CDI spec and the checkpoint entry go, the others stay),
    and the fifth gets the freed card and is prepared on it."""
    case = node.case
    claim_template(case, "one", one_device("gpu.lahar.dev"))
    first = [f"solo-{i}" for i in range(4)]
    for pod in first:
        case.kube.create_podgroup(case.namespace, pod, min_member=1)
        claim_pod(case, pod, group=pod, template="one")
    _bound(case, first, "four pods on the four cards")
    case.kube.create_podgroup(case.namespace, "late", min_member=1)
    claim_pod(case, "late", group="late", template="one")
    pods = [*first, "late"]
    try:
        uids = {}
        for pod in first:
            claim, _ = node.prepare(pod)
            uids[pod] = claim["metadata"]["uid"]
        eventually(lambda: case.kube.events(case.namespace, name="late",
                                            reason="FailedScheduling") or None,
                   timeout=60.0, what="the fifth pod waiting for a card")
        assert not case.bound(["late"])
        freed = allocated(node.claim_of("solo-0"))
        assert node.gone("solo-0") == uids["solo-0"]
        pods.remove("solo-0")
        assert not Path(node.agent.cdi_path(uids["solo-0"])).exists()
        prepared = node.agent.checkpoint()
        assert uids["solo-0"] not in prepared
        assert all(uids[pod] in prepared and Path(node.agent.cdi_path(uids[pod])).exists()
                   for pod in first[1:])
        _bound(case, ["late"], "the fifth pod on the freed card")
        claim, answer = node.prepare("late")
        assert allocated(claim) == freed
        assert [d.device_name for d in answer.devices] == [freed[0][1]]
    finally:
        _clean_up(node, pods)
