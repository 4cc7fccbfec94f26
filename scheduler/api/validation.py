"""What the Kubernetes API server refuses of an object, checked before Lahar takes it in.

A manifest given to ``lahar simulate`` never went through an API server, so what the server's
validation would have refused is refused here the same way, with the server's wording where it
has one: object names (``k8s.io/apimachinery/pkg/util/validation``: ``IsDNS1123Subdomain``,
``IsDNS1123Label``), a pod without containers and ``int32`` fields out of range
(``pkg/apis/core/validation``, the CRDs' ``format: int32``), and a field of the wrong type where
the parsers read it (a string where a map belongs: the server cannot even decode such an
object); labels, annotations and containers are :mod:`scheduler.api.validation_meta`'s. The
parsers in this package read what the scheduler needs; these checks are only for
objects that did not come from a server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.api.errors import ObjectError, shown
from scheduler.api.validation_meta import containers_problem, metadata_problem

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "LABEL_MAX_LENGTH",
    "SUBDOMAIN_MAX_LENGTH",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "int32_problem",
    "validate_object",
]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
LABEL_MAX_LENGTH = 63
SUBDOMAIN_MAX_LENGTH = 253

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + ")*"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)
_LABEL_HELP = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"
)
_SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com')"
)

_Err = Callable[[str, str], ObjectError]
_NAMESPACED = frozenset({"Pod", "PodGroup"})
_LABEL_NAMED = frozenset({"Namespace"})


def dns1123_label_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label (a namespace name), or None when it is one."""
    if len(value) > LABEL_MAX_LENGTH:
        return f"must be no more than {LABEL_MAX_LENGTH} characters"
    if not _LABEL_RE.fullmatch(value):
        return _LABEL_HELP
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (most object names), or None when it is."""
    if len(value) > SUBDOMAIN_MAX_LENGTH:
        return f"must be no more than {SUBDOMAIN_MAX_LENGTH} characters"
    if not _SUBDOMAIN_RE.fullmatch(value):
        return _SUBDOMAIN_HELP
    return None


def int32_problem(value: object, *, minimum: int = INT32_MIN) -> str | None:
    """Why ``value`` cannot be an ``int32`` field at least ``minimum``, or None when it can."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, got {value!r}"
    if value < minimum:
        return f"must be greater than or equal to {minimum}, got {value}"
    if value > INT32_MAX:
        return f"must be an int32 (at most {INT32_MAX}), got {value}"
    return None


def validate_object(kind: str, obj: Mapping[str, Any]) -> None:
    """Raise :class:`ObjectError` for what the API server would refuse of ``obj``.

    ``metadata.name`` must be a string already; the fields the parsers check (quantities,
    selectors, ...) are theirs. Checked here: the name, the namespace, and per kind the
    fields below.
    """
    meta = obj.get("metadata") or {}
    name = str(meta["name"])
    namespace = ""
    if kind in _NAMESPACED:
        raw_namespace = meta.get("namespace")
        namespace = "default" if raw_namespace in (None, "") else str(raw_namespace)

    def err(field: str, problem: str) -> ObjectError:
        return ObjectError(kind=kind, name=name, namespace=namespace, field=field, problem=problem)

    name_problem = (dns1123_label_problem if kind in _LABEL_NAMED
                    else dns1123_subdomain_problem)(name)
    if name_problem is not None:
        raise err("metadata.name", f"Invalid value {shown(name)}: {name_problem}")
    if kind in _NAMESPACED:
        raw_namespace = meta.get("namespace")
        if raw_namespace is not None and not isinstance(raw_namespace, str):
            raise err("metadata.namespace", f"must be a string, got {raw_namespace!r}")
        namespace_problem = dns1123_label_problem(namespace)
        if namespace_problem is not None:
            raise err("metadata.namespace",
                      f"Invalid value {shown(namespace)}: {namespace_problem}")
    _check_shapes(obj, _SHAPES.get(kind, _COMMON_SHAPES), "", err)
    problem = metadata_problem(meta)
    if problem is not None:
        raise err(*problem)
    check = _BY_KIND.get(kind)
    if check is not None:
        check(obj, err)


