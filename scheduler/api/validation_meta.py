"""What the API server refuses of labels, annotations and containers, for objects that never
went through one (``lahar simulate``'s manifests); :mod:`scheduler.api.validation` calls it.

The rules and their wording are apimachinery's (``pkg/api/validation/objectmeta.go``
``ValidateAnnotations``, ``pkg/apis/meta/v1/validation`` ``ValidateLabels``,
``pkg/util/validation`` ``IsQualifiedName`` and ``IsValidLabelValue``) and core's
(``pkg/apis/core/validation`` ``validateContainers``: a container name given twice;
``ValidateResourceRequirements``: a request above its limit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from scheduler.api.errors import shown
from scheduler.api.resource import QuantityError, parse_quantity

__all__ = ["ANNOTATIONS_MAX_BYTES", "containers_problem", "metadata_problem"]

ANNOTATIONS_MAX_BYTES = 256 * 1024
_NAME_MAX = 63
_PREFIX_MAX = 253
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_HELP = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')")
_VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or "
    "'my_value', or '12345')")

Problem = tuple[str, str]
"""The field at fault and what is wrong with it."""


def _qualified_name_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > _PREFIX_MAX or not _PREFIX.fullmatch(prefix)):
        return ("prefix part must be a lowercase RFC 1123 subdomain of at most "
                f"{_PREFIX_MAX} characters")
    if not name:
        return "name part must be non-empty"
    if len(name) > _NAME_MAX:
        return f"name part must be no more than {_NAME_MAX} characters"
    if not _QUALIFIED.fullmatch(name):
        return _QUALIFIED_HELP
    return None


def metadata_problem(meta: Mapping[str, Any]) -> Problem | None:
    """What the API server refuses of ``meta``'s labels and annotations (maps of strings
    already), or None."""
    labels = meta.get("labels") or {}
    for key, value in labels.items():
        problem = _qualified_name_problem(str(key))
        if problem is not None:
            return "metadata.labels", f"Invalid value {shown(key)}: {problem}"
        if len(value) > _NAME_MAX:
            return ("metadata.labels",
                    f"Invalid value {shown(value)}: must be no more than {_NAME_MAX} characters")
        if value and not _QUALIFIED.fullmatch(value):
            return "metadata.labels", f"Invalid value {shown(value)}: {_VALUE_HELP}"
    annotations = meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        problem = _qualified_name_problem(str(key).lower())
        if problem is not None:
            return "metadata.annotations", f"Invalid value {shown(key)}: {problem}"
        size += len(str(key).encode()) + len(value.encode())
    if size > ANNOTATIONS_MAX_BYTES:
        return ("metadata.annotations",
                f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes (has {size})")
    return None


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None  # the resource parser names it


def containers_problem(spec: Mapping[str, Any]) -> Problem | None:
    """A container name given twice (init containers included) or a request above its
    limit in ``spec`` (whose shapes are checked already), or None."""
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field) or ()):
            name = container.get("name")
            if name in names:
                return f"spec.{field}[{i}].name", f"Duplicate value: {shown(name)}"
            if isinstance(name, str):
                names.add(name)
            resources = container.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            for resource, limit in limits.items():
                request = requests.get(resource)
                if request is None:
                    continue
                asked, most = _quantity(request), _quantity(limit)
                if asked is not None and most is not None and asked > most:
                    return (f"spec.{field}[{i}].resources.requests",
                            f"Invalid value {shown(str(request))}: must be less than or "
                            f"equal to {resource} limit of {limit}")
    return None
