"""The Kubernetes CEL environment for DRA device selectors, on cel-python (``celpy``).

A selector sees ``device.driver``, ``device.attributes[domain][name]`` (attributes grouped by
domain, a name without one under the driver's), ``device.capacity[domain][name]`` (quantities)
and ``device.allowMultipleAllocations``, plus the Kubernetes library functions ``quantity()``
and ``semver()`` with their methods (``isGreaterThan``, ``isLessThan``, ``compareTo``, ``add``,
``sub``, ``asInteger``, ``asApproximateFloat``, ``isInteger``, ``sign``, ``major``, ``minor``,
``patch``). Each expression is compiled once and kept (``compile_selector``); a device's
activation is built once per allocation.

cel-python does not type-check at compile time, so a type error kube-scheduler reports when
compiling (e.g. an undeclared name) shows here as a runtime error of the first device evaluated.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import total_ordering
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.devices.dra.model import Device, DeviceAttribute

__all__ = [
    "CELError",
    "CompiledSelector",
    "compile_count",
    "compile_selector",
    "device_activation",
    "device_matches",
]


class _OnFirstUse:
    """Stands for the module ``celpy`` or ``celpy.celtypes`` until an attribute is asked
    for, then loads cel-python and puts the real modules in its place: importing cel-python and
    its parser costs a fifth of a second, which a scheduler with no DRA objects should not pay.
    """

    __slots__ = ("_attribute",)

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute

    def __getattr__(self, name: str) -> Any:
        _load()
        return getattr(globals()[self._attribute], name)


celpy: Any = _OnFirstUse("celpy")
celtypes: Any = _OnFirstUse("celtypes")


def _load() -> None:
    global celpy, celtypes
    celpy = importlib.import_module("celpy")
    celtypes = importlib.import_module("celpy.celtypes")


class CELError(Exception):
    """A selector that does not compile or fails at run time."""


_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@total_ordering
class Quantity:
    """A Kubernetes quantity value in CEL."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)


@total_ordering
class Semver:
    """A semantic version in CEL (precedence as semver 2.0.0, build metadata ignored)."""

    __slots__ = ("key", "major", "minor", "patch", "text")

    def __init__(self, text: str) -> None:
        match = _SEMVER.match(text)
        if match is None:
            raise CELError(f"invalid semver: {text}")
        self.text = text
        self.major, self.minor, self.patch = (int(match[i]) for i in (1, 2, 3))
        pre = match[4]
        pre_key: tuple[Any, ...] = (
            ((1,),)
            if pre is None
            else tuple((0, int(p), "") if p.isdigit() else (0, -1, p) for p in pre.split("."))
        )
        self.key = (self.major, self.minor, self.patch, pre is None, pre_key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.key == other.key

    def __lt__(self, other: Semver) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as exc:
        raise CELError(f"quantity: {exc}") from None


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _is_semver(text: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_SEMVER.match(str(text)) is not None)


def _compare(a: Any, b: Any) -> int:
    if type(a) is not type(b) or not isinstance(a, Quantity | Semver):
        raise CELError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")
    return 0 if a == b else (1 if b < a else -1)


def _as_integer(q: Quantity) -> celtypes.IntType:
    if q.value != q.value.to_integral_value() or abs(q.value) >= 2**63:
        raise CELError("cannot convert value to integer")
    return celtypes.IntType(int(q.value))


def _arith(sign: int):  # type: ignore[no-untyped-def]
    def op(q: Quantity, other: Any) -> Quantity:
        amount = other.value if isinstance(other, Quantity) else Decimal(int(other))
        return Quantity(q.value + sign * amount)

    return op


def _part(name: str):  # type: ignore[no-untyped-def]
    def get(v: Semver) -> celtypes.IntType:
        return celtypes.IntType(getattr(v, name))

    return get


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": lambda text: Semver(str(text)),
    "isSemver": _is_semver,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "add": _arith(1),
    "sub": _arith(-1),
    "asInteger": _as_integer,
    "isInteger": lambda q: celtypes.BoolType(
        q.value == q.value.to_integral_value() and abs(q.value) < 2**63
    ),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "includes": lambda values, item: celtypes.BoolType(item in values),
    "major": _part("major"),
    "minor": _part("minor"),
    "patch": _part("patch"),
}



@functools.cache
def _env() -> Any:
    """The CEL environment, made on the first compile: building its parser costs a third of a
    second, which a scheduler start with no DRA objects should not pay."""
    return celpy.Environment()


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: Any
    error: str = ""

    def matches(self, activation: Mapping[str, Any]) -> bool:
        """True/False for a device; raises :class:`CELError` at run time."""
        try:
            result = self.program.evaluate(activation)
        except celpy.CELEvalError as exc:
            raise CELError(_eval_text(exc)) from None
        except CELError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as exc:
            raise CELError(str(exc) or type(exc).__name__) from None
        if isinstance(result, celpy.CELEvalError):
            raise CELError(_eval_text(result))
        if not isinstance(result, celtypes.BoolType | bool):
            raise CELError(f"expression must evaluate to bool, got {type(result).__name__}")
        return bool(result)