_COMMON = {
    "metadata": dict, "spec": dict, "status": dict, "metadata.uid": str,
    "metadata.ownerReferences": list, "metadata.ownerReferences[*]": dict,
}
_CONTAINERS = {
    f"spec.{containers}{path}": expected
    for containers in ("containers", "initContainers")
    for path, expected in (
        ("", list), ("[*]", dict), ("[*].resources", dict), ("[*].resources.requests", dict),
        ("[*].resources.limits", dict), ("[*].ports", list), ("[*].ports[*]", dict),
    )
}
_NODE_AFFINITY = "spec.affinity.nodeAffinity"
_SHAPE_TEXT: dict[str, dict[str, type]] = {
    "Node": {
        **_COMMON, "spec.taints": list, "spec.taints[*]": dict, "status.capacity": dict,
        "status.allocatable": dict, "status.conditions": list,
    },
    "Pod": {
        **_COMMON, **_CONTAINERS, "spec.overhead": dict, "spec.nodeSelector": dict,
        "spec.affinity": dict, _NODE_AFFINITY: dict,
        f"{_NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution": dict,
        f"{_NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms":
            list,
        f"{_NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution": list,
        f"{_NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution[*]": dict,
        "spec.tolerations": list, "spec.schedulingGates": list,
        "spec.topologySpreadConstraints": list, "spec.schedulerName": str,
        "spec.nodeName": str, "spec.priorityClassName": str, "status.phase": str,
        "status.nominatedNodeName": str, "status.conditions": list,
    },
    "PodGroup": {
        **_COMMON, "spec.minTaskMember": dict, "spec.minResources": dict, "spec.queue": str,
        "spec.priorityClassName": str, "status.phase": str,
        "status.conditions": list, "status.running": int, "status.succeeded": int,
        "status.failed": int,
    },
    "Queue": {
        **_COMMON, "spec.capability": dict, "spec.deserved": dict, "spec.guarantee": dict,
        "spec.guarantee.resource": dict, "spec.parent": str, "status.allocated": dict,
        "status.state": str,
    },
}
"""Where each kind's objects must hold a map, a list, an integer or a string (``[*]``: every
item of a list): what the API server's decoding of the typed object refuses (``cannot
unmarshal string into Go struct field Pod.status of type v1.PodStatus``), for the fields the
parsers and the embedded cluster read. A null is an absent field."""


class _Shape:
    """A field's expected type (None: any) and the shapes of the fields under it (``*``: each
    item of a list), so one walk of an object checks every path that shares a prefix."""

    __slots__ = ("children", "expected")

    def __init__(self) -> None:
        self.expected: type | None = None
        self.children: dict[str, _Shape] = {}


def _tree(shapes: Mapping[str, type]) -> dict[str, _Shape]:
    root: dict[str, _Shape] = {}
    for path, expected in shapes.items():
        children = root
        steps = path.replace("[*]", ".*").split(".")
        for step in steps[:-1]:
            children = children.setdefault(step, _Shape()).children
        children.setdefault(steps[-1], _Shape()).expected = expected
    return root


_SHAPES = {kind: _tree(shapes) for kind, shapes in _SHAPE_TEXT.items()}
_COMMON_SHAPES = _tree(_COMMON)
_NAMES = {dict: "an object (a map)", list: "a list", int: "an integer", str: "a string"}


def _check_shapes(value: Any, children: Mapping[str, _Shape], where: str, err: _Err) -> None:
    if type(value) is list:
        every = children.get("*")
        if every is not None:
            for i, item in enumerate(value):
                _check_shape(item, every, f"{where}[{i}]", err)
        return
    if type(value) is not dict and not isinstance(value, Mapping):
        return
    for key, shape in children.items():
        if key in value:
            _check_shape(value[key], shape, f"{where}.{key}" if where else key, err)


def _check_shape(value: Any, shape: _Shape, where: str, err: _Err) -> None:
    if value is None:
        return
    expected = shape.expected
    if expected is not None and type(value) is not expected and (
        not isinstance(value, Mapping if expected is dict else expected)
        or (expected is int and isinstance(value, bool))
    ):
        raise err(where, f"must be {_NAMES[expected]}, got {value!r}")
    if shape.children:
        _check_shapes(value, shape.children, where, err)


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}  # a map: its shape is checked first


def _int32_field(spec: Mapping[str, Any], key: str, where: str, err: _Err, *,
                 minimum: int = INT32_MIN) -> None:
    value = spec.get(key)
    if value is None:
        return
    problem = int32_problem(value, minimum=minimum)
    if problem is not None:
        raise err(where, problem)


def _pod(obj: Mapping[str, Any], err: _Err) -> None:
    spec = _spec(obj)
    containers = spec.get("containers")
    if not containers:
        raise err("spec.containers", "Required value")
    problem = containers_problem(spec)
    if problem is not None:
        raise err(*problem)
    _int32_field(spec, "priority", "spec.priority", err)


def _podgroup(obj: Mapping[str, Any], err: _Err) -> None:
    spec = _spec(obj)
    _int32_field(spec, "minMember", "spec.minMember", err, minimum=0)
    task_member = spec.get("minTaskMember")
    if isinstance(task_member, Mapping):
        for role in task_member:
            _int32_field(task_member, role, f"spec.minTaskMember[{role}]", err, minimum=0)


def _queue(obj: Mapping[str, Any], err: _Err) -> None:
    _int32_field(_spec(obj), "priority", "spec.priority", err)


def _priority_class(obj: Mapping[str, Any], err: _Err) -> None:
    _int32_field(obj, "value", "value", err)


_BY_KIND = {"Pod": _pod, "PodGroup": _podgroup, "Queue": _queue, "PriorityClass": _priority_class}
