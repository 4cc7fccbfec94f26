"""The node lock: take, block, break, conflict retries and two schedulers racing for one node."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import ConflictError, SimCluster
from scheduler.devices.names import GPUSHARE_LOCK, HAMI, VOLCANO
from scheduler.devices.node.nodelock import (
    HAMI_EXPIRE_ENV,
    LOCK_TTL,
    NodeLocker,
    NodeLockError,
    format_lock,
    hami_lock_expiry,
    lock_problem,
    parse_go_duration,
    parse_lock,
)
from tests.builders import make_node

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
STAMP = "2026-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[list[dict[str, Any]]]:
    """Keep log lines in memory: an earlier test may have pointed structlog at a closed stream."""
    with structlog.testing.capture_logs() as logs:
        yield logs


class NodeStore:
    """A thread-safe Node store whose replace checks ``resourceVersion`` like the API server."""

    def __init__(self, *names: str, annotations: dict[str, str] | None = None) -> None:
        self.lock = threading.Lock()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.gets = 0
        self.replaces = 0
        self.conflicts_to_inject = 0
        self.barrier: threading.Barrier | None = None
        for name in names:
            node = make_node(name, annotations=annotations)
            node["metadata"]["resourceVersion"] = self._next()
            self.nodes[name] = node

    def _next(self) -> str:
        self.version += 1
        return str(self.version)

    def get_node(self, name: str) -> dict[str, Any]:
        with self.lock:
            self.gets += 1
            node = copy.deepcopy(self.nodes[name])
        barrier = self.barrier
        if barrier is not None:
            # Everybody reads the same version before anybody writes; only the first read
            # of each racer waits, so the re-read after a conflict goes straight through.
            barrier.wait(timeout=5)
            self.barrier = None
        return node

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.replaces += 1
            name = node["metadata"]["name"]
            if self.conflicts_to_inject:
                self.conflicts_to_inject -= 1
                raise ConflictError(f"node {name} changed")
            current = self.nodes[name]
            if node["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ConflictError(f"node {name} changed")
            stored = copy.deepcopy(node)
            stored["metadata"]["resourceVersion"] = self._next()
            self.nodes[name] = stored
            return copy.deepcopy(stored)

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.nodes[name]["metadata"].get("annotations") or {})


def _locker(store: NodeStore, *, now: float = NOW, sleeps: list[float] | None = None) -> NodeLocker:
    recorded = sleeps if sleeps is not None else []
    return NodeLocker(store, clock=lambda: now, sleep=recorded.append)


# -- values ----------------------------------------------------------------------------------
def test_lock_values_in_both_profiles() -> None:
    assert format_lock(NOW) == STAMP
    assert format_lock(NOW + 0.9, owner="team-a/train-0") == f"{STAMP},team-a,train-0"
    assert parse_lock(f"{STAMP},team-a,train-0") == (NOW, "team-a/train-0")
    assert parse_lock(STAMP) == (NOW, "")
    # Go's time.RFC3339 in a local zone
    assert parse_lock("2026-01-01T08:00:00+08:00") == (NOW, "")
    assert parse_lock("yesterday") == (None, "")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param(STAMP, "node n1 has been locked within 5 minutes (lock gpu=", id="fresh"),
        pytest.param(format_lock(NOW - LOCK_TTL + 1), "locked within 5 minutes",
                     id="almost-expired"),
        pytest.param(format_lock(NOW - LOCK_TTL), None, id="expired"),
        pytest.param("not-a-time", "node n1 has an unreadable lock annotation "
                                   "gpu='not-a-time'", id="unreadable"),
        pytest.param("", "node n1 has an unreadable lock annotation gpu=''", id="empty"),
        pytest.param(format_lock(NOW + LOCK_TTL + 60), None, id="far-future"),
    ],
)
def test_lock_problem(value: str | None, problem: str | None) -> None:
    """Volcano ``nodelock.LockNode``: absent → free; unparsable time → error; younger than
    5 minutes → "node X has been locked within 5 minutes"; older → expired."""
    found = lock_problem("n1", GPUSHARE_LOCK, value, NOW)
    assert (found is None) is (problem is None)
    if problem is not None:
        assert found is not None and problem in found


def test_lock_problem_spares_the_pod_that_holds_it() -> None:
    value = f"{STAMP},ns1,pod-a"
    assert lock_problem("n1", HAMI.lock, value, NOW, owner="ns1/pod-a") is None
    assert lock_problem("n1", HAMI.lock, value, NOW, owner="ns1/pod-b") is not None


# -- acquire -------------------------------------------------------------------------------
def test_take_free_lock_writes_the_time() -> None:
    store = NodeStore("n1")
    _locker(store).acquire("n1", VOLCANO.lock)
    assert store.annotations("n1")[VOLCANO.lock] == STAMP
    assert VOLCANO.lock == "hamivgpu" and GPUSHARE_LOCK == "gpu"


def test_hami_lock_carries_the_owner() -> None:
    store = NodeStore("n1")
    _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-a")
    assert store.annotations("n1")["hami.io/mutex.lock"] == f"{STAMP},ns1,pod-a"


def test_young_lock_blocks() -> None:
    store = NodeStore("n1", annotations={GPUSHARE_LOCK: format_lock(NOW - 60)})
    with pytest.raises(NodeLockError, match="locked within 5 minutes"):
        _locker(store).acquire("n1", GPUSHARE_LOCK)
    assert store.replaces == 0


def test_same_owner_retakes_its_own_lock() -> None:
    store = NodeStore("n1", annotations={HAMI.lock: f"{format_lock(NOW - 60)},ns1,pod-a"})
    _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-a")
    with pytest.raises(NodeLockError):
        _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-b")


@pytest.mark.parametrize(
    "old",
    [
        pytest.param(format_lock(NOW - LOCK_TTL - 1), id="expired"),
        pytest.param(format_lock(NOW + 2 * LOCK_TTL), id="from-the-future"),
    ],
)
def test_old_lock_is_broken_and_retaken(old: str) -> None:
    store = NodeStore("n1", annotations={VOLCANO.lock: old})
    _locker(store).acquire("n1", VOLCANO.lock)
    assert store.annotations("n1")[VOLCANO.lock] == STAMP


def test_unreadable_lock_is_an_error_and_left_in_place() -> None:
    """Volcano ``nodelock.LockNode`` returns the time-parse error: the lock is not broken."""
    store = NodeStore("n1", annotations={VOLCANO.lock: "garbage"})
    with pytest.raises(NodeLockError, match="node n1 has an unreadable lock annotation "
                                            "hamivgpu='garbage'"):
        _locker(store).acquire("n1", VOLCANO.lock)
    assert store.annotations("n1")[VOLCANO.lock] == "garbage" and store.replaces == 0


def test_conflicts_are_retried_100ms_apart() -> None:
    store = NodeStore("n1")
    store.conflicts_to_inject = 4
    sleeps: list[float] = []
    _locker(store, sleeps=sleeps).acquire("n1", VOLCANO.lock)
    assert store.replaces == 5 and store.gets == 5
    assert sleeps == [0.1] * 4
    assert store.annotations("n1")[VOLCANO.lock] == STAMP


def test_gives_up_after_five_conflicts() -> None:
    store = NodeStore("n1")
    store.conflicts_to_inject = 5
    sleeps: list[float] = []
    with pytest.raises(NodeLockError, match="5 attempts"):
        _locker(store, sleeps=sleeps).acquire("n1", VOLCANO.lock)
    assert store.replaces == 5 and len(sleeps) == 4
    assert VOLCANO.lock not in store.annotations("n1")


def test_a_lost_race_leaves_the_stored_node_untouched() -> None:
    """The locker must never edit the object the store handed out."""

    class SharingStore(NodeStore):
        def get_node(self, name: str) -> dict[str, Any]:
            return self.nodes[name]  # no copy, like a careless cache

        def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
            raise ConflictError("always stale")

    store = SharingStore("n1")
    with pytest.raises(NodeLockError):
        _locker(store).acquire("n1", VOLCANO.lock)
    assert VOLCANO.lock not in store.annotations("n1")


def test_other_write_errors_are_not_retried() -> None:
    class Broken(NodeStore):
        def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
            self.replaces += 1
            raise RuntimeError("forbidden")

    store = Broken("n1")
    with pytest.raises(NodeLockError, match="forbidden"):
        _locker(store).acquire("n1", VOLCANO.lock)
    assert store.replaces == 1


def test_missing_node_is_a_lock_error() -> None:
    with pytest.raises(NodeLockError, match="could not read node nope"):
        _locker(NodeStore("n1")).acquire("nope", VOLCANO.lock)


# -- the race --------------------------------------------------------------------------------
def _race(store: NodeStore, key: str, owners: tuple[str | None, ...]) -> list[str]:
    outcomes: list[str] = []
    record = threading.Lock()

    def contend(owner: str | None) -> None:
        locker = NodeLocker(store, clock=lambda: NOW, sleep=lambda _: None)
        try:
            locker.acquire("n1", key, owner=owner)
        except NodeLockError:
            result = "blocked"
        else:
            result = "won"
        with record:
            outcomes.append(result)

    threads = [threading.Thread(target=contend, args=(owner,)) for owner in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    return outcomes


@pytest.mark.parametrize("profile", [VOLCANO, HAMI], ids=lambda n: n.profile)
def test_two_schedulers_racing_never_both_win(profile: Any) -> None:
    owners = ("ns/a", "ns/b") if profile.lock_with_owner else (None, None)
    for _ in range(20):
        store = NodeStore("n1")
        store.barrier = threading.Barrier(2)
        outcomes = _race(store, profile.lock, owners)
        assert sorted(outcomes) == ["blocked", "won"]


def test_many_racers_one_winner_without_forced_interleaving() -> None:
    store = NodeStore("n1")
    outcomes = _race(store, GPUSHARE_LOCK, (None,) * 8)
    assert outcomes.count("won") == 1


def test_race_against_the_embedded_cluster() -> None:
    cluster = SimCluster()
    cluster.load([Manifest(source="test", obj=make_node("n1"))])
    first = NodeLocker(cluster, clock=cluster.clock, sleep=lambda _: None)
    second = NodeLocker(cluster, clock=cluster.clock, sleep=lambda _: None)
    stale = cluster.get_node("n1")
    first.acquire("n1", VOLCANO.lock)
    stale["metadata"]["annotations"][VOLCANO.lock] = "mine"
    with pytest.raises(ConflictError):
        cluster.replace_node(stale)
    with pytest.raises(NodeLockError):
        second.acquire("n1", VOLCANO.lock)


# -- release ---------------------------------------------------------------------------------
def test_release_removes_the_lock_and_retries_conflicts() -> None:
    store = NodeStore("n1", annotations={VOLCANO.lock: STAMP})
    store.conflicts_to_inject = 2
    assert _locker(store).release("n1", VOLCANO.lock) is True
    assert VOLCANO.lock not in store.annotations("n1")
    assert _locker(store).release("n1", VOLCANO.lock) is False


def test_release_checks_the_owner() -> None:
    store = NodeStore("n1", annotations={HAMI.lock: f"{STAMP},ns1,pod-a"})
    assert _locker(store).release("n1", HAMI.lock, owner="ns1/pod-b") is False
    assert _locker(store).release("n1", HAMI.lock, owner="ns1/pod-a") is True


# -- HAMi's expiry and dangling locks --------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5m", 90.0), ("500ms", 0.5),
    ("0", 0.0), ("-1m", -60.0), ("2h0m0.5s", 7200.5)])
def test_go_durations(text: str, seconds: float) -> None:
    """Go ``time.ParseDuration``, which HAMi ``pkg/util/nodelock/nodelock.go:116-127``
    (``setupNodeLockTimeout``) applies to ``HAMI_NODELOCK_EXPIRE``."""
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "m", "5 m", " 5m", "5x", "1h-3m", ""])
def test_go_duration_errors(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


def test_hami_lock_expiry_from_the_environment() -> None:
    """Unset or unreadable: HAMi's 5 minutes (``NodeLockTimeout``, nodelock.go:56)."""
    assert hami_lock_expiry({}) == LOCK_TTL
    assert hami_lock_expiry({HAMI_EXPIRE_ENV: "30s"}) == 30.0
    assert hami_lock_expiry({HAMI_EXPIRE_ENV: "soon"}) == LOCK_TTL


