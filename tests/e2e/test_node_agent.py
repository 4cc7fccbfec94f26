"""GPU share end to end through a real kubelet and ``lahar node-agent --fake-gpus``.

Runs where ``hack/run-e2e-kind.sh`` deployed the scheduler with GPU share on and the node agent
on the GPU workers (``LAHAR_E2E_NODE_AGENT=1``; ``LAHAR_E2E_IMAGE`` names an image the nodes
have, with Python in it). The kubelet, not the suite, calls the agent's ``Allocate``: the pod
only starts if the agent answered for the card the scheduler chose, and the container's
``NVIDIA_VISIBLE_DEVICES`` shows which card that was.
"""

from __future__ import annotations

import os

import pytest

from scheduler.devices.names import GPU_ASSIGNED, GPU_INDEX
from tests.e2e.conftest import Case
from tests.e2e.kube import RUN_LABEL, annotations, env_flag, eventually

PRINT_ENV = ("import os, sys, time\n"
             "print('visible=' + os.environ.get('NVIDIA_VISIBLE_DEVICES', ''), flush=True)\n"
             "print('allocated=' + os.environ.get('VOLCANO_GPU_ALLOCATED', ''), flush=True)\n"
             "time.sleep(3600)\n")

pytestmark = pytest.mark.skipif(not env_flag("LAHAR_E2E_NODE_AGENT"),
                                reason="needs the node agent deployed (hack/run-e2e-kind.sh)")


def gpu_pod(name: str, *, case: Case, memory_mib: int) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {RUN_LABEL: case.settings.run_id}},
        "spec": {
            "schedulerName": case.scheduler, "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [{
                "name": "main", "image": os.environ.get("LAHAR_E2E_IMAGE", "lahar:e2e"),
                "imagePullPolicy": "IfNotPresent",
                "command": ["python", "-c", PRINT_ENV],
                "resources": {"limits": {"volcano.sh/gpu-memory": str(memory_mib)}}}]}}


def test_a_gpu_share_pod_starts_with_the_card_the_scheduler_chose(case: Case) -> None:
    case.kube.create_pod(case.namespace, gpu_pod("shared", case=case, memory_mib=1024))

    def running() -> dict[str, object] | None:
        pod = case.kube.pod(case.namespace, "shared")
        return pod if (pod.get("status") or {}).get("phase") == "Running" else None

    pod = eventually(running, timeout=120.0, what="the GPU share pod Running")
    chosen = annotations(pod).get(GPU_INDEX, "")
    assert chosen, "the scheduler wrote no card choice"
    assert annotations(pod).get(GPU_ASSIGNED) == "true"  # the agent's Allocate marked it

    def printed() -> str | None:
        log = str(case.kube.core.read_namespaced_pod_log("shared", case.namespace))
        return log if "visible=" in log else None

    log = eventually(printed, timeout=60.0, what="the container's environment in its log")
    assert f"visible={chosen}\n" in log
    assert "allocated=" in log and "allocated=\n" not in log
