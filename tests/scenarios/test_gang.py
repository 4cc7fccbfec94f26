"""Gang scheduling: all or nothing, with Volcano's conditions, events and messages."""

from tests.builders import gang, make_node, make_pod, make_podgroup, simulate


def test_gang_that_fits_binds_every_member_and_runs() -> None:
    run = simulate([make_node("n1", cpu="4"), make_node("n2", cpu="4"), *gang("job", 3, cpu="2")])
    assert len(run.binds()) == 3
    assert run.phase("job") == "Running"
    assert run.podgroup("job")["status"]["running"] == 3
    scheduled = run.events("Scheduled")
    assert {e["message"] for e in scheduled if e["involvedObject"]["kind"] == "Pod"} == {
        f"Successfully assigned default/job-task-{i} to {run.node_of(f'job-task-{i}')}"
        for i in range(3)
    }
    assert any(
        e["involvedObject"]["kind"] == "PodGroup" and e["message"] == "pod group is ready"
        for e in scheduled
    )


def test_partly_placeable_gang_binds_nothing() -> None:
    run = simulate([make_node("n1", cpu="4"), *gang("job", 3, cpu="2")])
    assert run.binds() == {}
    assert run.phase("job") == "Inqueue"
    condition = next(
        c for c in run.podgroup("job")["status"]["conditions"] if c["type"] == "Unschedulable"
    )
    assert condition["reason"] == "NotEnoughResources"
    assert condition["message"].startswith(
        "1/3 tasks in gang unschedulable: pod group is not ready"
    )
    assert (
        "Origin reason is job-task-2: 0/1 nodes are unavailable: 1 Insufficient cpu."
        in condition["message"]
    )
    # the two members that fit are told where they could go; the third why it cannot
    assert run.condition("job-task-0")["reason"] == "Schedulable"
    assert run.reason("job-task-0") == (
        "Pod default/job-task-0 can possibly be assigned to n1, once minAvailable is satisfied"
    )
    assert run.reason("job-task-2") == "0/1 nodes are unavailable: 1 Insufficient cpu."
    warnings = [e for e in run.events("Unschedulable") if e["involvedObject"]["kind"] == "PodGroup"]
    assert warnings and warnings[0]["type"] == "Warning"
    assert warnings[0]["message"].startswith("3/3 tasks in gang unschedulable:")


def test_gang_above_min_member_binds_minimum_and_more_when_room() -> None:
    objs = [make_node("n1", cpu="3"), *gang("elastic", 5, min_member=2, cpu="1")]
    run = simulate(objs)
    assert len(run.binds()) == 3
    assert run.phase("elastic") == "Running"


def test_gang_with_too_few_pods_is_invalid_with_reason() -> None:
    objs = [
        make_node("n1"),
        make_podgroup("short", min_member=3),
        make_pod("short-0", group="short"),
        make_pod("short-1", group="short"),
    ]
    run = simulate(objs)
    assert run.binds() == {}
    # Volcano since b5a8b2b39: gang's OnSessionClose writes the invalid job's condition like
    # any unready gang's (plugins/gang/gang.go:229-277)
    condition = run.podgroup("short")["status"]["conditions"][0]
    assert condition["reason"] == "NotEnoughResources"
    assert condition["message"] == ("3/2 tasks in gang unschedulable: pod group is not ready, "
                                    "2 Pending, 3 minAvailable; Pending: 2 Unschedulable")
    assert "pod group is not ready, 2 Pending, 3 minAvailable" in run.reason("short-0")


def test_min_task_member_per_role() -> None:
    def pod(name: str, role: str) -> dict:
        return make_pod(name, group="mpi", annotations={"volcano.sh/task-spec": role})

    objs = [
        make_node("n1", cpu="8"),
        make_podgroup("mpi", min_member=2, min_task_member={"master": 1, "worker": 1}),
        pod("mpi-worker-0", "worker"),
        pod("mpi-worker-1", "worker"),
    ]
    run = simulate(objs)
    assert run.binds() == {}
    condition = run.podgroup("mpi")["status"]["conditions"][0]
    assert condition["reason"] == "NotEnoughResources"  # gang.go:229-277, as any unready gang
    assert condition["message"].startswith("2/2 tasks in gang unschedulable: ")
    run = simulate([*objs, pod("mpi-master-0", "master")])
    assert len(run.binds()) == 3


def test_two_gangs_competing_only_one_wins_whole() -> None:
    objs = [make_node("n1", cpu="4"), *gang("a", 3, cpu="1"), *gang("b", 3, cpu="1")]
    run = simulate(objs)
    bound = run.binds()
    assert len(bound) == 3
    assert {name.split("-")[0] for name in bound} in ({"a"}, {"b"})


def test_best_effort_pods_are_backfilled() -> None:
    objs = [make_node("n1", cpu="1"), make_pod("hog", cpu="1"), make_pod("free", cpu=None)]
    run = simulate(objs)
    assert run.node_of("hog") == "n1"
    assert run.node_of("free") == "n1"