def test_hami_lock_expires_after_hami_nodelock_expire_volcano_s_after_5_minutes() -> None:
    """HAMi ``LockNode`` (nodelock.go:256) breaks a lock older than ``NodeLockTimeout``;
    volcano-vgpu's ``LockNode`` (``pkg/util/nodelock/nodelock.go:113``) keeps 5 minutes."""
    held = f"{format_lock(NOW - 40)},ns1,pod-a"
    store = NodeStore("n1", annotations={HAMI.lock: held, VOLCANO.lock: format_lock(NOW - 40)})
    short = NodeLocker(store, clock=lambda: NOW, sleep=lambda _: None, owner_ttl=30.0)
    short.acquire("n1", HAMI.lock, owner="ns1/pod-b")
    assert store.annotations("n1")[HAMI.lock] == f"{STAMP},ns1,pod-b"
    with pytest.raises(NodeLockError, match="locked within 5 minutes"):
        short.acquire("n1", VOLCANO.lock)
    long = NodeLocker(store, clock=lambda: NOW + 20, sleep=lambda _: None, owner_ttl=90.0)
    with pytest.raises(NodeLockError, match="locked within 90 seconds"):
        long.acquire("n1", HAMI.lock, owner="ns1/pod-c")


class PodStore(NodeStore):
    """Nodes plus the pods ``get_pod`` finds (the Kubernetes writer's lookup)."""

    def __init__(self, *names: str, pods: set[str], annotations: dict[str, str]) -> None:
        super().__init__(*names, annotations=annotations)
        self.pods = pods
        self.looked_up: list[str] = []
        self.fail = False

    def get_pod(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        self.looked_up.append(f"{namespace}/{name}")
        if self.fail:
            raise OSError("connection refused")
        return {"metadata": {"name": name}} if f"{namespace}/{name}" in self.pods else None


def test_hami_lock_of_a_pod_that_is_gone_is_broken() -> None:
    """HAMi ``LockNode`` (nodelock.go:269-279): a valid lock whose owner pod is NotFound is
    released and set again for the new pod; one whose pod exists blocks; a lookup error is
    returned without touching the lock."""
    held = f"{format_lock(NOW - 10)},ns1,pod-a"
    store = PodStore("n1", pods={"ns1/pod-a"}, annotations={HAMI.lock: held})
    with pytest.raises(NodeLockError, match="locked within 5 minutes"):
        _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-b")
    assert store.looked_up == ["ns1/pod-a"]
    store.fail = True
    with pytest.raises(NodeLockError, match="could not read pod ns1/pod-a, which holds"):
        _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-b")
    store.fail = False
    store.pods.clear()
    _locker(store).acquire("n1", HAMI.lock, owner="ns1/pod-b")
    assert store.annotations("n1")[HAMI.lock] == f"{STAMP},ns1,pod-b"


def test_a_lock_without_owner_is_not_looked_up() -> None:
    """Volcano's locks name no pod: only their age counts."""
    store = PodStore("n1", pods=set(), annotations={VOLCANO.lock: format_lock(NOW - 10)})
    with pytest.raises(NodeLockError, match="locked within"):
        _locker(store).acquire("n1", VOLCANO.lock)
    assert store.looked_up == []
