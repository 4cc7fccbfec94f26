"""Loading Kubernetes manifests for the embedded cluster.

Accepts multi-document YAML (or JSON) files and ``v1`` ``List`` objects. Every object of a
kind the scheduler uses is checked the way the scheduler will read it, and refused where the API
server would refuse it (:mod:`scheduler.api.validation`; a pod naming a PriorityClass that is
not given, as the Priority admission plugin does), so a broken manifest is reported before
anything is scheduled, naming the document, the object and the field. An object given twice
(same kind, namespace and name) is a warning naming both places; the later one wins, as a second
``kubectl apply`` would. A file without objects (empty, only comments) is a warning, and an
error when no file has any: there is nothing to schedule, and a wrong file was likely given.

Files are read with libyaml's loader when PyYAML was built with it, through
:mod:`scheduler.cluster.yamlload`: on a 20,000-pod file PyYAML's pure-Python loader took longer
than everything else ``lahar simulate`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.errors import ObjectError
from scheduler.api.hypernode import hypernode_from_object
from scheduler.api.node import node_from_object
from scheduler.api.nodeshard import SHARD_API_VERSION, node_shard_from_object
from scheduler.api.pod import PodParseMemo
from scheduler.api.podclaims import pod_claims
from scheduler.api.podgroup import podgroup_from_object
from scheduler.api.queue import queue_from_object
from scheduler.api.task import task_from_pod
from scheduler.api.validation import validate_object
from scheduler.cache.dra import DRA_API_VERSION, DRA_KINDS, check_dra_object
from scheduler.cluster.manifest_warnings import cross_warnings, unread_file_warning
from scheduler.cluster.yamlload import load_all_marked
from scheduler.confyaml import STDIN, UnreadableFile, read_text, source_name

__all__ = [
    "BUILT_IN_PRIORITY_CLASSES",
    "KINDS",
    "MANIFEST_SUFFIXES",
    "Manifest",
    "ManifestError",
    "expand_paths",
    "load_manifests",
    "object_key",
    "parse_documents",
]

KINDS = ("Node", "Pod", "PodGroup", "Queue", "PriorityClass", "Namespace", "Device", "ConfigMap",
         "HyperNode", "NodeShard", *DRA_KINDS)
_NAMESPACED = ("Pod", "PodGroup", "ConfigMap", "ResourceClaim", "ResourceClaimTemplate")
BUILT_IN_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
"""The classes every API server creates itself, so a pod may name them without a manifest."""
_GROUPS = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "PodGroup": ("scheduling.volcano.sh/v1beta1",),
    "Queue": ("scheduling.volcano.sh/v1beta1",),
    "PriorityClass": ("scheduling.k8s.io/v1",),
    "Namespace": ("v1",),
    "Device": ("scheduling.koordinator.sh/v1alpha1",),
    "ConfigMap": ("v1",),  # Volcano's device config (read by the device families)
    "HyperNode": ("topology.volcano.sh/v1alpha1",),
    "NodeShard": (SHARD_API_VERSION,),
    **dict.fromkeys(DRA_KINDS, (DRA_API_VERSION,)),
}


class ManifestError(ValueError):
    """A manifest that cannot be loaded: names the file, document and object."""


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str
    """``<file>#<document number>`` (1-based), plus ``[item i]`` inside a List."""
    obj: dict[str, Any]
    private: bool = False
    """True when no map or list of ``obj`` is also part of another manifest or of ``obj``
    elsewhere (its YAML document had no alias), so a new owner may change it in place."""

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))


def _expand(source: str, doc: Any, *, private: bool = False) -> Iterator[Manifest]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise ManifestError(f"{source}: a document must be a Kubernetes object (a map)")
    if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(f"{source}: List.items must be a list")
        for i, item in enumerate(items):
            yield from _expand(f"{source} [item {i}]", item, private=private)
        return
    yield Manifest(source, doc, private)


def parse_documents(text: str, *, source: str) -> list[Manifest]:
    """Every object of a multi-document YAML/JSON text, Lists expanded, in order."""
    out: list[Manifest] = []
    number = 0
    try:
        documents = load_all_marked(text, timestamps_as_text=True, unique_keys=True)
        for number, (doc, shares) in enumerate(documents, start=1):
            out.extend(_expand(f"{source}#{number}", doc, private=not shares))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}#{number + 1}: not valid YAML: {exc}") from None
    return out


def object_key(manifest: Manifest) -> str:
    """``Kind namespace/name`` (namespace defaulted as the cluster will), for messages and
    duplicate detection."""
    meta = manifest.obj.get("metadata") or {}
    name = meta.get("name", "")
    if manifest.kind in _NAMESPACED:
        return f"{manifest.kind} {meta.get('namespace') or 'default'}/{name}"
    return f"{manifest.kind} {name}"


