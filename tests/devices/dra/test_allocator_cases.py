"""kube-scheduler's allocator table cases, driven through ``allocate`` directly.

Each case is TestAllocator's case of the same name in k8s.io/dynamic-resource-allocation
``structured/internal/allocatortesting/allocator_testing.go`` (inputs and expected results
carried over; "no allocation" there is :class:`Unschedulable` here). The cases not ported, and
why, are listed in docs/dra.md ("Not ported").
"""

from __future__ import annotations

import pytest

from tests.devices.dra import (
    cases_basic,
    cases_capacity,
    cases_constraints,
    cases_lists,
    cases_order,
    cases_partitionable,
    cases_pools,
    cases_prioritized,
    cases_shared_counters,
    cases_taints,
)
from tests.devices.dra.builders import Case, run_case

CASES: list[Case] = [*cases_basic.CASES, *cases_constraints.CASES,
                     *cases_prioritized.CASES, *cases_partitionable.CASES,
                     *cases_taints.CASES, *cases_capacity.CASES,
                     *cases_lists.CASES, *cases_pools.CASES,
                     *cases_order.CASES, *cases_shared_counters.CASES]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocator_case(case: Case) -> None:
    """allocator_testing.go TestAllocator: the case of the same name."""
    run_case(case)


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
