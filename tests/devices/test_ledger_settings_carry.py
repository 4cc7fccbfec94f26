"""The deviceshare settings written onto the nodes' ledgers at session open.

Nodes carried over from the previous cycle's node table are skipped while the settings are
those written last cycle; a conf changed between cycles reaches every ledger again.
"""

from __future__ import annotations

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from tests.builders import conf_of
from tests.devices.conftest import gpu_node, gpushare_conf

SETTINGS = "deviceshare.ledger-settings"


def _policies(session: object) -> set[str]:
    return {devices.policy for node in session.node_list  # type: ignore[attr-defined]
            for devices in node.others.values() if hasattr(devices, "policy")}


def test_a_changed_policy_reaches_the_ledgers_of_carried_nodes() -> None:
    nodes = [gpu_node(f"n{i}") for i in range(3)]
    _, _, scheduler = build_simulation([Manifest(f"t#{i}", o) for i, o in enumerate(nodes)],
                                       conf=conf_of(gpushare_conf(policy="binpack")))
    scheduler.run_once()
    session = scheduler.open_session()
    assert session.table.carried(SETTINGS) is not None  # the case this test is about
    assert _policies(session) == {"binpack"}
    scheduler.run_once()
    scheduler.set_conf(conf_of(gpushare_conf(policy="spread")))
    session = scheduler.open_session()
    assert session.table.carried(SETTINGS) is not None
    assert _policies(session) == {"spread"}
    scheduler.set_conf(conf_of(gpushare_conf(policy="binpack")))
    assert _policies(scheduler.open_session()) == {"binpack"}
