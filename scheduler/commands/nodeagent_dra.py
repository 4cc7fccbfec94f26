"""``lahar node-agent --dra``: the flags of the DRA driver and its start-up.

With ``--dra`` and no device-plugin family the agent is a DRA driver only (:func:`dra_main`);
with families too, ``--dra-cards`` must split the cards (:func:`split`), the device-plugin
side sees the other cards and :func:`start_dra` runs the driver next to it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from typing import Any

from scheduler.signals import set_on_signals

__all__ = ["add_dra_arguments", "dra_main", "legacy_families", "split", "start_dra"]


def add_dra_arguments(agent: Any) -> None:
    dra = agent.add_argument_group("DRA driver (resource.k8s.io/v1)")
    dra.add_argument("--dra", action="store_true",
                     help="serve as a DRA kubelet plugin and publish ResourceSlices")
    dra.add_argument("--driver-name", default="gpu.lahar.dev", metavar="NAME",
                     help="the DRA driver name (default gpu.lahar.dev)")
    dra.add_argument("--dra-mode", choices=("exclusive", "shared"), default="exclusive",
                     help="exclusive: one claim per card; shared: cards shared by consumable "
                          "memory/cores capacity, enforced by HAMi-core")
    dra.add_argument("--dra-cards", default="", metavar="INDICES",
                     help="GPU indices DRA serves when device-plugin families are on too "
                          "(e.g. 0,1 or 4-7); the others stay with the families")
    dra.add_argument("--kubelet-plugins-registry-dir", default="/var/lib/kubelet/plugins_registry",
                     metavar="DIR", help="kubelet's plugin registration directory")
    dra.add_argument("--kubelet-plugins-dir", default="/var/lib/kubelet/plugins", metavar="DIR",
                     help="where the driver's socket and checkpoint go (<DIR>/<driver>/)")
    dra.add_argument("--dra-delete-slices", action="store_true",
                     help="delete this node's ResourceSlices on exit")
    dra.add_argument("--dra-device-taints", action="store_true",
                     help="taint an unhealthy card (DRADeviceTaints) instead of removing it")


def legacy_families(args: argparse.Namespace, devices: Any) -> list[str]:
    names = (("--gpu-share", devices.gpu_sharing), ("--gpu-number", devices.gpu_number),
             ("--vgpu", devices.vgpu), ("--fine-grained", devices.finegrained))
    return [flag for flag, on in names if on]


def split(args: argparse.Namespace, source: Any, legacy: list[str]) -> tuple[Any, Any]:
    """(device-plugin source, DRA source); raises ValueError naming the conflict."""
    from scheduler.devices.node.dra.agent import CardSplit, check_split, parse_cards

    cards = parse_cards(args.dra_cards) if args.dra_cards else None
    problem = check_split(legacy=legacy, cards=cards, inventory=source.read())
    if problem is not None:
        raise ValueError(problem)
    if cards is None:
        return source, source
    return CardSplit(source, cards, dra=False), CardSplit(source, cards, dra=True)


def start_dra(args: argparse.Namespace, *, config: Any, source: Any, client: Any,
              mig: Any = None) -> Any:
    """Build and start the DRA driver on ``source``; the started agent (``stop()`` it)."""
    from scheduler.cluster.kube.client import object_path
    from scheduler.devices.node.dra.agent import DraAgent, parse_cards
    from scheduler.devices.node.dra.checkpoint import Checkpoint
    from scheduler.devices.node.dra.plugin import DraPlugin
    from scheduler.devices.node.dra.prepare import Preparer
    from scheduler.devices.node.dra.publisher import RESOURCE_API, SlicePublisher

    class Claims:
        def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
            return dict(client.request_json("GET", object_path(
                RESOURCE_API, "resourceclaims", namespace=namespace, name=name)))

    state = os.path.join(args.kubelet_plugins_dir, args.driver_name)
    preparer = Preparer(driver=args.driver_name, node_name=config.node_name, config=config,
                        inventory=source.read, claims=Claims(),
                        checkpoint=Checkpoint(os.path.join(state, "checkpoint.json")),
                        cdi_root=args.cdi_root, driver_root=args.driver_root, mig=mig,
                        cards=parse_cards(args.dra_cards) if args.dra_cards else None)
    plugin = DraPlugin(driver=args.driver_name, preparer=preparer,
                       registry_dir=args.kubelet_plugins_registry_dir,
                       plugins_dir=args.kubelet_plugins_dir)
    publisher = SlicePublisher(client, node_name=config.node_name, driver=args.driver_name,
                               mode=args.dra_mode, device_taints=args.dra_device_taints)
    agent = DraAgent(plugin=plugin, source=source, publisher=publisher, mig=mig,
                     health_interval=args.health_interval,
                     delete_slices=args.dra_delete_slices)
    agent.start()
    return agent


def dra_main(args: argparse.Namespace, *, families: Any, source_of: Any,
             mig_of: Any) -> int:
    """The agent as a DRA driver only."""
    from scheduler.cluster.kube.client import KubeClient
    from scheduler.devices.node.inventory import InventoryError
    from scheduler.devices.node.resources import AgentConfig

    node = args.node_name or os.environ.get("NODE_NAME") or socket.gethostname()
    try:
        config = AgentConfig(node_name=node, devices=families,
                             hook_path=os.environ.get("HOOK_PATH") or args.hook_path,
                             hami_core_library=args.hami_core_library, sysfs=args.sysfs,
                             prepare_host_dirs=not (args.fake_gpus or args.fake_inventory),
                             cdi=True, cdi_root=args.cdi_root)
        source = source_of(args, node)
        _, source = split(args, source, [])
        mig = mig_of(args, source) if args.fake_mig or args.vgpu_mode == "mig" else None
    except (InventoryError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = KubeClient.from_flags(kubeconfig=args.kubeconfig, master=args.master,
                                   context=args.context)
    stop = threading.Event()
    set_on_signals({signal.SIGTERM: stop, signal.SIGINT: stop})
    try:
        agent = start_dra(args, config=config, source=source, client=client, mig=mig)
    except OSError as exc:
        print(f"error: cannot serve the DRA plugin in {args.kubelet_plugins_dir}: {exc}",
              file=sys.stderr)
        client.close()
        return 1
    stop.wait()
    agent.stop()
    client.close()
    return 0
