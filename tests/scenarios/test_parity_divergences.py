"""Places where Lahar differed from Volcano, each reproduced by the command users run —
``lahar simulate FILE --conf CONF --max-cycles 1`` — and checked against the Go source it now
matches (cited per test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.api.task import task_from_pod
from scheduler.commands.cli import main
from scheduler.conf import PLUGIN_FLAGS
from tests.builders import make_node, make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.preemption_helpers import evicted
from tests.scenarios.test_capacity_proportion import PRIORITIES, best_effort_victim_case

Obj = dict[str, Any]


class Result:
    """The objects ``lahar simulate -o json`` printed after one cycle."""

    def __init__(self, items: list[Obj], err: str) -> None:
        self.items = items
        self.err = err

    def objects(self, kind: str) -> dict[str, Obj]:
        return {o["metadata"]["name"]: o for o in self.items if o["kind"] == kind}

    def node_of(self, pod: str) -> str | None:
        return self.objects("Pod")[pod]["spec"].get("nodeName")

    def evicted(self) -> list[str]:
        return sorted(e["involvedObject"]["name"] for e in self.objects("Event").values()
                      if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "Pod")

    def condition(self, group: str, kind: str = "Unschedulable") -> Obj | None:
        status = self.objects("PodGroup")[group].get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def simulate_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], objs: list[Obj],
                 conf: str) -> Result:
    cluster, conf_path = tmp_path / "cluster.yaml", tmp_path / "scheduler.conf"
    cluster.write_text("\n---\n".join(json.dumps(obj) for obj in objs))
    conf_path.write_text(conf)
    capsys.readouterr()
    code = main(["simulate", str(cluster), "--conf", str(conf_path), "--max-cycles", "1",
                 "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return Result(json.loads(out)["items"], err)


# -- 1. the pods dimension ---------------------------------------------------------------

NO_PREDICATES = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: proportion}, {name: nodeorder}]
"""


def test_a_full_node_takes_no_pod_without_predicates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every task asks for ``pods: 1`` and a node's idle holds its free pod slots; allocate's
    own resource check (``actions/allocate/allocate.go:985-993``, ``predicate``:
    ``InitResreq.LessEqualWithResourcesName(node.FutureIdle())``) refuses a node with no slot
    left even when the ``predicates`` plugin is not in the conf."""
    objs = [make_node("full", cpu="8", pods="1"), make_node("free", cpu="1", pods="5"),
            make_podgroup("old"), make_pod("old-0", group="old", node="full"),
            make_podgroup("new"), make_pod("new-0", cpu="1", group="new")]
    result = simulate_cli(tmp_path, capsys, objs, NO_PREDICATES)
    assert result.node_of("new-0") == "free"


def test_no_slot_anywhere_says_insufficient_pods(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``WrapInsufficientResourceReason`` names the short dimension: ``Insufficient pods``."""
    objs = [make_node("full", cpu="8", pods="1"),
            make_podgroup("old"), make_pod("old-0", group="old", node="full"),
            make_podgroup("new"), make_pod("new-0", cpu="1", group="new")]
    result = simulate_cli(tmp_path, capsys, objs, NO_PREDICATES)
    assert result.node_of("new-0") is None
    pod = result.objects("Pod")["new-0"]
    message = next(c["message"] for c in pod["status"]["conditions"]
                   if c["type"] == "PodScheduled")
    assert "1 Insufficient pods" in message


_NORMAL_PREEMPT_FLAGS = {
    "conformance": ("enablePreemptable",),
    "gang": ("enablePreemptable", "enableJobPipelined", "enableJobStarving"),
    "priority": ("enableTaskOrder", "enableJobOrder", "enablePreemptable",
                 "enableJobPipelined", "enableJobStarving"),
    "proportion": ("enabledOverused", "enabledAllocatable", "enableQueueOrder"),
}


