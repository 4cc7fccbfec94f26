"""``lahar node-agent``: the node half of device sharing, one process per node (a DaemonSet).

It serves the kubelet device plugin API for the enabled families' extended resources, answers
``Allocate`` with the devices the scheduler wrote into the pod (releasing the node lock), and
reports the node's ``Device`` object, labels and register annotations. The families are the
scheduler conf's ``deviceshare`` switches (``--scheduler-conf``) and/or the flags below.
Fake devices (``--fake-gpus``, ``--fake-inventory``) replace NVML on machines without GPUs.

The gRPC, NVML and Kubernetes modules are imported only when the command runs, and the
Kubernetes client only after the endpoints are registered with kubelet: importing it and
building the connection take about half a second, which kubelet would otherwise wait for.
Calls that need the API server before the connection is built wait for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from typing import Any, cast

from scheduler.signals import set_on_signals

__all__ = ["add_node_agent_arguments", "node_agent_main"]

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins/"


def add_node_agent_arguments(sub: Any) -> None:
    agent = sub.add_parser(
        "node-agent", help="serve this node's devices to kubelet and report them",
        description="The node half of device sharing: a kubelet device plugin (v1beta1) for "
        "the enabled families' resources whose Allocate hands out the devices the scheduler "
        "chose and releases the node lock, plus the reporter of the node's Device object. "
        "See docs/node-agent.md.")
    where = agent.add_argument_group("node and cluster")
    where.add_argument("--node-name", default=None,
                       help="this node (default: $NODE_NAME, else the host name)")
    where.add_argument("--kubeconfig", default=None,
                       help="kubeconfig file (default: in-cluster service account, else "
                            "$KUBECONFIG's first file, else ~/.kube/config)")
    where.add_argument("--context", default=None,
                       help="the kubeconfig context to use (default: its current-context)")
    where.add_argument("--master", default=None, help="API server address (overrides the "
                                                      "kubeconfig's)")
    where.add_argument("--kubelet-dir", default=DEVICE_PLUGIN_DIR, metavar="DIR",
                       help=f"kubelet's device plugin directory with kubelet.sock "
                            f"(default: {DEVICE_PLUGIN_DIR})")
    where.add_argument("--kubelet-checkpoint", default=None, metavar="FILE",
                       help="kubelet's device checkpoint, read for GPUs handed out by other "
                            "plugins (default: DIR/kubelet_internal_checkpoint)")
    families = agent.add_argument_group("device families (OR-ed with --scheduler-conf)")
    families.add_argument("--scheduler-conf", default=None, metavar="CONF",
                          help="take the families from this scheduler conf's deviceshare "
                               "arguments")
    families.add_argument("--gpu-share", action="store_true",
                          help="GPU share, memory mode (volcano.sh/gpu-memory)")
    families.add_argument("--gpu-number", action="store_true",
                          help="GPU share, whole cards (volcano.sh/gpu-number)")
    families.add_argument("--vgpu", action="store_true", help="vGPU (HAMi-core)")
    families.add_argument("--vgpu-profile", choices=("volcano", "hami"), default=None,
                          help="vGPU names: volcano (volcano.sh/vgpu-*) or hami "
                               "(nvidia.com/gpu); default: the conf's, else volcano")
    families.add_argument("--fine-grained", action="store_true",
                          help="Koordinator's fine-grained GPU/RDMA (needs the Device CRD)")
    options = agent.add_argument_group("devices")
    options.add_argument("--split-count", type=int, default=None, metavar="N",
                         help="vGPU: vGPUs per card (default: $DEVICE_SPLIT_COUNT, else 10)")
    options.add_argument("--gpu-memory-factor", type=int, default=None, metavar="MIB",
                         help="GPU share and volcano vGPU: MiB per memory unit (default: 1)")
    options.add_argument("--hook-path", default="", metavar="DIR",
                         help="vGPU: HAMi-core's host directory (default: /usr/local/vgpu "
                              "for volcano, /usr/local for hami; $HOOK_PATH wins)")
    options.add_argument("--vgpu-mode", choices=("hami-core", "mig", "mps"), default="hami-core",
                         help="vGPU: how cards are shared (registered as the card's mode; "
                              "see docs/node-agent.md)")
    options.add_argument("--fake-mig", default="", metavar="GEOMETRY",
                         help="vGPU mig mode on fake GPUs: every card's MIG instances, e.g. "
                              "1g.10gb=9728:4,2g.20gb=19968:1")
    options.add_argument("--mps-root", default="/run/nvidia/mps", metavar="DIR",
                         help="vGPU mps mode: the MPS daemon's host directory (default: "
                              "/run/nvidia/mps)")
    options.add_argument("--cdi", action="store_true",
                         help="answer Allocate with CDI device names and write the CDI spec")
    options.add_argument("--cdi-root", default="/var/run/cdi", metavar="DIR",
                         help="where the CDI spec is written (default: /var/run/cdi)")
    options.add_argument("--driver-root", default="/", metavar="DIR",
                         help="CDI: where the NVIDIA driver's files are (default: /)")
    options.add_argument("--hami-core-library", default="/usr/local/vgpu/libvgpu.so",
                         metavar="FILE", help="fine-grained: HAMi-core for isolated shares")
    core = agent.add_argument_group(
        "HAMi-core (vGPU; flags override --device-config, a --node-config entry overrides all)")
    core.add_argument("--device-config", default=None, metavar="FILE",
                      help="the peers' device-config.yaml: its nvidia section's "
                           "deviceSplitCount, deviceMemoryScaling, deviceCoreScaling, "
                           "disableCoreLimit, libCudaLogLevel, gpuCorePolicy, gpuMemoryFactor, "
                           "enableNumaTopology")
    core.add_argument("--node-config", default=None, metavar="FILE",
                      help="HAMi's per-node config.json (nodeconfig entries named after nodes)")
    core.add_argument("--device-memory-scaling", type=float, default=None, metavar="RATIO",
                      help="HAMi's deviceMemoryScaling (default: $DEVICE_MEMORY_SCALING, else "
                           "1); above 1 the container gets CUDA_OVERSUBSCRIBE=true")
    core.add_argument("--device-cores-scaling", type=float, default=None, metavar="RATIO",
                      help="deviceCoreScaling (default: $DEVICE_CORES_SCALING, else 1)")
    core.add_argument("--disable-core-limit", action="store_true", default=None,
                      help="HAMi-core ignores the core limit (GPU_CORE_UTILIZATION_POLICY="
                           "disable; default: $DISABLE_CORE_LIMIT)")
    core.add_argument("--libcuda-log-level", default=None, metavar="N",
                      help="LIBCUDA_LOG_LEVEL for HAMi-core (0 errors, 1 warnings, 3 infos, "
                           "4 debugs; default: unset)")
    core.add_argument("--gpu-core-policy", choices=("default", "force", "disable"),
                      default=None, help="GPU_CORE_UTILIZATION_POLICY for every vGPU container "
                                         "(HAMi's gpuCorePolicy, which HAMi's webhook injects)")
    core.add_argument("--numa-topology", action="store_true", default=None,
                      help="send each device's NUMA node in ListAndWatch (HAMi's "
                           "enableNumaTopology; default: no topology)")
    options.add_argument("--sysfs", default="/sys", metavar="DIR",
                         help="where sysfs is mounted (PCIe, NUMA, RDMA uverbs)")
    options.add_argument("--fake-gpus", type=int, default=0, metavar="N",
                         help="make up N GPUs instead of reading NVML (clusters without GPUs)")
    options.add_argument("--fake-gpu-memory", default="16Gi", metavar="QUANTITY",
                         help="memory of each fake GPU (default: 16Gi)")
    options.add_argument("--fake-inventory", default=None, metavar="FILE",
                         help="fake GPUs and RDMA NICs with topology, from YAML (see "
                              "docs/node-agent.md)")
    where.add_argument("--metrics-address", default="", metavar="HOST:PORT",
                       help="serve Prometheus metrics (HAMi's hami_* vGPU usage) on "
                            "http://HOST:PORT/metrics (default: off)")
    from scheduler.commands.nodeagent_dra import add_dra_arguments

    add_dra_arguments(agent)
    timing = agent.add_argument_group("timing")
    timing.add_argument("--health-interval", type=float, default=0.5, metavar="SECONDS",
                        help="how often device health is checked (default: 0.5)")
    timing.add_argument("--report-period", type=float, default=60.0, metavar="SECONDS",
                        help="how often the node is reported without a change (default: 60)")
    timing.add_argument("--xid-recovery", type=float, default=0.0, metavar="SECONDS",
                        help="a GPU marked unhealthy by a critical XID is healthy again after "
                             "this long without one (default: 0, never until SIGHUP or a "
                             "restart, as the peers)")
    agent.set_defaults(func=node_agent_main)


def check_node_agent_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags, the files they name and the kubeconfig, checked before
    anything starts (None: nothing); each message names the flag or the file."""
    for flag, value, least in (("--fake-gpus", args.fake_gpus, 0),
                               ("--split-count", args.split_count, 1),
                               ("--gpu-memory-factor", args.gpu_memory_factor, 1)):
        if value is not None and value < least:  # None: the default is resolved later
            return f"{flag}: must be at least {least}, got {value}"
    for flag, seconds in (("--health-interval", args.health_interval),
                          ("--report-period", args.report_period)):
        if not seconds > 0 or seconds == float("inf"):
            return f"{flag}: must be a number of seconds above 0, got {seconds:g}"
    if args.fake_gpus:
        from scheduler.api.resource import QuantityError, parse_quantity

        try:
            memory = parse_quantity(args.fake_gpu_memory)
        except QuantityError as exc:
            return f"--fake-gpu-memory: {exc}"
        if not memory > 0:
            return f"--fake-gpu-memory: must be above 0, got {args.fake_gpu_memory!r}"
    for flag, path in (("--fake-inventory", args.fake_inventory),
                       ("--scheduler-conf", args.scheduler_conf)):
        if path and not os.access(path, os.R_OK):
            why = "no such file" if not os.path.exists(path) else "not readable"
            return f"{flag} {path}: {why}"
    if getattr(args, "dra_cards", "") and not getattr(args, "dra", False):
        return "--dra-cards: needs --dra"
    if not os.path.isdir(args.kubelet_dir) and not getattr(args, "dra", False):
        return (f"--kubelet-dir {args.kubelet_dir}: no such directory (kubelet's device "
                "plugin directory, where kubelet.sock is)")
    from scheduler.cluster.kube.kubeconfig import ConfigError, load_client_config

    try:
        load_client_config(kubeconfig=args.kubeconfig, master=args.master, context=args.context)
    except ConfigError as exc:
        return str(exc)
    return None


