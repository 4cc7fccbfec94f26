"""The vGPU family: node ledgers from the register annotation, requests, vector checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceConfig, DeviceWarning, Reporter
from scheduler.devices.codec import CodecError, parse_register
from scheduler.devices.exclusive import matching_rules, task_labels
from scheduler.devices.requests import VGpuRequest, vgpu_request
from scheduler.devices.vgpu import (
    COL_CARDS,
    COL_FREE,
    COL_USABLE,
    MIG,
    NAME,
    REASON_PREFIX,
    VGpuDevices,
)
from scheduler.devices.vgpu_card import VGpuCard

__all__ = ["VGpuFamily"]


@dataclass(frozen=True, slots=True)
class VGpuFamily:
    config: DeviceConfig
    reporter: Reporter
    NAME: ClassVar[str] = NAME
    COLUMNS: ClassVar[tuple[str, ...]] = (COL_USABLE, COL_FREE, COL_CARDS)

    def _node_warning(self, node: str, message: str) -> None:
        self.reporter.warn(DeviceWarning(kind="Node", name=node, message=message,
                                         reason="InvalidDeviceRegistration"))

    def _has_resources(self, node: NodeInfo) -> bool:
        status = node.node.get("status") or {}
        values = status.get("allocatable") or status.get("capacity") or {}
        for name in self.config.names.node_resources:
            try:
                if parse_quantity(values.get(name, 0)) <= 0:
                    return False
            except QuantityError:
                return False
        return True

    def build(self, node: NodeInfo) -> VGpuDevices | None:
        names = self.config.names
        text = node.annotations.get(names.register)
        if text is None or not self._has_resources(node):
            return None
        try:
            registered = parse_register(str(text), json_format=names.register_json,
                                        legacy_fields=self.config.vgpu_legacy_register)
        except CodecError as exc:
            self._node_warning(node.name, f"node {node.name} has a malformed {names.register} "
                                          f"annotation ({exc}); it is treated as having no vGPU")
            return None
        cards: list[VGpuCard] = []
        seen: set[str] = set()
        settings = self.config.vgpu_settings
        mig_mode = False
        for info in registered:
            # decodeNodeDevices: the node's mode is that of its last entry; a mig card whose
            # type no known geometry names counts as HAMi-core.
            templates = settings.geometries_for(info.type) \
                if info.mode == MIG and names.profile == "volcano" else None
            mig_mode = templates is not None
            if info.uuid in seen:
                self._node_warning(node.name, f"node {node.name} registers GPU {info.uuid} more "
                                              f"than once; only the first entry is used")
                continue
            seen.add(info.uuid)
            cards.append(VGpuCard(info, templates=templates or ()))
        return VGpuDevices(node_name=node.name, cards=cards, names=names,
                           policy=self.config.policy, reporter=self.reporter,
                           rules=self.config.exclusive_rules, exclusive_mode=not mig_mode,
                           mig_mode=mig_mode, memory_factor=settings.memory_factor)

    def parse_request(self, task: TaskInfo) -> VGpuRequest | None:
        request = vgpu_request(task, self.config.names)
        if request is not None and self.config.exclusive_rules:
            rules = matching_rules(task_labels(task), self.config.exclusive_rules)
            if rules:
                request = replace(request, exclusive=rules)
        return request

    def vector_fit(self, request: VGpuRequest, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        mask = columns[COL_USABLE] >= request.max_number
        if request.max_memory:
            mask &= columns[COL_FREE] >= request.max_memory
        return np.asarray(mask)

    def vector_reasons(self, request: VGpuRequest, columns: Mapping[str, np.ndarray]
                       ) -> list[tuple[np.ndarray, str]]:
        out = [(columns[COL_CARDS] <= 0, f"{REASON_PREFIX}: node(s) had no registered vGPU "
                                         f"card ({self.config.names.register})"),
               (columns[COL_USABLE] < request.max_number,
                f"{REASON_PREFIX}: node(s) had fewer than {request.max_number} shareable vGPU "
                f"card(s)")]
        if request.max_memory:
            out.append((columns[COL_FREE] < request.max_memory,
                        f"{REASON_PREFIX}: no vGPU card of the node has {request.max_memory} "
                        f"MiB free"))
        return out

    def lock_name(self, request: VGpuRequest) -> str | None:
        return self.config.names.lock if self.config.node_lock else None

    @property
    def binding_keys(self) -> tuple[str, ...]:
        return self.config.names.binding_keys

    @property
    def ignored_resources(self) -> frozenset[str]:
        return self.config.names.ignored_resources

    @property
    def resource_dims(self) -> frozenset[str]:
        return frozenset({self.config.names.count})
