"""Resource quantities and the scheduler's resource vector.

Kubernetes quantities (``500m``, ``1.5``, ``16Gi``, ``1e3``, ``2k``) are parsed once into floats:
cpu in milli-cores, memory in bytes, ``pods`` as a plain count and every other (extended)
resource in milli-units, exactly as Volcano's ``Resource`` keeps them. Comparisons use
Volcano's absolute tolerance of 0.1 so that float noise never decides a placement.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import Enum
from functools import lru_cache

__all__ = [
    "CPU",
    "MEMORY",
    "MIN_RESOURCE",
    "PODS",
    "UNLIMITED",
    "Default",
    "QuantityError",
    "Resource",
    "format_quantity",
    "parse_quantity",
    "resource_from_list",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
MIN_RESOURCE = 0.1
"""Absolute tolerance for every comparison (Volcano's ``minResource``)."""
UNLIMITED = sys.float_info.max
"""The value of a dimension that has no limit (Volcano's ``math.MaxFloat64``); finite, so that
arithmetic on it never yields NaN."""

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(\d+(\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)
# Resource names whose values count as quota keys rather than schedulable resources.
_QUOTA_PREFIXES = ("requests.", "limits.", "count/")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short: a hostile value can be megabytes long."""
    return repr(text) if len(text) <= 40 else f"{text[:30]!r}... ({len(text)} characters)"


@lru_cache(maxsize=8192)
def _parse(text: str) -> Decimal:
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(
            f"{_shown(text)} is not a valid quantity (examples: 500m, 2, 1.5, 16Gi, 1e3)")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only digits
        raise QuantityError(f"bad quantity {text!r}") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= _DECIMAL[suffix]
    else:  # exponent form, e.g. 1e3; an exponent past a float's range is refused by _scaled
        exponent = suffix[1:].lstrip("+")
        if len(exponent.lstrip("-0")) > 4:
            raise QuantityError(f"{_shown(text)}: exponent out of range")
        number = number.scaleb(int(exponent))
    return -number if match["sign"] == "-" else number


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity into its exact base-unit value.

    Raises :class:`QuantityError` for anything Kubernetes would reject.
    """
    if isinstance(value, bool):
        raise QuantityError(f"bad quantity {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        # YAML's .inf and .nan, or a number past a float (1e400): JSON has no such number,
        # so the API server never sees one
        raise QuantityError(f"{value!r} is not a finite number")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"bad quantity {value!r}")
    return _parse(value)


def _scaled(name: str, value: str | int | float) -> float:
    """A quantity in the unit the scheduler keeps for ``name`` (quantity strings are parsed
    through :func:`_parse`'s cache)."""
    quantity = parse_quantity(value)
    scaled = float(quantity) if name in (MEMORY, PODS) else float(quantity * 1000)
    if not math.isfinite(scaled) or abs(scaled) >= UNLIMITED:
        shown = _shown(value) if isinstance(value, str) else repr(value)
        raise QuantityError(f"{shown} is too large (more than {UNLIMITED:.3g})")
    return scaled


_BYTE_SCALARS = frozenset({"ephemeral-storage", "koordinator.sh/gpu-memory",
                           "kubernetes.io/gpu-memory"})
"""Scalar resources counted in bytes (kept in milli-bytes like every scalar)."""


def _format_bytes(value: float) -> str:
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= factor and value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return str(int(value))


_EXACT = float(2**53)
"""Past this a float no longer holds every whole number: digits would be float noise."""


def _exponent(value: float) -> str:
    """A quantity in decimal-exponent form (``1e23``, ``1.5e18``), as the API accepts it."""
    mantissa, _, exponent = f"{value:.6g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def format_quantity(name: str, value: float) -> str:
    """Render a stored value back as a short, kubectl-style quantity (a huge one in
    decimal-exponent form: ``1e23``, not the float's noise)."""
    if abs(value) >= _EXACT:
        whole = name in (MEMORY, PODS)
        return _exponent(value if whole else value / 1000)
    if name == MEMORY:
        return _format_bytes(value)
    if (name in _BYTE_SCALARS or name.startswith("hugepages-")) and value % 1000 == 0:
        return _format_bytes(value // 1000)
    if name == PODS:
        return str(int(value))
    if value % 1000 == 0:
        return str(int(value // 1000))
    return f"{round(value)}m"


class Default(Enum):
    """How a dimension missing on the right of a comparison is treated."""

    ZERO = 0
    INFINITY = 1


@dataclass(slots=True)
class Resource:
    """A resource vector: cpu (milli), memory (bytes) and scalar resources (milli; pods: count)."""

    milli_cpu: float = 0.0
    memory: float = 0.0
    scalars: dict[str, float] = field(default_factory=dict)

    # -- construction -------------------------------------------------------------------
    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, dict(self.scalars))

    def get(self, name: str) -> float:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        return self.scalars.get(name, 0.0)

    def set(self, name: str, value: float) -> None:
        if name == CPU:
            self.milli_cpu = value
        elif name == MEMORY:
            self.memory = value
        else:
            self.scalars[name] = value

    def names(self) -> list[str]:
        """Dimensions present, cpu and memory first, then scalars sorted."""
        return [CPU, MEMORY, *sorted(self.scalars)]

    def resource_names(self) -> list[str]:
        """Dimensions holding at least the tolerance, ``pods`` included (Volcano's
        ``ResourceNames``): the dimensions shares are computed over."""
        return [name for name in self.names() if self.get(name) >= MIN_RESOURCE]

    # -- arithmetic (in place, returning self for chaining) -------------------------------
    def add(self, other: Resource) -> Resource:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + value
        return self

    def sub(self, other: Resource) -> Resource:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) - value
        return self

    def multi(self, ratio: float) -> Resource:
        self.milli_cpu *= ratio
        self.memory *= ratio
        for name in self.scalars:
            self.scalars[name] *= ratio
        return self

    def set_max(self, other: Resource) -> Resource:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        for name, value in other.scalars.items():
            self.scalars[name] = max(self.scalars.get(name, 0.0), value)
        return self

    def __add__(self, other: Resource) -> Resource:
        return self.clone().add(other)

    def __sub__(self, other: Resource) -> Resource:
        return self.clone().sub(other)

    # -- comparisons ----------------------------------------------------------------------
    def is_empty(self) -> bool:
        """True when every dimension except ``pods`` is below the tolerance."""
        if self.milli_cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(value < MIN_RESOURCE for name, value in self.scalars.items() if name != PODS)

    def is_zero(self, name: str) -> bool:
        return self.get(name) < MIN_RESOURCE

    def less_equal(self, other: Resource, default: Default = Default.ZERO) -> bool:
        """Every dimension of ``self`` fits in ``other``, within the tolerance.

        A scalar missing on one side counts as 0 (``Default.ZERO``) or as unlimited
        (``Default.INFINITY``) on that side, as Volcano's ``Resource.LessEqual``: with
        ``INFINITY`` a scalar only ``other`` names makes ``self`` larger, so the answer is no.
        """
        if not _le(self.milli_cpu, other.milli_cpu) or not _le(self.memory, other.memory):
            return False
        if default is Default.INFINITY and any(n not in self.scalars for n in other.scalars):
            return False
        for name, value in self.scalars.items():
            if value < MIN_RESOURCE:
                continue
            if name not in other.scalars:
                if default is Default.INFINITY:
                    continue
                return False
            if not _le(value, other.scalars[name]):
                return False
        return True

    def less_equal_with_dimension(self, other: Resource, dims: Iterable[str]) -> bool:
        """Compare only the named dimensions."""
        return all(_le(self.get(name), other.get(name)) for name in dims)

    def exceeding_on(self, limit: Resource, request: Resource) -> list[str]:
        """The dimensions ``request`` asks for (> 0; never ``pods``) on which ``self`` is above
        ``limit``; empty when ``self`` fits. A scalar ``limit`` does not name counts as 0.

        Volcano's ``LessEqualWithDimensionAndResourcesName``, the check behind queue
        allocatable and enqueue quotas: a strict comparison, without the tolerance.
        """
        names: list[str] = []
        if request.milli_cpu > 0 and self.milli_cpu > limit.milli_cpu:
            names.append(CPU)
        if request.memory > 0 and self.memory > limit.memory:
            names.append(MEMORY)
        if not self.scalars:
            return names
        for name in sorted(request.scalars):
            if name == PODS or request.scalars[name] <= 0:
                continue
            if self.scalars.get(name, 0.0) > limit.scalars.get(name, 0.0):
                names.append(name)
        return names

    def first_insufficient(
        self, available: Resource, *, skip: Iterable[str] = (PODS,)
    ) -> str | None:
        """The first dimension this request does not fit in ``available`` (cpu, memory, scalars)."""
        skipped = set(skip)
        if self.milli_cpu >= MIN_RESOURCE and not _le(self.milli_cpu, available.milli_cpu):
            return CPU
        if self.memory >= MIN_RESOURCE and not _le(self.memory, available.memory):
            return MEMORY
        for name in sorted(self.scalars):
            value = self.scalars[name]
            if name in skipped or value < MIN_RESOURCE:
                continue
            if not _le(value, available.scalars.get(name, 0.0)):
                return name
        return None

    def min_dimension(self, other: Resource, default: Default) -> Resource:
        """Per dimension of ``self``, the smaller of both; a dimension missing from ``other``
        becomes 0 (``Default.ZERO``) or stays as is (``Default.INFINITY``)."""
        self.milli_cpu = min(self.milli_cpu, other.milli_cpu)
        self.memory = min(self.memory, other.memory)
        for name, value in self.scalars.items():
            if name in other.scalars:
                self.scalars[name] = min(value, other.scalars[name])
            elif default is Default.ZERO:
                self.scalars[name] = 0.0
        return self

    def equal(self, other: Resource) -> bool:
        """Equal within the tolerance on every dimension of either side."""
        return all(
            abs(self.get(n) - other.get(n)) < MIN_RESOURCE
            for n in set(self.names()) | set(other.names())
        )

    def without(self, name: str) -> Resource:
        """A copy without scalar ``name`` (e.g. ``pods`` for share arithmetic)."""
        copy = self.clone()
        copy.scalars.pop(name, None)
        return copy

    def exceeded_part(self, other: Resource) -> Resource:
        """``max(self - other, 0)`` per dimension (Volcano's ``ExceededPart``).

        A scalar of either side that is not strictly larger in ``self`` is left out of the
        result rather than kept as 0: a later ``min_dimension(..., Default.INFINITY)`` then
        treats it as unlimited, exactly as Volcano does.
        """
        out = Resource(
            max(self.milli_cpu - other.milli_cpu, 0.0), max(self.memory - other.memory, 0.0)
        )
        for name, value in self.scalars.items():
            if value > other.scalars.get(name, 0.0):
                out.scalars[name] = value - other.scalars.get(name, 0.0)
        for name, value in other.scalars.items():
            if name not in self.scalars and value < 0.0:
                out.scalars[name] = -value
        return out

    # -- presentation ---------------------------------------------------------------------
    def to_quantities(self, *, include_pods: bool = False) -> dict[str, str]:
        """A ResourceList-style mapping for status fields and tables."""
        out = {
            CPU: format_quantity(CPU, self.milli_cpu),
            MEMORY: format_quantity(MEMORY, self.memory),
        }
        for name in sorted(self.scalars):
            if name == PODS and not include_pods:
                continue
            out[name] = format_quantity(name, self.scalars[name])
        return out

    def __str__(self) -> str:
        parts = [f"cpu {self.milli_cpu:.2f}", f"memory {self.memory:.2f}"]
        parts += [f"{name} {value:.2f}" for name, value in sorted(self.scalars.items())]
        return ", ".join(parts)


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


def resource_from_list(
    values: Mapping[str, object] | None,
    *,
    ignored: frozenset[str] | set[str] = frozenset(),
) -> Resource:
    """Build a :class:`Resource` from a Kubernetes ResourceList.

    Quota-style names and ``ignored`` names (device resources accounted by device families)
    are dropped. Raises :class:`QuantityError` naming the resource on a bad or negative
    quantity.
    """
    out = Resource()
    if not values:
        return out
    for name, raw in values.items():
        if name.startswith(_QUOTA_PREFIXES) or name in ignored:
            continue
        try:
            value = _scaled(name, raw)  # type: ignore[arg-type]
        except QuantityError as exc:
            raise QuantityError(f"resource {name!r}: {exc}") from None
        if value < 0:  # the API server rejects negative requests, limits and capacities
            raise QuantityError(f"resource {name!r}: {raw!r} must be greater than or equal to 0")
        if name == CPU:
            out.milli_cpu = value
        elif name == MEMORY:
            out.memory = value
        else:
            out.scalars[name] = value
    return out
