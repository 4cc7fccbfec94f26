"""The e2e suite, run as CI runs it: against the API server double acting as a bare API server.

The double serves on 127.0.0.1 with a kubeconfig; the suite (a pytest subprocess) creates its own
fake nodes, starts ``lahar run`` subprocesses against it and checks binds, conditions, events,
queues, devices, restarts and leader election. Device cases may skip while device sharing is
absent; nothing may fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.apiserver import start_standalone

ROOT = Path(__file__).resolve().parents[2]


def test_e2e_suite_passes_against_a_bare_api_server(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    double = start_standalone(kubeconfig)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("LAHAR_E2E_") and key != "PYTEST_ADDOPTS"}
    env.update(KUBECONFIG=str(kubeconfig), LAHAR_E2E_FAKE_NODES="1",
               LAHAR_E2E_SCHEDULE_PERIOD="200ms",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/e2e", "-o", "addopts=", "-q", "-rs",
             "-p", "no:cacheprovider",
             f"--basetemp={tmp_path / 'e2e'}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    finally:
        double.stop()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " passed" in output and " failed" not in output, output
    # Everything the suite created was cleaned up.
    leftovers = {collection: sorted(objects) for collection, objects in double.objects.items()
                 if collection in ("v1/nodes", "v1/pods", "scheduling.k8s.io/v1/priorityclasses")
                 and objects}
    assert leftovers == {}, leftovers
