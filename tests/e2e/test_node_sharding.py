"""Node sharding on a real API server: two ``lahar run`` schedulers with hard NodeShards.

``lahar shard-controller`` splits 200 fake nodes of ten pods' room each into two NodeShards of
100; two schedulers, each with its own scheduler name and ``--scheduler-sharding-mode=hard``,
place 2,000 pods (1,000 each) together. Checked: every pod bound on its scheduler's shard, no
node above its room, exactly one Binding request per pod (the API server's own
``apiserver_request_total``) and no failed bind in either log. One scheduler placing the same
2,000 pods on 200 unsharded nodes runs first; both throughputs are printed.

The measurement is ``hack/bench_shards.py`` (this test runs its two phases and holds them to
the checks); it needs fake nodes (``LAHAR_E2E_FAKE_NODES=1``) as the NodeShard CRD is
installed when the server lacks it (a 1.28 server does) and removed again.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.e2e.conftest import Settings
from tests.e2e.kube import ROOT


@pytest.fixture
def figures(settings: Settings) -> dict[str, Any]:
    if not settings.fake_nodes:
        pytest.skip("needs 200 fake nodes (LAHAR_E2E_FAKE_NODES=1)")
    if str(ROOT / "hack") not in sys.path:
        sys.path.insert(0, str(ROOT / "hack"))
    import bench_shards

    args = bench_shards.parse_args(["--kubeconfig", settings.kubeconfig, "--nodes", "200",
                                    "--pods", "2000", "--shards", "2",
                                    "--order", "single,sharded", "--timeout", "240"])
    return bench_shards.run(args)


def test_two_hard_sharded_schedulers_place_2000_pods_without_overfilling(
        figures: dict[str, Any]) -> None:
    print(json.dumps(figures, indent=1))
    for phase in ("single", "sharded"):
        assert figures[f"{phase}_bound"] == 2000, phase
        assert figures[f"{phase}_unbound"] == 0, phase
        assert figures[f"{phase}_overfilled_nodes"] == 0, phase
        assert figures[f"{phase}_bind_failed_lines"] == 0, phase
        if f"{phase}_binding_posts" in figures:  # the server's metrics were readable
            assert figures[f"{phase}_binding_posts"] == 2000, phase
    assert figures["sharded_shard_sizes"] == [100, 100]
    assert figures["sharded_shards_overlap"] == 0
    assert figures["sharded_off_shard"] == 0
    assert figures["sharded_fullest_node_pods"] == 10