@pytest.mark.parametrize("preemptor_cpu", ["3", None], ids=["requests", "best-effort"])
def test_normal_preempt_frees_the_only_pod_slot(preemptor_cpu: str | None) -> None:
    """``TestPreempt``'s #3335 cases (``actions/preempt/preempt_test.go:256-296``, tiers
    430-455 without ``predicates``): on a node with one pod slot, held by a best-effort pod,
    the preemptor evicts it whether it asks for 3 cpu or for nothing."""

    def plugin(name: str) -> str:
        flags = ", ".join(f"{flag}: {str(flag in _NORMAL_PREEMPT_FLAGS[name]).lower()}"
                          for flag in PLUGIN_FLAGS if flag != "enableHierarchy")
        return f"  - {{name: {name}, {flags}}}\n"

    conf = ('actions: "preempt"\ntiers:\n- plugins:\n'
            + "".join(plugin(name) for name in _NORMAL_PREEMPT_FLAGS))
    objs, expected = best_effort_victim_case(preemptor_cpu)
    run = simulate([*PRIORITIES, *objs], conf=conf, max_cycles=1)
    assert evicted(run) == expected


# -- 2. HDRF saturation --------------------------------------------------------------------

HDRF = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: drf, enableHierarchy: true}, {name: predicates}]
"""
"""One tier: victims are the intersection of that tier's answers (``Reclaimable``,
``framework/session_plugins.go:225-271``), drf's included."""


def _hqueue(name: str, path: str) -> Obj:
    queue = make_queue(name)
    weights = "/".join("1" for _ in path.split("/"))
    queue["metadata"]["annotations"] = {"volcano.sh/hierarchy": path,
                                        "volcano.sh/hierarchy-weights": weights}
    return queue


def test_hdrf_a_job_holding_nothing_is_not_saturated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``resourceSaturated`` (``plugins/drf/drf.go:84-97``) walks ``allocated.ResourceNames()``
    only: a job that holds nothing is never saturated, even asking for cpu the cluster has no
    more of. So ``root/x`` (qb's reclaimer saturated, qc's pending job not) is not saturated
    and compares before the saturated ``root/qa``: qb reclaims one of qa's tasks. Counting
    cpu for qc's empty job made ``root/x`` saturated and the reclaim found no victim."""
    objs = [make_node("n1", cpu="2"),
            _hqueue("qa", "root/qa"), _hqueue("qb", "root/x/qb"), _hqueue("qc", "root/x/qc"),
            make_podgroup("a", queue="qa", phase="Running"),
            make_pod("a-0", group="a", node="n1"), make_pod("a-1", group="a", node="n1"),
            make_podgroup("b", queue="qb"), make_pod("b-0", group="b"),
            make_podgroup("c", queue="qc"), make_pod("c-0", group="c")]
    result = simulate_cli(tmp_path, capsys, objs, HDRF)
    assert len(result.evicted()) == 1 and result.evicted()[0] in ("a-0", "a-1")


# -- 3. what topology-aware preemption's dry run re-checks ----------------------------------

TOPOLOGY = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true}
"""


def _priority_objs() -> list[Obj]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value}
            for name, value in (("low", 10), ("high", 1000))]


def _victim(name: str, *, node: str, **kwargs: Any) -> list[Obj]:
    pod = make_pod(f"{name}-0", group=name, node=node, priority=10, priority_class="low",
                   **kwargs)
    # minMember 0: gang lets a running gang lose tasks only above its minimum
    return [make_podgroup(name, min_member=0, priority_class="low", phase="Running"), pod]


def test_dry_run_frees_a_pod_slot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``SelectVictimsOnNode`` (``actions/preempt/preempt.go:783-802``) removes victims from
    the node and asks only the resource fit (``pods`` included), the queue and
    ``SimulatePredicateFn`` (``plugins/predicates/predicates.go:397-440``: inter-pod affinity
    and devices). A node at its pod limit gets a slot back from its victim; the full
    predicates still counted the leaving pod and never found a victim."""
    objs = [*_priority_objs(), make_node("n1", cpu="4", pods="1"), *_victim("low", node="n1"),
            make_podgroup("high", priority_class="high"),
            make_pod("high-0", group="high", priority=1000, priority_class="high")]
    result = simulate_cli(tmp_path, capsys, objs, TOPOLOGY)
    assert result.evicted() == ["low-0"]