def _eval_text(exc: Exception) -> str:
    args = exc.args
    return str(args[0]) if args else str(exc)


_CACHE: dict[str, CompiledSelector] = {}
_COMPILES = [0]


def compile_count() -> int:
    """How many expressions were compiled in this process (the cache's misses)."""
    return _COMPILES[0]


def compile_selector(expression: str) -> CompiledSelector:
    """The compiled program of an expression, compiled at most once per process."""
    cached = _CACHE.get(expression)
    if cached is not None:
        return cached
    _COMPILES[0] += 1
    try:
        env = _env()
        ast = env.compile(expression)
        compiled = CompiledSelector(expression, env.program(ast, functions=FUNCTIONS))
    except celpy.CELParseError as exc:
        compiled = CompiledSelector(expression, None, error=" ".join(str(exc).split()))
    except Exception as exc:
        compiled = CompiledSelector(expression, None, error=str(exc) or type(exc).__name__)
    if len(_CACHE) > 10_000:
        _CACHE.clear()
    _CACHE[expression] = compiled
    return compiled


@functools.cache
def _domain_map() -> Any:
    """The map type of attributes or capacity by domain: an unknown domain is an empty map, as
    in Kubernetes (made on first use, as it derives from a cel-python type)."""

    class DomainMap(celtypes.MapType):
        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    return DomainMap


def _attribute(attr: DeviceAttribute, list_types: bool) -> Any:
    def one(value: Any) -> Any:
        if attr.kind == "int":
            return celtypes.IntType(value)
        if attr.kind == "bool":
            return celtypes.BoolType(value)
        if attr.kind == "version":
            return Semver(value)
        return celtypes.StringType(value)

    if attr.is_list:
        return celtypes.ListType([one(v) for v in attr.values]) if list_types else None
    return one(attr.value)


def device_activation(device: Device, driver: str, *, list_types: bool = False) -> dict[str, Any]:
    """The ``device`` variable a selector sees for one device."""
    attributes: dict[Any, dict[Any, Any]] = {}
    for name, attr in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        try:
            value = _attribute(attr, list_types)
        except CELError:
            continue
        if value is not None:
            attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = (
                value
            )
    capacity: dict[Any, dict[Any, Any]] = {}
    for name, cap in device.capacity.items():
        domain, _, ident = (name if "/" in name else f"{driver}/{name}").rpartition("/")
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = Quantity(
            cap.value
        )
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(driver),
                celtypes.StringType("attributes"): _domain_map()(
                    {k: celtypes.MapType(v) for k, v in attributes.items()}
                ),
                celtypes.StringType("capacity"): _domain_map()(
                    {k: celtypes.MapType(v) for k, v in capacity.items()}
                ),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                    device.allow_multiple_allocations
                ),
            }
        )
    }


_LIMIT = 100_000
_SIGNATURES: dict[int, tuple[Device, tuple[object, ...]]] = {}
_RESULTS: dict[tuple[str, tuple[object, ...]], bool | str] = {}


def _signature(device: Device, driver: str, list_types: bool) -> tuple[object, ...]:
    """What a selector can see of a device: devices with the same signature match alike."""
    hit = _SIGNATURES.get(id(device))
    if hit is not None and hit[0] is device and hit[1][0] == driver and hit[1][1] == list_types:
        return hit[1]
    signature = (
        driver,
        list_types,
        device.allow_multiple_allocations,
        tuple(sorted((k, a.kind, a.values, a.is_list) for k, a in device.attributes.items())),
        tuple(sorted((k, c.value) for k, c in device.capacity.items())),
    )
    if len(_SIGNATURES) > _LIMIT:
        _SIGNATURES.clear()
    _SIGNATURES[id(device)] = (device, signature)
    return signature


def device_matches(
    compiled: CompiledSelector, device: Device, driver: str, *, list_types: bool
) -> bool:
    """``compiled`` on a device, evaluated once per distinct device content (driver,
    attributes, capacity, allowMultipleAllocations): identical devices share the result, a
    runtime error included. Raises :class:`CELError`."""
    key = (compiled.expression, _signature(device, driver, list_types))
    known = _RESULTS.get(key)
    if known is None:
        try:
            known = compiled.matches(device_activation(device, driver, list_types=list_types))
        except CELError as exc:
            known = str(exc)
        if len(_RESULTS) > _LIMIT:
            _RESULTS.clear()
        _RESULTS[key] = known
    if isinstance(known, str):
        raise CELError(known)
    return known
