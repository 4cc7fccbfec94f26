"""Resource arithmetic and queue bounds with Volcano's dimension semantics."""

from plugins.proportion import QueueAttr, compute_deserved
from scheduler.api.queue import QueueInfo, queue_from_object
from scheduler.api.resource import UNLIMITED, Default, Resource
from scheduler.api.types import QueueID

GPU = "nvidia.com/gpu"


def test_less_equal_with_infinity_treats_a_missing_left_scalar_as_unlimited() -> None:
    """Volcano ``Resource.LessEqual(rr, Infinity)``: a scalar only ``rr`` names makes the
    left side unlimited there, so it is not less-or-equal; a scalar only the left names is
    compared against an unlimited right side."""
    assert not Resource(1000, 0).less_equal(Resource(2000, 0, {GPU: 1000}), Default.INFINITY)
    assert Resource(1000, 0, {GPU: 5000}).less_equal(Resource(2000, 0), Default.INFINITY)
    assert Resource(1000, 0).less_equal(Resource(2000, 0, {GPU: 1000}), Default.ZERO)


def test_exceeding_on_compares_only_requested_dimensions_strictly() -> None:
    """Volcano ``Resource.LessEqualWithDimensionAndResourcesName``: only dimensions the
    request asks for, ``pods`` never, no tolerance, a scalar the limit lacks counts as 0."""
    used = Resource(4000.05, 10 * 2**30, {GPU: 2000, "pods": 50})
    limit = Resource(4000, 2**30, {"pods": 10})
    assert used.exceeding_on(limit, Resource(1000, 0)) == ["cpu"]
    assert used.exceeding_on(limit, Resource(0, 1, {"pods": 1})) == ["memory"]
    assert used.exceeding_on(limit, Resource(0, 0, {GPU: 1000})) == [GPU]
    assert used.exceeding_on(limit, Resource(0, 0, {"pods": 1})) == []


def test_exceeded_part_floors_at_zero_and_drops_exhausted_scalars() -> None:
    """Volcano ``api.ExceededPart`` (``Diff`` with ``Zero``): ``max(l − r, 0)``; a scalar not
    strictly larger on the left is left out, so ``MinDimensionResource(…, Infinity)`` later
    treats it as unlimited."""
    part = Resource(4000, 8, {GPU: 2000, "x": 1000}).exceeded_part(
        Resource(6000, 2, {GPU: 2000})
    )
    assert (part.milli_cpu, part.memory) == (0.0, 6.0)
    assert part.scalars == {"x": 1000}


def test_queue_capability_limit_and_real_capability() -> None:
    """Volcano ``proportion.go`` OnSessionOpen: capability cpu/memory ≤ 0 become
    ``math.MaxFloat64``; ``realCapability = ExceededPart(total, Σguarantee) + guarantee``
    capped by the capability with ``api.Infinity``."""
    queue = queue_from_object(
        {
            "metadata": {"name": "q"},
            "spec": {"capability": {GPU: "2"}, "guarantee": {"resource": {"cpu": "3"}}},
        }
    )
    limit = queue.capability_limit()
    assert limit is not None
    assert (limit.milli_cpu, limit.memory, limit.scalars) == (UNLIMITED, UNLIMITED, {GPU: 2000})
    total = Resource(8000, 2**33, {GPU: 8000})
    real = queue.real_capability(total=total, total_guarantee=Resource(10000, 0))
    # 8 − 10 cpu floors at 0, plus the queue's own 3; the gpu cap applies; memory is whole.
    assert (real.milli_cpu, real.memory, real.scalars[GPU]) == (3000, 2**33, 2000)


def _attr(name: str, *, request: Resource, real: Resource, guarantee: Resource) -> QueueAttr:
    return QueueAttr(
        queue=QueueInfo(uid=QueueID(name), name=name),
        weight=1,
        request=request,
        real_capability=real,
        guarantee=guarantee,
    )


def test_deserved_with_guarantees_past_the_cluster() -> None:
    """Volcano ``proportion.go`` deserved loop: ``remaining = ExceededPart(remaining +
    decreased, increased)`` never goes negative when guarantees lift deserved above the
    weighted share; each queue ends at its guarantee on the over-promised dimension."""
    total = Resource(4000, 8 * 2**30)
    a = _attr("a", request=Resource(8000, 8 * 2**30), real=Resource(4000, 8 * 2**30),
              guarantee=Resource(4000, 0))
    b = _attr("b", request=Resource(4000, 2 * 2**30), real=Resource(2000, 8 * 2**30),
              guarantee=Resource(2000, 0))
    compute_deserved([a, b], total)
    assert (a.deserved.milli_cpu, b.deserved.milli_cpu) == (4000, 2000)
    assert b.deserved.memory == 2 * 2**30
    assert a.deserved.memory == 6 * 2**30


def test_queue_share_counts_pods() -> None:
    """Volcano ``updateQueueAttrShare`` walks ``deserved.ResourceNames()``, ``pods``
    included: a queue of many small pods can have its largest share in pods."""
    attr = _attr("a", request=Resource(), real=Resource(), guarantee=Resource())
    attr.deserved = Resource(8000, 2**30, {"pods": 4})
    attr.allocated = Resource(1000, 2**28, {"pods": 3})
    attr.update_share()
    assert attr.share == 0.75
