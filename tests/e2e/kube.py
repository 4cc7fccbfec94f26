"""The e2e suite's view of a cluster: the official client, raw JSON, builders and waiting.

Every call goes through the official ``kubernetes`` client with ``_preload_content=False`` and is
decoded with ``json.loads``, so the suite does not depend on the generated models accepting what
a given API server returns.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
KOORDINATOR = ("scheduling.koordinator.sh", "v1alpha1")
RUN_LABEL = "lahar.e2e/run"
CASE_LABEL = "lahar.e2e/case"
PAUSE = "registry.k8s.io/pause:3.9"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def short_id() -> str:
    return uuid.uuid4().hex[:6]


def eventually(check: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.2,
               what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except ApiException as error:
            last = f"API error {error.status}"
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(interval)


def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run a client method undecoded and return its JSON body."""
    response = call(*args, _preload_content=False, **kwargs)
    data = response.data
    return json.loads(data) if data else {}


@dataclass
class Kube:
    """The API clients for one kubeconfig."""

    kubeconfig: str
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.coordination = client.CoordinationV1Api(self.api)
        self.extensions = client.ApiextensionsV1Api(self.api)

    # -- CRDs -------------------------------------------------------------------------------
    def served(self, group: str, version: str, plural: str) -> bool:
        try:
            raw(self.custom.list_cluster_custom_object, group, version, plural, limit=1)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def ensure_volcano_crds(self) -> str | None:
        """Install PodGroup/Queue CRDs from ``conf/crds`` when missing; a reason when impossible."""
        missing = [p for p in ("podgroups", "queues") if not self.served(*VOLCANO, p)]
        if not missing:
            return None
        files = {p: ROOT / "conf" / "crds" / f"scheduling.volcano.sh_{p}.yaml" for p in missing}
        absent = [str(path) for path in files.values() if not path.exists()]
        if absent:
            return f"the API server serves no {', '.join(missing)} and {absent} are absent"
        for plural, path in files.items():
            for document in yaml.safe_load_all(path.read_text()):
                if document:
                    raw(self.extensions.create_custom_resource_definition, document)
            eventually(lambda plural=plural: self.served(*VOLCANO, plural),  # type: ignore[misc]
                       timeout=60.0, what=f"CRD {plural} served")
        return None

    def ensure_device_crd(self) -> str | None:
        """Install Koordinator's Device CRD from ``conf/crds`` when missing; a reason when
        impossible."""
        if self.served(*KOORDINATOR, "devices"):
            return None
        path = ROOT / "conf" / "crds" / "scheduling.koordinator.sh_devices.yaml"
        if not path.exists():
            return f"the API server serves no devices and {path} is absent"
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                raw(self.extensions.create_custom_resource_definition, document)
        eventually(lambda: self.served(*KOORDINATOR, "devices"), timeout=60.0,
                   what="CRD devices served")
        return None

    # -- reads ------------------------------------------------------------------------------
    def pods(self, namespace: str, **query: Any) -> list[dict[str, Any]]:
        return list(raw(self.core.list_namespaced_pod, namespace, **query).get("items") or [])

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return raw(self.core.read_namespaced_pod, name, namespace)

    def node(self, name: str) -> dict[str, Any]:
        return raw(self.core.read_node, name)

    def events(self, namespace: str, *, name: str = "",
               reason: str = "") -> list[dict[str, Any]]:
        items = raw(self.core.list_namespaced_event, namespace).get("items") or []
        return [e for e in items if (not name or e["involvedObject"]["name"] == name)
                and (not reason or e.get("reason") == reason)]

    def podgroup(self, namespace: str, name: str) -> dict[str, Any]:
        return raw(self.custom.get_namespaced_custom_object, *VOLCANO, namespace, "podgroups",
                   name)

    # -- writes -----------------------------------------------------------------------------
    def create_podgroup(self, namespace: str, name: str, *, min_member: int, queue: str = "",
                        priority_class: str = "") -> None:
        spec: dict[str, Any] = {"minMember": min_member}
        if queue:
            spec["queue"] = queue
        if priority_class:
            spec["priorityClassName"] = priority_class
        raw(self.custom.create_namespaced_custom_object, *VOLCANO, namespace, "podgroups",
            {"apiVersion": "/".join(VOLCANO), "kind": "PodGroup",
             "metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def create_queue(self, name: str, *, weight: int) -> None:
        raw(self.custom.create_cluster_custom_object, *VOLCANO, "queues",
            {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "metadata": {"name": name},
             "spec": {"weight": weight, "reclaimable": True}})

    def delete_queue(self, name: str) -> None:
        ignore_missing(self.custom.delete_cluster_custom_object, *VOLCANO, "queues", name)

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> None:
        raw(self.core.create_namespaced_pod, namespace, pod)

    def delete_namespace(self, namespace: str, *, finalize: bool) -> None:
        """Delete a case's namespace with what it holds.

        Pods go first with a zero grace period and PodGroups after them: without a kubelet a
        bound pod is never terminated, and without a namespace controller a namespace is never
        emptied, so leftovers would keep counting against the ``default`` queue in later cases.
        With ``finalize`` (a bare API server) the namespace's finalizers are cleared too, or it
        would stay ``Terminating`` for ever.
        """
        for pod in self.pods(namespace):
            ignore_missing(self.core.delete_namespaced_pod, pod["metadata"]["name"], namespace,
                           grace_period_seconds=0)
        groups = raw(self.custom.list_namespaced_custom_object, *VOLCANO, namespace,
                     "podgroups").get("items") or []
        for group in groups:
            ignore_missing(self.custom.delete_namespaced_custom_object, *VOLCANO, namespace,
                           "podgroups", group["metadata"]["name"])
        ignore_missing(self.core.delete_namespace, namespace)
        if not finalize:
            return
        try:
            body = raw(self.core.read_namespace, namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        body.setdefault("spec", {})["finalizers"] = []
        ignore_missing(self.core.replace_namespace_finalize, namespace, body)


def ignore_missing(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, _preload_content=False, **kwargs)
    except ApiException as error:
        if error.status != 404:
            raise


def make_pod(name: str, *, scheduler: str, group: str, run_id: str, cpu_milli: int,
             memory: str = "16Mi", node_selector: dict[str, str] | None = None,
             priority_class: str = "", limits: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None,
             labels: dict[str, str] | None = None,
             affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": f"{cpu_milli}m", "memory": memory}}
    if limits:
        resources["limits"] = dict(limits)
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": PAUSE, "resources": resources}],
        "nodeSelector": dict(node_selector or {}),
        "tolerations": [{"key": "lahar.e2e/fake", "operator": "Exists"}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {RUN_LABEL: run_id, **(labels or {})},
                         "annotations": {"scheduling.k8s.io/group-name": group,
                                         **(annotations or {})}},
            "spec": spec}


def node_name_of(pod: dict[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return {}


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
