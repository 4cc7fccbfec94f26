from decimal import Decimal

import pytest

from scheduler.api.resource import (
    Default,
    QuantityError,
    Resource,
    format_quantity,
    parse_quantity,
    resource_from_list,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1e3", Decimal(1000)),
        ("2k", Decimal(2000)),
        ("100Mi", Decimal(100 * 2**20)),
        ("0", Decimal(0)),
        (".5", Decimal("0.5")),
        ("3M", Decimal(3_000_000)),
        ("1E2", Decimal(100)),
        (4, Decimal(4)),
        ("+2", Decimal(2)),
    ],
)
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "1Zi", "--1", True, None])
def test_bad_quantities_are_rejected(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)  # type: ignore[arg-type]


def test_resource_units() -> None:
    r = resource_from_list(
        {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2", "pods": "110", "requests.cpu": "4"}
    )
    assert r.milli_cpu == 1500
    assert r.memory == 2**30
    assert r.scalars == {"nvidia.com/gpu": 2000, "pods": 110}


def test_bad_quantity_names_the_resource() -> None:
    with pytest.raises(QuantityError, match="'memory'"):
        resource_from_list({"memory": "lots"})


def test_tolerance_and_defaults() -> None:
    small = Resource(1000.05, 10)
    assert small.less_equal(Resource(1000, 10))
    assert not Resource(1000.2, 0).less_equal(Resource(1000, 0))
    gpu = Resource(0, 0, {"nvidia.com/gpu": 1000})
    assert not gpu.less_equal(Resource(1000, 10), Default.ZERO)
    assert gpu.less_equal(Resource(1000, 10), Default.INFINITY)


def test_first_insufficient_names_cpu_then_memory_then_scalars() -> None:
    request = Resource(2000, 4 * 2**30, {"b.io/x": 1000, "a.io/y": 1000, "pods": 1})
    assert request.first_insufficient(Resource(1000, 0)) == "cpu"
    assert request.first_insufficient(Resource(4000, 0)) == "memory"
    assert request.first_insufficient(Resource(4000, 8 * 2**30, {"b.io/x": 1000})) == "a.io/y"
    assert (
        request.first_insufficient(Resource(4000, 8 * 2**30, {"b.io/x": 1000, "a.io/y": 1000}))
        is None
    )


def test_is_empty_ignores_pods_and_min_dimension() -> None:
    assert Resource(0, 0, {"pods": 1}).is_empty()
    capped = Resource(4000, 100, {"x": 5}).min_dimension(Resource(1000, 200), Default.ZERO)
    assert (capped.milli_cpu, capped.memory, capped.scalars["x"]) == (1000, 100, 0)
    kept = Resource(4000, 100, {"x": 5}).min_dimension(Resource(1000, 200), Default.INFINITY)
    assert kept.scalars["x"] == 5


def test_format_quantity_round_trips_common_values() -> None:
    assert format_quantity("cpu", 1500) == "1500m"
    assert format_quantity("cpu", 2000) == "2"
    assert format_quantity("memory", 2**31) == "2Gi"
    assert format_quantity("nvidia.com/gpu", 4000) == "4"


def test_byte_valued_scalars_render_with_binary_suffixes() -> None:
    """GPU memory and ephemeral storage are bytes like memory (kept in milli-bytes as every
    scalar), so the table and status.allocated show ``20Gi``, not ``21474836480``."""
    from scheduler.api.resource import format_quantity

    assert format_quantity("koordinator.sh/gpu-memory", 20 * 2**30 * 1000) == "20Gi"
    assert format_quantity("ephemeral-storage", 512 * 2**20 * 1000) == "512Mi"
    assert format_quantity("hugepages-2Mi", 4 * 2**20 * 1000) == "4Mi"
    assert format_quantity("nvidia.com/gpu", 2000) == "2"