def _check(manifest: Manifest, *, parsed: PodParseMemo) -> None:
    obj = manifest.obj
    kind = manifest.kind
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or meta.get("name") in (None, ""):
        raise ManifestError(
            f"{manifest.source}: {kind or 'object'}: field metadata.name is required"
        )
    if not isinstance(meta["name"], str):
        raise ManifestError(
            f"{manifest.source}: {kind}: field metadata.name: must be a string, "
            f"got {meta['name']!r}"
        )
    api_version = obj.get("apiVersion")
    if api_version not in _GROUPS[kind]:
        raise ManifestError(
            f"{manifest.source}: {kind} {meta['name']}: field apiVersion: "
            f"expected {_GROUPS[kind][0]}, got {api_version!r}"
        )
    for field_name in ("labels", "annotations"):
        values = meta.get(field_name)
        if values is not None and (
            not isinstance(values, Mapping) or not all(isinstance(v, str) for v in values.values())
        ):
            raise ManifestError(
                f"{manifest.source}: {kind} {meta['name']}: field "
                f"metadata.{field_name}: must be a map of strings"
            )
    try:
        validate_object(kind, obj)
        if kind == "Node":
            node_from_object(obj)
        elif kind == "Pod":
            task_from_pod(obj, memo=parsed)
            pod_claims(obj)
        elif kind == "PodGroup":
            podgroup_from_object(obj)
        elif kind == "Queue":
            queue_from_object(obj)
        elif kind == "HyperNode":
            hypernode_from_object(obj)
        elif kind == "NodeShard":
            node_shard_from_object(obj)
        elif kind == "PriorityClass":
            value = obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise ObjectError(
                    kind=kind,
                    name=meta["name"],
                    field="value",
                    problem=f"must be an integer, got {value!r}",
                )
        elif kind in DRA_KINDS:
            check_dra_object(kind, obj)
    except (ObjectError, ValueError) as exc:
        raise ManifestError(f"{manifest.source}: {exc}") from None


def _check_priority_classes(manifests: Iterable[Manifest]) -> None:
    """Refuse a pod whose ``priorityClassName`` names no PriorityClass given, as the API
    server's Priority admission plugin refuses to create it (the two built-in classes always
    exist)."""
    classes = set(BUILT_IN_PRIORITY_CLASSES)
    classes.update(m.obj["metadata"]["name"] for m in manifests if m.kind == "PriorityClass")
    for manifest in manifests:
        if manifest.kind != "Pod":
            continue
        class_name = (manifest.obj.get("spec") or {}).get("priorityClassName")
        if class_name and class_name not in classes:
            raise ManifestError(
                f"{manifest.source}: {object_key(manifest)}: field spec.priorityClassName: "
                f"no PriorityClass with name {class_name} was found"
            )


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""What ``kubectl apply -f DIR`` reads of a directory (not its subdirectories)."""


class _EmptyDirectory(str):
    """A directory given as a path that holds no manifest files."""


def expand_paths(paths: Iterable[str | Path]) -> list[str | Path]:
    """``paths`` with each directory replaced by its manifest files in name order, as
    ``kubectl apply -f DIR`` reads it (standard input, ``-``, stays as it is)."""
    out: list[str | Path] = []
    for path in paths:
        if str(path) != STDIN and Path(path).is_dir():
            found = sorted(str(child) for child in Path(path).iterdir()
                           if child.suffix in MANIFEST_SUFFIXES and child.is_file())
            out.extend(found or [_EmptyDirectory(path)])
        else:
            out.append(path)
    return out


def load_manifests(paths: Iterable[str | Path]) -> tuple[list[Manifest], list[str]]:
    """Read, expand and check manifests. Returns the usable objects and warnings for skipped
    ones and for files without objects; raises :class:`ManifestError` on the first broken
    object, and when no file has any object."""
    manifests: list[Manifest] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}
    parsed = PodParseMemo()  # a job's pods usually share one spec
    empty: list[str] = []
    files = 0
    for path in expand_paths(paths):
        files += 1
        if isinstance(path, _EmptyDirectory):
            empty.append(str(path))
            warnings.append(f"{path}: no .yaml, .yml or .json files in the directory")
            continue
        try:
            text = read_text(path)
        except UnreadableFile as exc:
            raise ManifestError(str(exc)) from None
        name = source_name(path)
        documents = parse_documents(text, source=name)
        if not documents:
            empty.append(name)
            warnings.append(f"{name}: no objects in the file")
        unread = [m.kind or "object without kind" for m in documents if m.kind not in KINDS]
        if documents and len(unread) == len(documents):
            warnings.append(unread_file_warning(name, unread, KINDS))
            continue
        for manifest in documents:
            if manifest.kind not in KINDS:
                name = (manifest.obj.get("metadata") or {}).get("name", "")
                warnings.append(
                    f"{manifest.source}: skipping {manifest.kind or 'object without kind'}"
                    f" {name}".rstrip()
                )
                continue
            _check(manifest, parsed=parsed)
            key = object_key(manifest)
            earlier = seen.get(key)
            if earlier is not None:
                warnings.append(
                    f"{manifest.source}: {key} is also defined at {earlier}; the later one is used"
                )
            seen[key] = manifest.source
            manifests.append(manifest)
    if empty and len(empty) == files:
        raise ManifestError(f"no objects in {', '.join(empty)}")
    _check_priority_classes(manifests)
    warnings.extend(cross_warnings(manifests, key=object_key))
    return manifests, warnings
