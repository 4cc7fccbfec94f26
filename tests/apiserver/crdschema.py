"""Objects of custom resource kinds checked against the ``openAPIV3Schema`` the project ships.

A real API server refuses a custom object that breaks its CRD's schema with 422 ``Invalid``;
the double did not look, so an object the server would refuse (a Device condition without
``lastTransitionTime``) passed every test. This module loads the CRDs of ``conf/crds/`` and
checks what the apiextensions validator of kube-apiserver checks of a structural schema:
``type`` (and ``x-kubernetes-int-or-string``), ``required``, ``enum``, ``pattern`` (strings),
``minLength``/``maxLength``, ``minimum``/``maximum``, ``minItems``/``maxItems``, ``anyOf``,
``nullable``, the ``date-time`` format, ``properties``, ``additionalProperties`` and
``items``. Unknown fields are not refused (the server prunes them), and CEL rules
(``x-kubernetes-validations``) are not evaluated. The messages have the server's shape:
``<Kind>.<group> "<name>" is invalid: <field>: Required value``.

A small walker rather than a JSON-schema library: the Kubernetes parts (int-or-string,
``nullable``, which formats are enforced, the error text) are what matter here, and they
would have to be added to any library anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CRD_DIR", "crd_errors", "invalid_message", "schemas"]

CRD_DIR = Path(__file__).resolve().parents[2] / "conf" / "crds"

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float),
}


@cache
def schemas() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """``"<group>/<version>/<plural>"`` → ``(kind, group, openAPIV3Schema)`` of every CRD in
    ``conf/crds/``."""
    out: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    key = f"{spec['group']}/{version['name']}/{spec['names']['plural']}"
                    out[key] = (spec["names"]["kind"], spec["group"], schema)
    return out


def crd_errors(collection: str, obj: Mapping[str, Any]) -> list[str]:
    """What the server would refuse in ``obj`` of ``collection`` (empty: valid, or not a
    custom resource the project ships)."""
    found = schemas().get(collection)
    if found is None:
        return []
    errors: list[str] = []
    _check(obj, found[2], "", errors)
    return errors


def invalid_message(collection: str, obj: Mapping[str, Any], errors: list[str]) -> str:
    kind, group, _ = schemas()[collection]
    name = str((obj.get("metadata") or {}).get("name") or "")
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'{kind}.{group} "{name}" is invalid: {detail}'


def _type_ok(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind not in ("boolean",):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return f'"{type(value).__name__}"'
    return str(value)


def _date_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text or "t" in text


def _check(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable") and ("type" in schema
                                           or schema.get("x-kubernetes-int-or-string")):
            kind = "integer or string" if schema.get("x-kubernetes-int-or-string") else \
                schema["type"]
            errors.append(f"{where}: Invalid value: \"null\": {where} in body must be of type "
                          f"{kind}: \"null\"")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{where}: Invalid value: {_shown(value)}: {where} in body must be "
                          f"of type integer or string")
            return
    elif "type" in schema and not _type_ok(value, schema["type"]):
        errors.append(f"{where}: Invalid value: {_shown(value)}: {where} in body must be of "
                      f"type {schema['type']}: {_shown(value)}")
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_shown(v) for v in schema["enum"])
        errors.append(f"{where}: Unsupported value: {_shown(value)}: supported values: "
                      f"{supported}")
    if ("anyOf" in schema and not schema.get("x-kubernetes-int-or-string")
            and all(_errors_of(value, branch, path) for branch in schema["anyOf"])):
        errors.append(f"{where}: Invalid value: {_shown(value)}: {where} in body must "
                      f"match one of the schemas of anyOf")
    if isinstance(value, str):
        _check_string(value, schema, where, errors)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: Invalid value: {value}: {where} in body should be greater "
                          f"than or equal to {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: Invalid value: {value}: {where} in body should be less "
                          f"than or equal to {schema['maximum']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: Invalid value: {len(value)}: {where} in body should have "
                          f"at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: Too many: {len(value)}: must have at most "
                          f"{schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _check(item, items, f"{path}[{i}]", errors)
    elif isinstance(value, dict):
        _check_object(value, schema, path, errors)


def _check_string(value: str, schema: Mapping[str, Any], where: str, errors: list[str]) -> None:
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: Invalid value: \"{value}\": {where} in body should match "
                      f"'{schema['pattern']}'")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: Invalid value: \"{value}\": {where} in body should be at "
                      f"least {schema['minLength']} chars long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: Too long: may not be longer than {schema['maxLength']}")
    if schema.get("format") == "date-time" and not _date_time(value):
        errors.append(f"{where}: Invalid value: \"{value}\": {where} in body must be of type "
                      f"date-time: \"{value}\"")


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], path: str,
                  errors: list[str]) -> None:
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or []:
        if name not in value:
            errors.append(f"{prefix}{name}: Required value")
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], f"{prefix}{name}", errors)
        elif isinstance(extra, Mapping):
            _check(item, extra, f"{prefix}{name}", errors)


def _errors_of(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    _check(value, schema, path, errors)
    return errors
