"""Which plugins a session collects per hook Protocol, with the answer kept per class."""

from __future__ import annotations

import pytest

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework import hooks as h
from scheduler.framework.plugin import NoArgs, PluginBase
from tests.builders import conf_of, make_node

PROTOCOLS = [value for value in vars(h).values()
             if isinstance(value, type) and getattr(value, "_is_runtime_protocol", False)]
CONF = """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: binpack}]
"""


class _Ordered(PluginBase[NoArgs]):
    NAME = "ordered"

    def job_order(self, left: object, right: object) -> int:
        return 0


class _Plain(PluginBase[NoArgs]):
    NAME = "plain"


@pytest.mark.parametrize("cycle", [1, 2])
def test_hooks_are_the_plugins_that_implement_the_protocol(cycle: int) -> None:
    _, _, scheduler = build_simulation([Manifest("n", make_node("n1"))], conf=conf_of(CONF))
    for _ in range(cycle):
        session = scheduler.open_session()
    assert PROTOCOLS
    for protocol in PROTOCOLS:
        flag = h.HOOK_FLAGS.get(protocol)
        expected = [[e.plugin for e in tier if isinstance(e.plugin, protocol)
                     and e.enabled(flag)] for tier in session.tiers]
        assert session.hooks(protocol) == expected, protocol.__name__


def test_classes_are_told_apart() -> None:
    from scheduler.framework.session import _implements

    assert _implements(_Ordered(NoArgs()), h.JobOrder)
    assert not _implements(_Plain(NoArgs()), h.JobOrder)
    assert _implements(_Ordered(NoArgs()), h.JobOrder)
