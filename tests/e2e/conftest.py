"""Fixtures of the e2e suite: the cluster named by ``KUBECONFIG``, per-case namespaces and nodes.

Environment:

* ``KUBECONFIG`` — the cluster; without it every e2e test is skipped.
* ``LAHAR_E2E_FAKE_NODES=1`` — a cluster without kubelets (a bare API server): the suite creates
  its own Nodes and marks bound pods Running itself, as kwok does.
* ``LAHAR_E2E_SERVICE_ACCOUNT=1`` — run the suite's scheduler processes as the ServiceAccount of
  ``conf/deploy/`` (its RBAC applied, a TokenRequest token): a request the role does not grant
  fails the case that caused it (:mod:`tests.e2e.serviceaccount`).
* ``LAHAR_E2E_DEPLOYED=1`` — use the scheduler already deployed (``LAHAR_E2E_SCHEDULER_NAME``,
  default ``volcano``) instead of starting ``lahar run`` subprocesses; cases that need their own
  scheduler process are skipped.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kube import (
    CASE_LABEL,
    RUN_LABEL,
    Kube,
    env_flag,
    ignore_missing,
    make_pod,
    node_name_of,
    raw,
    short_id,
)
from tests.e2e.processes import SchedulerProcess
from tests.e2e.serviceaccount import LEASE, deploy_identity, forbidden_lines

FAKE_TAINT = {"key": "lahar.e2e/fake", "value": "true", "effect": "NoSchedule"}


@dataclass
class Settings:
    kube: Kube
    kubeconfig: str
    run_id: str
    fake_nodes: bool
    deployed: bool
    workdir: Path
    scheduler_kubeconfig: str = ""
    """What the suite's scheduler processes use: ``kubeconfig`` or the ServiceAccount's."""

    @property
    def as_service_account(self) -> bool:
        return self.scheduler_kubeconfig not in ("", self.kubeconfig)


def assert_nothing_forbidden(settings: Settings, processes: list[SchedulerProcess]) -> None:
    if not settings.as_service_account:
        return
    lines = [line for process in processes for line in forbidden_lines(process.log_path)]
    assert not lines, ("the deploy role refused requests the scheduler made:\n"
                       + "\n".join(lines[:10]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    kubeconfig = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if not kubeconfig:
        pytest.skip("KUBECONFIG is not set: the e2e suite needs a cluster")
    return make_settings(kubeconfig, tmp_path_factory.mktemp("lahar-e2e"),
                         fake_nodes=env_flag("LAHAR_E2E_FAKE_NODES"))


def make_settings(kubeconfig: str, workdir: Path, *, fake_nodes: bool) -> Settings:
    """The suite's settings for the cluster of ``kubeconfig`` (skips without Volcano's CRDs)."""
    kube = Kube(kubeconfig)
    reason = kube.ensure_volcano_crds()
    if reason:
        pytest.skip(reason)
    made = Settings(kube=kube, kubeconfig=kubeconfig, run_id=short_id(),
                    fake_nodes=fake_nodes, deployed=env_flag("LAHAR_E2E_DEPLOYED"),
                    workdir=workdir)
    made.scheduler_kubeconfig = (deploy_identity(kube, kubeconfig, made.workdir)
                                 if env_flag("LAHAR_E2E_SERVICE_ACCOUNT") else kubeconfig)
    return made


def default_conf() -> str:
    from scheduler.conf import DEFAULT_CONF

    return DEFAULT_CONF


@pytest.fixture(scope="session")
def shared_scheduler(settings: Settings) -> Iterator[str]:
    """The scheduler name most cases use (a subprocess of the suite, or the deployed one)."""
    if settings.deployed:
        yield os.environ.get("LAHAR_E2E_SCHEDULER_NAME", "volcano")
        return
    name = f"lahar-e2e-{settings.run_id}"
    selector = {RUN_LABEL: settings.run_id} if settings.fake_nodes else None
    process = SchedulerProcess(kubeconfig=settings.scheduler_kubeconfig, name=name,
                               workdir=settings.workdir, conf=default_conf(),
                               node_selector=selector)
    try:
        process.wait_serving()
        yield name
    finally:
        process.terminate()
        assert_nothing_forbidden(settings, [process])


@pytest.fixture(scope="session")
def fake_kubelet(settings: Settings) -> Iterator[None]:
    """Mark bound pods of this run Running (fake nodes only; a real kubelet does it otherwise)."""
    with fake_kubelet_running(settings):
        yield


@contextlib.contextmanager
def fake_kubelet_running(settings: Settings) -> Iterator[None]:
    if not settings.fake_nodes:
        yield
        return
    stop = threading.Event()
    core = settings.kube.core

    def loop() -> None:
        while not stop.wait(0.2):
            try:
                pods = raw(core.list_pod_for_all_namespaces,
                           label_selector=f"{RUN_LABEL}={settings.run_id}").get("items") or []
                for pod in pods:
                    if node_name_of(pod) and (pod.get("status") or {}).get("phase") == "Pending":
                        meta = pod["metadata"]
                        raw(core.patch_namespaced_pod_status, meta["name"], meta["namespace"],
                            {"status": {"phase": "Running", "conditions": [
                                {"type": "Ready", "status": "True"}]}})
            except Exception:  # the cluster may be busy or the pod gone: try again
                continue

    thread = threading.Thread(target=loop, daemon=True, name="fake-kubelet")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5.0)


@dataclass
class Case:
    """One test's namespace, nodes and the objects it must clean up."""

    settings: Settings
    scheduler: str
    case_id: str = field(default_factory=short_id)
    nodes: list[str] = field(default_factory=list)
    unit: int = 1000
    """Milli-CPU of one unit of node capacity."""
    cleanups: list[Any] = field(default_factory=list)
    processes: list[SchedulerProcess] = field(default_factory=list)

    @property
    def kube(self) -> Kube:
        return self.settings.kube

    @property
    def namespace(self) -> str:
        return f"lahar-e2e-{self.settings.run_id}-{self.case_id}"

    @property
    def selector(self) -> dict[str, str]:
        return {CASE_LABEL: self.case_id}

    def add_nodes(self, count: int, *, units: int, extra: dict[str, str] | None = None,
                  annotations: dict[str, str] | None = None) -> list[str]:
        """``count`` nodes with room for ``units`` one-unit pods each, labelled for this case."""
        if self.settings.fake_nodes:
            names = [f"lahar-e2e-{self.settings.run_id}-{self.case_id}-{i}" for i in range(count)]
            for name in names:
                self._create_fake_node(name, cpu_milli=units * self.unit, extra=extra or {},
                                       annotations=annotations or {})
        else:
            names = self._label_real_nodes(count, units=units, extra=extra or {})
        self.nodes += names
        return names

    def _create_fake_node(self, name: str, *, cpu_milli: int, extra: dict[str, str],
                          annotations: dict[str, str]) -> None:
        resources = {"cpu": f"{cpu_milli}m", "memory": "64Gi", "pods": "110", **extra}
        raw(self.kube.core.create_node, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": dict(annotations),
                         "labels": {RUN_LABEL: self.settings.run_id, CASE_LABEL: self.case_id,
                                    "kubernetes.io/hostname": name, "type": "kwok"}},
            "spec": {"taints": [FAKE_TAINT]},
            "status": {"capacity": resources, "allocatable": resources, "phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}]}})
        self.cleanups.append(lambda: ignore_missing(self.kube.core.delete_node, name))

    def _label_real_nodes(self, count: int, *, units: int, extra: dict[str, str]) -> list[str]:
        nodes = raw(self.kube.core.list_node).get("items") or []
        usable = []
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            if (CASE_LABEL in labels or (node.get("spec") or {}).get("unschedulable")
                    or any(t.get("effect") == "NoSchedule"
                           for t in (node.get("spec") or {}).get("taints") or [])
                    or any(key not in allocatable for key in extra)):
                continue
            usable.append((self._free_milli(node), node["metadata"]["name"]))
        usable.sort(reverse=True)
        if len(usable) < count:
            pytest.skip(f"needs {count} schedulable node(s) with {sorted(extra) or 'cpu'}")
        chosen = usable[:count]
        self.unit = max(min(free for free, _ in chosen) // units, 1)
        for _, name in chosen:
            raw(self.kube.core.patch_node, name, {"metadata": {"labels": {CASE_LABEL:
                                                                          self.case_id}}})
            self.cleanups.append(lambda name=name: raw(
                self.kube.core.patch_node, name, {"metadata": {"labels": {CASE_LABEL: None}}}))
        return [name for _, name in chosen]

    def _free_milli(self, node: dict[str, Any]) -> int:
        from scheduler.api.resource import parse_quantity

        name = node["metadata"]["name"]
        free = parse_quantity(node["status"]["allocatable"]["cpu"]) * 1000
        pods = raw(self.kube.core.list_pod_for_all_namespaces,
                   field_selector=f"spec.nodeName={name}").get("items") or []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for container in pod["spec"].get("containers") or []:
                cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
                free -= parse_quantity(cpu) * 1000 if cpu else 0
        return int(free)

    def pod(self, name: str, *, group: str, units: float = 1.0, **kwargs: Any) -> None:
        selector = kwargs.pop("node_selector", self.selector)
        self.kube.create_pod(self.namespace, make_pod(
            name, scheduler=kwargs.pop("scheduler", self.scheduler), group=group,
            run_id=self.settings.run_id, cpu_milli=int(units * self.unit),
            node_selector=selector, **kwargs))

    def job(self, name: str, *, pods: int, units: float = 1.0, min_member: int | None = None,
            queue: str = "", priority_class: str = "", **kwargs: Any) -> list[str]:
        """A PodGroup and its pods; returns the pod names."""
        self.kube.create_podgroup(self.namespace, name, queue=queue,
                                  min_member=pods if min_member is None else min_member,
                                  priority_class=priority_class)
        names = [f"{name}-{i}" for i in range(pods)]
        for pod_name in names:
            self.pod(pod_name, group=name, units=units, priority_class=priority_class,
                     **kwargs)
        return names

    def node_of(self, pod: str) -> str:
        return node_name_of(self.kube.pod(self.namespace, pod))

    def bound(self, pods: list[str]) -> list[str]:
        return [pod for pod in pods if self.node_of(pod)]

    def start_scheduler(self, *, conf: str | None = None, name: str | None = None,
                        own_nodes: bool = True, **kwargs: Any) -> SchedulerProcess:
        if self.settings.deployed:
            pytest.skip("needs a scheduler process of its own (LAHAR_E2E_DEPLOYED is set)")
        if self.settings.as_service_account and kwargs.get("leader_elect"):
            kwargs["lease_namespace"], kwargs["lease_name"] = LEASE  # all the role grants
        process = SchedulerProcess(
            kubeconfig=self.settings.scheduler_kubeconfig, name=name or self.scheduler,
            workdir=self.settings.workdir, conf=conf or default_conf(),
            node_selector=self.selector if own_nodes else None, **kwargs)
        self.processes.append(process)
        return process

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception as error:  # clean up as much as possible
                print(f"e2e clean-up failed: {error}")
        self.kube.delete_namespace(self.namespace, finalize=self.settings.fake_nodes)
        assert_nothing_forbidden(self.settings, self.processes)


@pytest.fixture
def case(settings: Settings, shared_scheduler: str, fake_kubelet: None) -> Iterator[Case]:
    made = Case(settings=settings, scheduler=shared_scheduler)
    raw(settings.kube.core.create_namespace,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": made.namespace}})
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def own_case(settings: Settings, fake_kubelet: None) -> Iterator[Case]:
    """A case whose pods name a scheduler of their own (started by the test)."""
    with open_own_case(settings) as made:
        yield made


@contextlib.contextmanager
def open_own_case(settings: Settings) -> Iterator[Case]:
    made = Case(settings=settings, scheduler="")
    made.scheduler = f"lahar-e2e-{settings.run_id}-{made.case_id}"
    raw(settings.kube.core.create_namespace,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": made.namespace}})
    try:
        yield made
    finally:
        made.close()
