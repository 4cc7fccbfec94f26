"""What the scheduler reads from a Pod, extracted once per pod version.

``PodSpecInfo`` is frozen and shared between task clones, so copying a task for a snapshot
never re-parses selectors, affinity, tolerations or quantities. Its ``signature`` groups pods
whose static node constraints are identical, so per-signature node masks can be reused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a declared dependency; repr keys then
    _orjson = None  # type: ignore[assignment]

from scheduler.api.errors import ObjectError
from scheduler.api.podterms import EMPTY_TERMS, PodTerms, parse_pod_terms
from scheduler.api.resource import PODS, QuantityError, Resource, resource_from_list

__all__ = [
    "HostPort",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ParsedPod",
    "PodParseMemo",
    "PodSpecInfo",
    "PreferredTerm",
    "Toleration",
    "parse_pod_spec",
    "pod_requests",
]


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...]
    field: bool = False
    """True for ``matchFields`` (only ``metadata.name`` is supported by Kubernetes)."""


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    requirements: tuple[NodeSelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if not self.key and self.operator != "Exists":
            return False
        if self.operator == "Exists":
            return True
        return self.value == value


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    port: int
    ip: str


@dataclass(frozen=True, slots=True)
class PodSpecInfo:
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    terms: PodTerms = EMPTY_TERMS
    """Labels, inter-pod (anti-)affinity, topology spread and images (pod-to-pod relations)."""

    @property
    def signature(self) -> tuple[object, ...]:
        """Key under which static node masks for this spec may be shared."""
        return (self.node_selector, self.required_terms, self.tolerations)


_VALID_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


def _term(raw: Mapping[str, Any], where: str, err: _Err) -> NodeSelectorTerm:
    requirements: list[NodeSelectorRequirement] = []
    for kind, is_field in (("matchExpressions", False), ("matchFields", True)):
        for i, expr in enumerate(raw.get(kind) or []):
            path = f"{where}.{kind}[{i}]"
            if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
                raise err(path + ".key", "must be a string")
            operator = expr.get("operator")
            if operator not in _VALID_OPERATORS:
                raise err(path + ".operator", f"unsupported operator {operator!r}")
            values = expr.get("values") or []
            if not isinstance(values, list):
                raise err(path + ".values", "must be a list of strings")
            requirements.append(
                NodeSelectorRequirement(
                    expr["key"], operator, tuple(str(v) for v in values), is_field
                )
            )
    return NodeSelectorTerm(tuple(requirements))


class _Err:
    def __init__(self, name: str, namespace: str) -> None:
        self.name = name
        self.namespace = namespace

    def __call__(self, field: str, problem: str) -> ObjectError:
        return ObjectError(
            kind="Pod", name=self.name, namespace=self.namespace, field=field, problem=problem
        )


def parse_pod_spec(pod: Mapping[str, Any]) -> PodSpecInfo:
    """Extract the static scheduling constraints of a pod; raises :class:`ObjectError`."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    err = _Err(str(meta.get("name", "")), str(meta.get("namespace") or "default"))
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise err("spec.nodeSelector", "must be a map of strings")
    node_affinity = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    required_terms = tuple(
        _term(t or {}, f"spec.affinity.nodeAffinity.required.nodeSelectorTerms[{i}]", err)
        for i, t in enumerate(required.get("nodeSelectorTerms") or [])
    )
    preferred_terms = []
    for i, entry in enumerate(
        node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ):
        where = f"spec.affinity.nodeAffinity.preferred[{i}]"
        weight = (entry or {}).get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise err(where + ".weight", "must be an integer")
        preferred_terms.append(
            PreferredTerm(weight, _term(entry.get("preference") or {}, where, err))
        )
    tolerations = []
    for i, tol in enumerate(spec.get("tolerations") or []):
        if not isinstance(tol, Mapping):
            raise err(f"spec.tolerations[{i}]", "must be an object")
        tolerations.append(
            Toleration(
                str(tol.get("key") or ""),
                str(tol.get("operator") or "Equal"),
                str(tol.get("value") or ""),
                str(tol.get("effect") or ""),
            )
        )
    ports = []
    for c_i, container in enumerate(spec.get("containers") or []):
        for p_i, port in enumerate((container or {}).get("ports") or []):
            host_port = (port or {}).get("hostPort")
            if not host_port:
                continue
            if not isinstance(host_port, int):
                raise err(f"spec.containers[{c_i}].ports[{p_i}].hostPort", "must be an integer")
            ports.append(
                HostPort(
                    str(port.get("protocol") or "TCP"),
                    host_port,
                    str(port.get("hostIP") or "0.0.0.0"),
                )
            )
    return PodSpecInfo(
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        required_terms=required_terms,
        preferred_terms=tuple(preferred_terms),
        tolerations=tuple(tolerations),
        host_ports=tuple(ports),
        terms=parse_pod_terms(pod, err),
    )


def _container_request(container: Mapping[str, Any], ignored: frozenset[str]) -> Resource:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = dict(limits)  # the API server defaults a missing request to its limit
    requests.update(resources.get("requests") or {})
    return resource_from_list(requests, ignored=ignored)


