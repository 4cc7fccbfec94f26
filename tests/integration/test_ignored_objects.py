"""``lahar run`` against the API double: every object the scheduler ignores is explained on the
pods it affects, and nothing else stops.

A PodGroup the scheduler cannot read (``minMember: -3``, ``minResources.cpu: -1``; the API
server's CRD schema lets both through) and a PodGroup deleted while its pods wait leave their
pods pending with a ``PodScheduled=False`` condition and a ``FailedScheduling`` event naming the
PodGroup and the field; a queue hierarchy with a cycle leaves the other queues scheduling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_helpers import RunningScheduler, make_node, make_pod, wait_until

from tests.apiserver import ApiServerDouble

PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
QUEUES = "scheduling.volcano.sh/v1beta1/queues"
FAST = ("--leader-elect=false", "--schedule-period=50ms")
HIERARCHY_CONF = Path(__file__).resolve().parents[2] / "conf" / "capacity-hierarchy.conf"


def podgroup(name: str, *, min_member: int = 1, queue: str = "default",
             **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"minMember": min_member, "queue": queue, **spec}}


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}


def pod(name: str, *, group: str) -> dict[str, Any]:
    manifest = make_pod(name, namespace="team", group=group)
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return manifest


def node_of(apiserver: ApiServerDouble, name: str) -> str:
    return str(((apiserver.get("v1/pods", f"team/{name}") or {}).get("spec") or {})
               .get("nodeName") or "")


def condition(apiserver: ApiServerDouble, name: str) -> dict[str, Any]:
    status = (apiserver.get("v1/pods", f"team/{name}") or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), {})


def events(apiserver: ApiServerDouble, *, kind: str, name: str) -> list[dict[str, Any]]:
    with apiserver.cond:
        stored = list(apiserver.objects["v1/events"].values())
    return [e for e in stored
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


def explained(apiserver: ApiServerDouble, name: str, *needles: str) -> bool:
    """The pod has PodScheduled=False and a FailedScheduling event, both containing
    every needle."""
    message = condition(apiserver, name).get("message", "")
    if condition(apiserver, name).get("status") != "False" or \
            not all(n in message for n in needles):
        return False
    return any(e["reason"] == "FailedScheduling" and all(n in e["message"] for n in needles)
               for e in events(apiserver, kind="Pod", name=name))


def test_pods_of_unreadable_and_deleted_podgroups_are_told_why(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1", cpu="4"))
    apiserver.create(PODGROUPS, podgroup("negative", min_member=-3))
    apiserver.create(PODGROUPS, podgroup("negative-cpu", minResources={"cpu": "-1"}))
    apiserver.create(PODGROUPS, podgroup("big", min_member=5))
    apiserver.create(PODGROUPS, podgroup("fine"))
    for name, group in (("neg-0", "negative"), ("negcpu-0", "negative-cpu"), ("big-0", "big"),
                        ("fine-0", "fine")):
        apiserver.create("v1/pods", pod(name, group=group))
    run = RunningScheduler("--master", apiserver.url, *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "fine-0") == "n1", timeout=8.0, message="fine bound")
    wait_until(lambda: explained(apiserver, "neg-0", "PodGroup team/negative",
                                 "spec.minMember", "-3"),
               timeout=5.0, message="pod of the PodGroup with minMember -3 told why")
    wait_until(lambda: explained(apiserver, "negcpu-0", "PodGroup team/negative-cpu",
                                 "spec.minResources"),
               timeout=5.0, message="pod of the PodGroup with a negative cpu told why")
    wait_until(lambda: "5 minAvailable" in condition(apiserver, "big-0").get("message", ""),
               timeout=5.0, message="gang condition of big-0")

    apiserver.delete(PODGROUPS, "team/big")
    wait_until(lambda: explained(apiserver, "big-0", "PodGroup team/big", "was deleted",
                                 "scheduling.k8s.io/group-name"),
               timeout=5.0, message="pod of the deleted PodGroup told why")
    assert node_of(apiserver, "neg-0") == node_of(apiserver, "big-0") == ""

    # Fixing the PodGroup brings its pod back.
    fixed = apiserver.get(PODGROUPS, "team/negative")
    assert fixed is not None
    fixed["spec"]["minMember"] = 1
    apiserver.update(PODGROUPS, fixed)
    wait_until(lambda: node_of(apiserver, "neg-0") == "n1", timeout=8.0,
               message="pod of the fixed PodGroup bound")
    assert run.thread.is_alive()
    assert run.stop() == 0


def test_a_queue_cycle_leaves_the_other_queues_scheduling(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1", cpu="4"))
    apiserver.create(QUEUES, queue("qx", parent="qy"))
    apiserver.create(QUEUES, queue("qy", parent="qx"))
    apiserver.create(PODGROUPS, podgroup("looped", queue="qx"))
    apiserver.create(PODGROUPS, podgroup("plain"))
    apiserver.create("v1/pods", pod("looped-0", group="looped"))
    apiserver.create("v1/pods", pod("plain-0", group="plain"))
    run = RunningScheduler("--master", apiserver.url, "--scheduler-conf", str(HIERARCHY_CONF),
                           *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "plain-0") == "n1", timeout=8.0,
               message="the default queue's pod bound")
    wait_until(lambda: explained(apiserver, "looped-0", "qx -> qy -> qx"), timeout=5.0,
               message="the pod of the cyclic queue told why")
    wait_until(lambda: bool(events(apiserver, kind="Queue", name="qy")), timeout=5.0,
               message="Warning event on the Queue")
    group = (apiserver.get(PODGROUPS, "team/looped") or {}).get("status") or {}
    assert group.get("phase") == "Pending"
    (unschedulable,) = [c for c in group.get("conditions") or []
                        if c["type"] == "Unschedulable"]
    assert "spec.parent forms a cycle (qx -> qy -> qx)" in unschedulable["message"]
    (warning,) = events(apiserver, kind="Queue", name="qx")
    assert warning["type"] == "Warning"
    assert warning["message"] == "Queue qx: spec.parent forms a cycle (qx -> qy -> qx)"
    assert run.stop() == 0
