"""What keeps the agent's start-up and ``Allocate`` cheap: the modules imported before it
registers with kubelet, the deferred API connection, and the Node replace's single write."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.kube.nodeaccess import KubeNodeAccess
from scheduler.commands.nodeagent import _DeferredAccess


def test_the_agent_serves_without_importing_the_kubernetes_client_numpy_or_the_conf() -> None:
    # Everything node_agent_main imports before agent.start() registers with kubelet.
    code = (
        "import sys\n"
        "import scheduler.commands.cli, scheduler.commands.nodeagent\n"
        "import scheduler.devices.node.agent, scheduler.devices.node.inventory\n"
        "import scheduler.devices.node.report, scheduler.devices.node.resources\n"
        "print(sorted(m for m in ('kubernetes', 'numpy', 'scheduler.conf', 'plugins')"
        " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


class _Access:
    def get_node(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}}


def test_deferred_access_waits_for_the_connection() -> None:
    access = _DeferredAccess()
    got: list[dict[str, Any]] = []
    caller = threading.Thread(target=lambda: got.append(access.get_node("n1")))
    caller.start()
    caller.join(0.2)
    assert caller.is_alive() and not got  # waits: not connected yet
    access.connect(_Access())
    caller.join(5)
    assert got == [{"metadata": {"name": "n1"}}]


def test_deferred_access_without_a_connection_fails() -> None:
    access = _DeferredAccess()
    access.connect(None)
    with pytest.raises(RuntimeError, match="no connection"):
        access.get_node("n1")


class _Client:
    """Answers KubeNodeAccess's requests from one stored Node, recording them."""

    def __init__(self) -> None:
        self.node: dict[str, Any] = {"metadata": {
            "name": "n1", "resourceVersion": "7", "annotations": {"lock": "t", "keep": "1"},
            "labels": {"a": "b"}}}
        self.calls: list[tuple[str, Any]] = []

    def request_json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, kwargs.get("body")))
        if method == "PATCH":
            meta = self.node["metadata"]
            for part in ("annotations", "labels"):
                for key, value in (kwargs["body"]["metadata"].get(part) or {}).items():
                    if value is None:
                        meta[part].pop(key, None)
                    else:
                        meta[part][key] = value
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.node)


def test_replace_after_a_read_is_one_merge_patch_of_the_difference() -> None:
    client = _Client()
    access = KubeNodeAccess(client)  # type: ignore[arg-type]
    node = access.get_node("n1")
    del node["metadata"]["annotations"]["lock"]
    access.replace_node(node)
    assert [m for m, _ in client.calls] == ["GET", "PATCH"]
    assert client.calls[1][1] == {"metadata": {"resourceVersion": "7",
                                               "annotations": {"lock": None}}}


def test_replace_of_a_node_read_elsewhere_reads_it_and_refuses_a_stale_version() -> None:
    client = _Client()
    access = KubeNodeAccess(client)  # type: ignore[arg-type]
    stale = {"metadata": {"name": "n1", "resourceVersion": "6", "annotations": {}}}
    with pytest.raises(ApiException) as caught:
        access.replace_node(stale)
    assert caught.value.status == 409
    assert [m for m, _ in client.calls] == ["GET"]
