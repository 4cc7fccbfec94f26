"""Invariants over random clusters: no node over-committed, gangs all or nothing,
queues within capability.

Queue ``q2`` names only cpu in its capability, so it may hold any memory; it is served first
(higher priority) and always holds a one-pod probe job that an empty cluster must place, so
every example checks the capability of a queue that really schedules."""

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.pod import pod_requests
from scheduler.api.resource import resource_from_list
from tests.builders import BINPACK_CONF, make_node, make_pod, make_podgroup, make_queue, simulate

cpu_values = st.sampled_from(["250m", "500m", "1", "1500m", "2", "3"])


@st.composite
def clusters(draw: st.DrawFn) -> list[dict]:
    objs: list[dict] = []
    for i in range(draw(st.integers(1, 5))):
        objs.append(
            make_node(
                f"n{i}",
                cpu=draw(st.sampled_from(["2", "4", "6"])),
                memory=draw(st.sampled_from(["4Gi", "8Gi"])),
                pods=draw(st.sampled_from(["3", "110"])),
            )
        )
    objs.append(
        make_queue("q2", weight=draw(st.integers(1, 4)), capability={"cpu": "5"}, priority=1)
    )
    objs.append(make_podgroup("probe", min_member=1, queue="q2"))
    objs.append(make_pod("probe-t-0", group="probe", cpu="250m", memory="512Mi"))
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 5))
        queue = draw(st.sampled_from(["default", "q2"]))
        objs.append(make_podgroup(f"g{j}", min_member=draw(st.integers(1, size)), queue=queue))
        for t in range(size):
            objs.append(
                make_pod(
                    f"g{j}-t-{t}",
                    group=f"g{j}",
                    cpu=draw(cpu_values),
                    memory=draw(st.sampled_from(["512Mi", "1Gi", "2Gi"])),
                )
            )
    return objs


def _check(objs: list[dict], conf: str | None) -> None:
    run = simulate(objs, conf=conf, max_cycles=30)
    nodes = {
        n["metadata"]["name"]: resource_from_list(n["status"]["allocatable"])
        for n in objs
        if n["kind"] == "Node"
    }
    used: dict[str, list] = defaultdict(list)
    bound_per_group: dict[str, int] = defaultdict(int)
    queue_cpu: dict[str, float] = defaultdict(float)
    groups = {g["metadata"]["name"]: g for g in objs if g["kind"] == "PodGroup"}
    for pod in run.cluster.objects["Pod"].values():
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        request = pod_requests(pod)[0]
        used[node].append(request)
        group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        bound_per_group[group] += 1
        queue_cpu[groups[group]["spec"]["queue"]] += request.milli_cpu
    for node, requests in used.items():
        total = requests[0].clone()
        for r in requests[1:]:
            total.add(r)
        assert total.less_equal(nodes[node]), f"{node} over-committed: {total} > {nodes[node]}"
    for name, count in bound_per_group.items():
        assert count >= groups[name]["spec"]["minMember"], f"gang {name} partly bound ({count})"
    assert bound_per_group["probe"] == 1, "queue q2 scheduled nothing"
    assert queue_cpu["q2"] <= 5000 + 0.1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_default_conf_invariants(objs: list[dict]) -> None:
    _check(objs, None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_binpack_conf_invariants(objs: list[dict]) -> None:
    _check(objs, BINPACK_CONF)