def test_dry_run_ignores_a_port_a_victim_does_not_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As in Volcano, host ports are not re-checked in the dry run (predicates.go:397-440): the
    low-priority pod is evicted although the port the preemptor wants stays taken by a pod
    that is not a victim (``docs/fidelity.md``)."""
    keeper = make_pod("keeper-0", cpu="1", group="keeper", node="n1", host_port=8080,
                      priority=1000, priority_class="high")
    objs = [*_priority_objs(), make_node("n1", cpu="2"),
            make_podgroup("keeper", min_member=0, priority_class="high", phase="Running"),
            keeper,
            *_victim("low", node="n1"),
            make_podgroup("high", priority_class="high"),
            make_pod("high-0", group="high", host_port=8080, priority=1000,
                     priority_class="high")]
    result = simulate_cli(tmp_path, capsys, objs, TOPOLOGY)
    assert result.evicted() == ["low-0"]


# -- 5. an invalid gang's condition -----------------------------------------------------------

DEFAULT_TIERS = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
"""


def test_an_invalid_gang_reads_as_any_unready_gang(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Since Volcano commit b5a8b2b39 ``openSession`` no longer drops a job ``JobValid``
    refuses: the actions skip it (``actions/allocate/allocate.go:166``), ``enqueue`` admits it
    (``actions/enqueue/enqueue.go:97-101``) and gang's ``OnSessionClose``
    (``plugins/gang/gang.go:229-277``) writes ``NotEnoughResources`` with
    ``<minAvailable - schedulable>/<tasks> tasks in gang unschedulable: <FitError>``
    (``api/job_info.go:837-881``)."""
    objs = [make_node("n1"), make_podgroup("short", min_member=3),
            make_pod("short-0", group="short")]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    assert result.node_of("short-0") is None
    condition = result.condition("short")
    assert condition is not None
    assert condition["reason"] == "NotEnoughResources"
    assert condition["message"] == ("3/1 tasks in gang unschedulable: pod group is not ready, "
                                    "1 Pending, 3 minAvailable; Pending: 1 Unschedulable")
    assert result.objects("PodGroup")["short"]["status"]["phase"] == "Inqueue"


def test_fit_error_sorts_its_counts_as_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``FitError`` sorts the ``"<count> <name>"`` strings (``sort.Strings``,
    job_info.go:838-858), ``minAvailable`` among them: ``1 Running`` < ``3 minAvailable`` <
    ``5 Pending``."""
    objs = [make_node("n1", cpu="2"), make_podgroup("big", min_member=3, phase="Running"),
            make_pod("big-0", cpu="1", group="big", node="n1"),
            *(make_pod(f"big-{i}", cpu="2", group="big") for i in range(1, 6))]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    condition = result.condition("big")
    assert condition is not None
    assert condition["message"].startswith(
        "2/6 tasks in gang unschedulable: pod group is not ready, 1 Running, 3 minAvailable, "
        "5 Pending; Pending: 5 Unschedulable. Origin reason is big-")


# -- 7. a pod field Volcano ignores, and a bound pod read in part ---------------------------


def _read_in_part(result: Result, pod: str) -> list[str]:
    return [e["message"] for e in result.objects("Event").values()
            if e["reason"] == "InvalidPodField" and e["involvedObject"]["name"] == pod]


def test_a_task_priority_that_is_no_integer_is_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``NewTaskInfo`` (``api/job_info.go:247-250``) keeps the pod's priority when
    ``strconv.ParseInt(annotation, 10, 32)`` fails; the pod is scheduled as any other. Lahar
    refused the whole file; now it warns, naming pod and field."""
    objs = [make_node("n1"), make_podgroup("j"),
            make_pod("j-0", group="j", annotations={"volcano.sh/task-priority": "high"})]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    assert result.node_of("j-0") == "n1"
    [message] = _read_in_part(result, "j-0")
    assert "metadata.annotations[volcano.sh/task-priority]" in message and "'high'" in message


@pytest.mark.parametrize("value", ["1_0", " 5", "2147483648", "5.0"])
def test_task_priority_is_read_as_go_parse_int_reads_it(value: str) -> None:
    """ParseInt with base 10 and 32 bits takes no underscore, space, fraction or value past
    int32: each of these leaves the pod's own priority."""
    pod = make_pod("p", priority=7, annotations={"volcano.sh/task-priority": value})
    task = task_from_pod(pod)
    assert task.priority == 7 and task.notes
    assert task_from_pod(make_pod("q", annotations={"volcano.sh/task-priority": "-3"})
                         ).priority == -3


def test_a_bound_pod_with_a_bad_annotation_keeps_its_node_full(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bound pod's usage stays on its node whatever its annotations say: the 2-cpu node
    holding it has no room for another 2 cpu."""
    objs = [make_node("n1", cpu="2"), make_podgroup("old", phase="Running"),
            make_pod("old-0", cpu="2", group="old", node="n1",
                     annotations={"volcano.sh/task-priority": "x"}),
            make_podgroup("new"), make_pod("new-0", cpu="2", group="new")]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    assert result.node_of("new-0") is None


def test_a_bound_pod_with_an_unreadable_quantity_keeps_what_can_be_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the unreadable entry is left out: the bound pod's 2 cpu (and its pod slot) stay
    on the node, with a warning naming the pod and the field."""
    old = make_pod("old-0", cpu="2", group="old", node="n1")
    old["spec"]["containers"].append(
        {"name": "side", "image": "busybox", "resources": {"requests": {"memory": "lots"}}})
    objs = [make_node("n1", cpu="2"), make_podgroup("old", phase="Running"), old,
            make_podgroup("new"), make_pod("new-0", cpu="1", group="new")]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    assert result.node_of("new-0") is None
    [message] = _read_in_part(result, "old-0")
    assert "spec.containers[1].resources" in message and "'memory'" in message


def test_a_pending_pod_with_an_unreadable_quantity_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pod that holds nothing yet is still bad input: the file is refused, naming it."""
    pod = make_pod("new-0", cpu="lots", group="new")
    cluster, conf = tmp_path / "c.yaml", tmp_path / "s.conf"
    cluster.write_text(json.dumps(pod))
    conf.write_text(DEFAULT_TIERS)
    assert main(["simulate", str(cluster), "--conf", str(conf), "--max-cycles", "1"]) != 0
    assert "new-0" in capsys.readouterr().err


# -- 8. queue status with a root queue --------------------------------------------------------


def _queue(name: str, parent: str | None = None) -> Obj:
    queue = make_queue(name)
    if parent is not None:
        queue["spec"]["parent"] = parent
    return queue


def test_queue_allocated_rolls_up_to_parents_and_root_pods_included(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``updateQueueStatus`` (``framework/session.go:502-556``): with a ``root`` queue every
    allocated task is added to its queue and to each ancestor along ``spec.parent`` (``root``
    when unset), and ``ConvertRes2ResList`` (``util/scheduler_helper.go:351-362``) writes
    ``pods`` too."""
    objs = [make_node("n1", cpu="8"), _queue("root"), _queue("eng", "root"),
            _queue("train", "eng"), _queue("default"),
            make_podgroup("t", queue="train"), make_pod("t-0", cpu="2", group="t"),
            make_pod("t-1", cpu="1", group="t"),
            make_podgroup("d", queue="default"), make_pod("d-0", cpu="1", group="d")]
    result = simulate_cli(tmp_path, capsys, objs, DEFAULT_TIERS)
    allocated = {name: (queue.get("status") or {}).get("allocated") or {}
                 for name, queue in result.objects("Queue").items()}
    assert allocated["train"]["cpu"] == "3" and allocated["train"]["pods"] == "2"
    assert allocated["eng"]["cpu"] == "3" and allocated["eng"]["pods"] == "2"
    assert allocated["default"]["cpu"] == "1" and allocated["default"]["pods"] == "1"
    assert allocated["root"]["cpu"] == "4" and allocated["root"]["pods"] == "3"


def test_a_bound_pod_is_read_in_part_whatever_is_broken() -> None:
    """Each field that cannot be read is named and left out; the pod's usage stays. The same
    pod not yet bound is refused."""
    pod = make_pod("p", cpu="2", node="n1", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": 3, "operator": "In"}]}]}}})
    pod["metadata"]["labels"] = ["not", "a", "map"]
    pod["spec"]["containers"].append("not a container")
    task = task_from_pod(pod)
    assert task.resreq.milli_cpu == 2000 and task.resreq.get("pods") == 1
    fields = [note.split(":")[0] for note in task.notes]
    assert fields == ["field metadata.labels", "field spec.containers[1].resources",
                      "field spec.affinity.nodeAffinity.required.nodeSelectorTerms[0]"
                      ".matchExpressions[0].key"]
    del pod["spec"]["nodeName"]
    with pytest.raises(ValueError, match="Pod default/p"):
        task_from_pod(pod)