def pod_requests(
    pod: Mapping[str, Any],
    *,
    ignored: frozenset[str] = frozenset(),
    notes: list[str] | None = None,
) -> tuple[Resource, Resource]:
    """``(resreq, init_resreq)`` of a pod, each including ``pods: 1``.

    ``resreq`` sums the app containers (and restartable init containers, i.e. sidecars);
    ``init_resreq`` is the max of that and the largest plain init container, plus overhead.
    Raises :class:`ObjectError` on an unreadable request; with ``notes`` (a bound pod, whose
    usage must be kept), an unreadable entry is left out instead and named in ``notes``.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    err = _Err(str(meta.get("name", "")), str(meta.get("namespace") or "default"))
    total = Resource()
    for i, container in enumerate(spec.get("containers") or []):
        where = f"spec.containers[{i}].resources"
        total.add(_checked(container, ignored, err, where, notes))
    largest_init = Resource()
    sidecars = Resource()
    for i, container in enumerate(spec.get("initContainers") or []):
        where = f"spec.initContainers[{i}].resources"
        request = _checked(container, ignored, err, where, notes)
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            sidecars.add(request)
        else:
            largest_init.set_max(request.clone().add(sidecars))
    total.add(sidecars)
    init = total.clone().set_max(largest_init)
    overhead = spec.get("overhead")
    if overhead:
        extra = _resources(overhead, ignored, err, "spec.overhead", notes)
        total.add(extra)
        init.add(extra)
    total.scalars[PODS] = 1.0
    init.scalars[PODS] = 1.0
    return total, init


def _resources(values: Any, ignored: frozenset[str], err: _Err, where: str,
               notes: list[str] | None) -> Resource:
    """One ResourceList; with ``notes``, each unreadable entry is skipped and noted."""
    if not isinstance(values, Mapping):
        if notes is None:
            raise err(where, "must be a map")
        notes.append(f"field {where}: must be a map; left out")
        return Resource()
    try:
        return resource_from_list(values, ignored=ignored)
    except QuantityError as exc:
        if notes is None:
            raise err(where, str(exc)) from None
    out = Resource()
    for name, raw in values.items():
        try:
            out.add(resource_from_list({name: raw}, ignored=ignored))
        except QuantityError as exc:
            notes.append(f"field {where}: {exc}; left out")
    return out


def _checked(container: Any, ignored: frozenset[str], err: _Err, where: str,
             notes: list[str] | None = None) -> Resource:
    if not isinstance(container, Mapping):
        if notes is None:
            raise err(where, "container must be an object")
        notes.append(f"field {where}: container must be an object; left out")
        return Resource()
    if notes is None:
        try:
            return _container_request(container, ignored)
        except QuantityError as exc:
            raise err(where, str(exc)) from None
        except AttributeError:
            raise err(where, "requests and limits must be maps") from None
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        notes.append(f"field {where}: must be a map; left out")
        return Resource()
    limits, requests = resources.get("limits"), resources.get("requests")
    merged: dict[str, Any] = {}
    for part, values in (("limits", limits), ("requests", requests)):
        if values is None:
            continue
        if not isinstance(values, Mapping):
            notes.append(f"field {where}.{part}: must be a map; left out")
            continue
        merged.update(values)  # the API server defaults a missing request to its limit
    return _resources(merged, ignored, err, where, notes)


ParsedPod = tuple[Resource, Resource, PodSpecInfo]
MemoKey = tuple[frozenset[str], bytes | str]
_ADDRESS = " object at 0x"
"""``(resreq, init_resreq, spec)``: what :func:`pod_requests` and :func:`parse_pod_spec` give."""


class PodParseMemo:
    """The parsed requests and constraints of each distinct pod spec seen, to reuse them.

    A pod is parsed again on every update (a bind, a phase change, a status condition) although
    those never touch what is parsed here, and the pods of one job usually share one spec. The
    key is every field the two parsers read, written out in full, so a hit returns exactly what
    parsing would; only successful parses are kept, so errors are still raised by the parsers,
    with the pod's own name. The results are shared: :class:`Resource` values of tasks are never
    changed in place. Past ``limit`` entries the memo starts afresh.

    The fields are written by orjson where it can (about a third of what ``repr`` costs on an
    API server's pod, whose containers, volumes and tolerations make the key long): its JSON
    tells ``1`` from ``1.0``, ``"1"`` and ``true`` as ``repr`` does, and it refuses what it
    cannot write exactly (keys other than strings, integers past 64 bits, other types). Its
    ``null`` also stands for NaN and infinities, so a key with any ``null`` other than those of
    absent fields is taken from ``repr`` instead; keys of the two kinds (bytes and str) never
    meet. A tuple is written as a list: only objects built in this process can hold one, and
    none does.
    """

    __slots__ = ("_parsed", "limit")

    def __init__(self, *, limit: int = 65_536) -> None:
        self._parsed: dict[MemoKey, ParsedPod] = {}
        self.limit = limit

    def __len__(self) -> int:
        return len(self._parsed)

    @staticmethod
    def key(pod: Mapping[str, Any], ignored: frozenset[str]) -> MemoKey:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        get = spec.get
        fields = (
            meta.get("namespace"),
            meta.get("labels"),
            bool(meta.get("deletionTimestamp")),
            get("containers"),
            get("initContainers"),
            get("overhead"),
            get("nodeSelector"),
            get("affinity"),
            get("tolerations"),
            get("topologySpreadConstraints"),
        )
        if _orjson is not None:
            try:
                text = _orjson.dumps(fields)
            except TypeError:
                pass
            else:
                # null also stands for NaN and infinities: only absent fields may write it
                if text.count(b"null") == sum(field is None for field in fields):
                    return ignored, text
        return ignored, repr(fields)

    def get(self, key: MemoKey) -> ParsedPod | None:
        return self._parsed.get(key)

    def put(self, key: MemoKey, parsed: ParsedPod) -> None:
        if isinstance(key[1], str) and _ADDRESS in key[1]:
            return  # an object shown by its address: a later one may reuse that address
        if len(self._parsed) >= self.limit:
            self._parsed = {}
        self._parsed[key] = parsed


def first_present(values: Sequence[str | None]) -> str | None:
    return next((v for v in values if v), None)