def _families(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from scheduler.devices.base import DeviceConfig

    config = DeviceConfig()
    if args.scheduler_conf:
        from scheduler.conf import load_conf
        from scheduler.deviceconf import device_config

        config = device_config(load_conf(args.scheduler_conf))
    return replace(config, gpu_sharing=config.gpu_sharing or args.gpu_share,
                   gpu_number=config.gpu_number or args.gpu_number,
                   vgpu=config.vgpu or args.vgpu, finegrained=config.finegrained
                   or args.fine_grained, profile=args.vgpu_profile or config.profile)


def _core_settings(args: argparse.Namespace, node: str) -> dict[str, Any]:
    """AgentConfig fields from --device-config, then the flags (or the peers' environment
    variables), then this node's --node-config entry (see coresettings)."""
    from scheduler.devices.node.coresettings import (
        flag_settings,
        read_device_config,
        read_node_config,
    )

    settings: dict[str, Any] = {}
    if args.device_config:
        with open(args.device_config, encoding="utf-8") as f:
            settings.update(read_device_config(f.read(), source=args.device_config))
    settings.update(flag_settings(vars(args), os.environ))
    if args.node_config:
        with open(args.node_config, encoding="utf-8") as f:
            settings.update(read_node_config(f.read(), node_name=node,
                                             source=args.node_config))
    return settings


def _source(args: argparse.Namespace, node: str) -> Any:
    from scheduler.api.resource import parse_quantity
    from scheduler.devices.node.inventory import (
        FakeSource,
        Inventory,
        NvmlSource,
        fake_gpus,
        inventory_from_yaml,
    )
    from scheduler.devices.node.report import Sysfs, load_nvml

    if args.fake_inventory:
        import yaml

        from scheduler.confyaml import load_yaml, read_text
        from scheduler.devices.node.inventory import InventoryError

        try:
            inventory = inventory_from_yaml(node, load_yaml(read_text(args.fake_inventory)))
            negative = [gpu.index for gpu in inventory.gpus if gpu.memory < 0]
            if negative:
                raise InventoryError(f"gpus[{negative[0]}]: memory must not be negative")
        except (InventoryError, yaml.YAMLError) as exc:  # read_text's errors name the file
            raise InventoryError(f"--fake-inventory {args.fake_inventory}: {exc}") from None
        return FakeSource(inventory)
    if args.fake_gpus:
        memory = int(parse_quantity(args.fake_gpu_memory))
        return FakeSource(Inventory(gpus=fake_gpus(node, args.fake_gpus, memory),
                                    driver="fake", fake=True))
    nvml, error = load_nvml()
    return NvmlSource(nvml=nvml, error=error, sysfs=Sysfs(args.sysfs))


def _events(source: Any) -> Any:
    """NVML's XID events for a source that reads NVML; None for fake devices."""
    from scheduler.devices.node.inventory import NvmlSource
    from scheduler.devices.node.xid import NvmlEvents

    if not isinstance(source, NvmlSource):
        return None
    return NvmlEvents(nvml=source.nvml, error=source.error)


def _metrics(args: argparse.Namespace, config: Any, source: Any, node: str, access: Any) -> Any:
    """``/metrics``: HAMi-core caches of this node's containers, and NVML's per-card usage."""
    from scheduler.devices.node.inventory import NvmlSource
    from scheduler.devices.node.metrics import MetricsServer, VgpuCollector, nvml_host_stats

    host = nvml_host_stats(source.nvml) if isinstance(source, NvmlSource) else None
    collector = VgpuCollector(
        containers_dir=os.path.join(config.vgpu_hook_path, "vgpu", "containers"),
        pods=lambda: list(access.list_pods_on_node(node)), host=host)
    return MetricsServer(collector=collector, address=args.metrics_address)


def _mig_source(args: argparse.Namespace, source: Any) -> Any:
    """``--fake-mig`` geometries, else NVML's MIG devices (``--vgpu-mode mig``)."""
    from scheduler.devices.node.inventory import NvmlSource
    from scheduler.devices.node.modes import FakeMig, NvmlMig, parse_fake_mig

    if args.fake_mig:
        return FakeMig(parse_fake_mig(args.fake_mig))
    if isinstance(source, NvmlSource):
        return NvmlMig(nvml=source.nvml, error=source.error)
    raise ValueError("--vgpu-mode mig on fake GPUs needs --fake-mig (e.g. 1g.10gb=9728:4)")


def node_agent_main(args: argparse.Namespace) -> int:
    problem = check_node_agent_args(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError as exc:
        print(f"error: lahar node-agent needs grpcio and protobuf ({exc}); "
              f"pip install -e '.[nodeagent]' in the clone", file=sys.stderr)
        return 1
    from scheduler.devices.node.agent import NodeAgent
    from scheduler.devices.node.inventory import InventoryError
    from scheduler.devices.node.resources import AgentConfig, AgentConfigError

    legacy: list[str] = []
    if args.dra:
        from dataclasses import replace

        from scheduler.commands.nodeagent_dra import dra_main, legacy_families

        try:
            families = _families(args)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        legacy = legacy_families(args, families)
        if not legacy:
            return dra_main(args, families=replace(families, profile=args.vgpu_profile
                                                   or "hami"),
                            source_of=_source, mig_of=_mig_source)
    node = args.node_name or os.environ.get("NODE_NAME") or socket.gethostname()
    dra_source: Any = None
    try:
        config = AgentConfig(node_name=node, devices=_families(args),
                             hook_path=os.environ.get("HOOK_PATH") or args.hook_path,
                             hami_core_library=args.hami_core_library, sysfs=args.sysfs,
                             prepare_host_dirs=not (args.fake_gpus or args.fake_inventory),
                             vgpu_mode=args.vgpu_mode,
                             cdi=args.cdi, cdi_root=args.cdi_root, mps_root=args.mps_root,
                             **_core_settings(args, node))
        config.check()
        source = _source(args, node)
        if legacy:  # --dra next to device-plugin families: distinct cards (--dra-cards)
            from scheduler.commands.nodeagent_dra import split

            source, dra_source = split(args, source, legacy)
        mig = _mig_source(args, source) if config.vgpu_mode == "mig" else None
        if args.metrics_address:
            from scheduler.devices.node.metrics import parse_address

            parse_address(args.metrics_address)
    except (AgentConfigError, InventoryError, OSError, ValueError) as exc:  # ConfError too
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        print("error: reading GPUs needs nvidia-ml-py (pip install -e '.[nodeagent]' in the "
              "clone); use --fake-gpus on a machine without GPUs", file=sys.stderr)
        return 1
    except Exception as exc:  # NVML cannot start: no driver
        print(f"error: NVML cannot start ({exc}): no NVIDIA driver or GPU; use --fake-gpus "
              f"to run without GPUs", file=sys.stderr)
        return 1
    access = _DeferredAccess()
    checkpoint = args.kubelet_checkpoint or os.path.join(args.kubelet_dir,
                                                         "kubelet_internal_checkpoint")
    agent = NodeAgent(config=config, source=source, access=cast(Any, access),
                      kubelet_dir=args.kubelet_dir, checkpoint_path=checkpoint,
                      health_interval=args.health_interval, report_period=args.report_period,
                      events=_events(source), xid_recovery=args.xid_recovery,
                      mig=mig, driver_root=args.driver_root)
    stop, restart, interrupted = threading.Event(), threading.Event(), threading.Event()
    set_on_signals({signal.SIGTERM: stop, signal.SIGINT: interrupted, signal.SIGHUP: restart})

    def stop_on_interrupt() -> None:
        interrupted.wait()
        stop.set()

    threading.Thread(target=stop_on_interrupt, daemon=True, name="interrupt").start()
    try:
        if args.metrics_address:
            agent.metrics = _metrics(args, config, source, node, access)
            agent.metrics.start()
        agent.start()
    except OSError as exc:
        where = args.kubelet_dir if agent.metrics is None or agent.metrics.port else \
            f"--metrics-address {args.metrics_address}"
        print(f"error: cannot serve in {where}: {exc}", file=sys.stderr)
        access.connect(None)
        return 1
    try:
        from scheduler.cluster.kube.client import KubeClient
        from scheduler.cluster.kube.nodeaccess import KubeNodeAccess

        client = KubeClient.from_flags(kubeconfig=args.kubeconfig, master=args.master,
                                       context=args.context)
    except BaseException:
        access.connect(None)
        agent.stop()
        raise
    node_access = KubeNodeAccess(client)
    access.connect(node_access, host=client.host)
    dra_agent = None
    if dra_source is not None:
        from scheduler.commands.nodeagent_dra import start_dra

        dra_agent = start_dra(args, config=config, source=dra_source, client=client)
    agent.wait(stop, restart)
    if dra_agent is not None:
        dra_agent.stop()
    node_access.close()
    client.close()
    if interrupted.is_set():
        print("lahar node-agent: interrupted (Ctrl-C); stopped.", file=sys.stderr)
        return INTERRUPTED
    return 0


INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""


class _DeferredAccess:
    """The agent's API server access once :meth:`connect` gives it; until then every call
    waits, so the endpoints can be served and registered before the client is built."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._access: Any = None
        self._host = ""

    def connect(self, access: Any, *, host: str = "") -> None:
        """Hand over the access (None: there will be none, and waiting calls fail); ``host``
        is named in the errors of calls that cannot reach it."""
        self._access = access
        self._host = host
        self._ready.set()

    def __getattr__(self, name: str) -> Any:
        self._ready.wait()
        if self._access is None:
            raise RuntimeError("no connection to the API server")
        found = getattr(self._access, name)
        return _naming_host(found, self._host) if callable(found) and self._host else found


def _naming_host(call: Any, host: str) -> Any:
    """``call``, whose connection errors say which API server could not be reached."""

    def named(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except (ConnectionError, TimeoutError, socket.gaierror) as exc:
            raise type(exc)(f"API server {host}: {exc}") from exc

    return named
