"""Non-finite and absurd quantities are refused at load, naming the field, and proportion's
deserved-share loop ends whatever it is given.

JSON has no infinity or NaN, so the API server never holds ``cpu: .inf``; a quantity string
whose value is past what the scheduler's float arithmetic holds (``1e400``) would overflow
``Quantity.MilliValue`` (apimachinery pkg/api/resource/quantity.go ``ParseQuantity``,
``ScaledValue``). proportion's water-filling is Volcano's (plugins/proportion/proportion.go
``OnSessionOpen``: the ``for`` loop broken when remaining is empty or unchanged), which a NaN
would never break.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from plugins.proportion import QueueAttr, compute_deserved
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import QuantityError, Resource, parse_quantity, resource_from_list
from scheduler.api.types import QueueID

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"
FIELD = "Pod default/p1: field spec.containers[0].resources: resource 'cpu': "


@pytest.mark.parametrize(("name", "why"), [
    ("cpu-inf.yaml", "inf is not a finite number"),
    ("cpu-nan.yaml", "nan is not a finite number"),
    ("cpu-1e400.yaml", "'1e400' is too large (more than 1.8e+308)"),
])
def test_simulate_refuses_a_non_finite_cpu_naming_the_field(name: str, why: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", f"{BAD}/{name}"], cwd=REPO,
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout[-500:]
    assert result.stderr.splitlines()[-1] == f"error: {BAD}/{name}#2: {FIELD}{why}"


@pytest.mark.parametrize("value", [
    math.inf, -math.inf, math.nan, "1e400", "1e308k", "1e99999999", "9" * 400, "1e" + "9" * 5000,
], ids=["inf", "-inf", "nan", "1e400", "1e308k", "huge-exponent", "400-digits", "5000-digits"])
def test_resource_lists_refuse_values_past_a_float(value: object) -> None:
    with pytest.raises(QuantityError, match=r"^resource 'memory': ") as error:
        resource_from_list({"memory": value})
    assert len(str(error.value)) < 120


def test_large_finite_quantities_still_load() -> None:
    assert resource_from_list({"cpu": "1e23"}).milli_cpu == 1e26
    assert parse_quantity("1e-3") == parse_quantity("1m")


def _attr(name: str, request: Resource) -> QueueAttr:
    return QueueAttr(queue=QueueInfo(uid=QueueID(name), name=name, weight=1), weight=1,
                     request=request, real_capability=Resource(1e12, 1e15))


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
def test_deserved_share_loop_ends_on_any_input(value: float) -> None:
    attrs = [_attr("a", Resource(value, 0)), _attr("b", Resource(1000, 0))]
    worker = threading.Thread(
        target=compute_deserved, args=(attrs, Resource(value, 1e9)), daemon=True)
    worker.start()
    worker.join(timeout=2)
    assert not worker.is_alive()
