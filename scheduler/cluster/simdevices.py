"""The embedded cluster's node side of device sharing: a simulated device plugin.

On a real node, kubelet calls the device plugin's ``Allocate`` for a device pod; the plugin
reads the scheduler's choice from the pod's annotations, marks the pod served and releases
the node lock so the next device pod can come. The embedded cluster has no kubelet: after
each bind it runs the same node-side handshake (:mod:`scheduler.devices.node.handshake`)
for vGPU and for GPU share.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.cluster.sim import SimCluster
from scheduler.deviceconf import DeviceSupport
from scheduler.devices.base import DeviceConfig, DeviceWarning, Reporter
from scheduler.devices.node.handshake import handshake_gpushare, handshake_node

__all__ = ["SimulatedDevicePlugin", "install_simulated_device_plugin"]


@dataclass(slots=True)
class SimulatedDevicePlugin:
    """What a node's device plugins do once kubelet admits a device pod: the node side of the
    handshake for vGPU and for GPU share."""

    config: DeviceConfig
    reporter: Reporter

    def __call__(self, cluster: SimCluster, node_name: str) -> None:
        now = cluster.clock()
        try:
            if self.config.vgpu:
                handshake_node(cluster, node_name, self.config.names, now, sleep=_no_sleep)
            if self.config.gpu_sharing or self.config.gpu_number:
                handshake_gpushare(cluster, node_name, now, sleep=_no_sleep)
        except Exception as exc:  # the node side must never stop the simulation
            self.reporter.warn(DeviceWarning(kind="Node", name=node_name, message=(
                f"simulated device plugin on node {node_name} failed: {exc}")))


def install_simulated_device_plugin(cluster: SimCluster, devices: DeviceSupport) -> None:
    """Run a simulated device plugin on the node after each bind (when a family is on)."""
    if not devices.enabled:
        return
    cluster.node_side_hooks.append(SimulatedDevicePlugin(devices.config, devices.reporter))


def _no_sleep(seconds: float) -> None:
    """Simulated time does not pass while the node side retries."""
