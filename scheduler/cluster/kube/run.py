"""``lahar run``: connect to the API server, win the Lease, mirror the cluster, schedule.

Start-up order follows ``vc-scheduler``: logging → HTTP endpoints (``/readyz`` false for now) →
API connection (retried with backoff while the server is unreachable; the process does not
crash) → leader election (default on) → as leader: writer, cache, reflectors, default queue,
then the loop. Two steps overlap to start faster: the connection, and right after it the
reflectors' first LISTs (:mod:`~scheduler.cluster.kube.firstlist`), run in a thread while the
conf loads (which imports the plugins, the framework and numpy), and the cache and loop modules
are imported only once those LISTs are on their way; a line ``start-up`` logs when each step
happened (:mod:`~scheduler.cluster.kube.startuplog`). Losing the Lease stops the process with
exit code 1 so the pod restarts as a standby, as Volcano does. SIGTERM/SIGINT stop gracefully
and release the Lease.

The loop glue at the bottom (:class:`ConfWatcher`, :func:`write_cache_dump`,
:func:`schedule_forever`) is the only place that touches the scheduler core's API.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.firstlist import FirstLists, send_first_lists
from scheduler.cluster.kube.flags import add_run_arguments, normalize
from scheduler.cluster.kube.leader import LeaderElector, LeaseConfig
from scheduler.cluster.kube.reflector import (
    NODESHARDS,
    RESOURCES,
    Handler,
    Reflector,
    ReflectorGroup,
    ResourceSpec,
)
from scheduler.cluster.kube.retry import status_of
from scheduler.cluster.kube.startuplog import StartupTimes
from scheduler.cluster.kube.volcano_flags import not_acted_on
from scheduler.httpserver import HttpServer
from scheduler.logs import configure_logging
from scheduler.signals import set_on_signals

if TYPE_CHECKING:  # imported where used: after the first LISTs are on their way
    from scheduler.cluster.kube.discovery import DiscoveryController
    from scheduler.cluster.kube.podgroups import PodGroupController
    from scheduler.cluster.kube.writer import KubeClusterWriter

__all__ = ["ConfWatcher", "Health", "add_run_arguments", "check_api", "run_main",
           "write_cache_dump"]

log = structlog.get_logger("lahar.run")


API_CHECK_PERIOD = 5.0
"""Seconds between two reads that check the API server still serves data."""
UNANSWERED_AFTER = 15.0
"""``/readyz`` fails once the API server has not served a read for this many seconds."""


@dataclass(slots=True)
class Health:
    """What ``/healthz`` and ``/readyz`` report."""

    leader_elect: bool = True
    connected: bool = False
    leading: bool = False
    synced: bool = False
    last_beat: float = field(default_factory=time.monotonic)
    wedged_after: float = 300.0
    last_answer: float = field(default_factory=time.monotonic)
    """When the API server last served a read (:func:`check_api`)."""
    unanswered_after: float = UNANSWERED_AFTER
    clock: Callable[[], float] = time.monotonic

    def ready(self) -> bool:
        """Connected, the API server serving reads lately, and synced when this replica is
        the one scheduling."""
        if not self.connected or self.clock() - self.last_answer > self.unanswered_after:
            return False
        return self.synced or (self.leader_elect and not self.leading)

    def answered(self) -> None:
        self.last_answer = self.clock()

    def alive(self) -> bool:
        """False only when a leading loop has not completed a cycle for a long time."""
        return not (self.leading and self.synced
                    and time.monotonic() - self.last_beat > self.wedged_after)

    def beat(self) -> None:
        self.last_beat = time.monotonic()


def run_main(args: argparse.Namespace, *, stop: threading.Event | None = None) -> int:
    """Run the scheduler against a cluster until stopped; returns the process exit code."""
    normalize(args)
    configure_logging(verbosity=args.verbosity, fmt=args.log_format)
    for flag in not_acted_on(args):
        log.warning("flag accepted for Volcano compatibility but not acted on", flag=flag)
    stop = stop or threading.Event()
    dump_requested = threading.Event()
    interrupted = _install_signals(stop, dump_requested if args.cache_dumper else None)
    gates = getattr(args, "feature_gates", "")
    health = Health(leader_elect=args.leader_elect,
                    wedged_after=max(300.0, 10 * args.schedule_period))
    servers = _start_servers(args, health)
    # Connecting and the first LISTs run while the conf loads (its plugins and actions import
    # the scheduling framework and numpy: most of a start's CPU).
    connecting = _Connecting(args, stop, health)
    client: KubeClient | None = None
    exit_code = 0
    try:
        conf = _load_conf(args, gates)
        client, first_lists = connecting.result()
        if client is None:
            return INTERRUPTED if interrupted.is_set() else 0 if stop.is_set() else 1
        connected = client
        health.answered()
        threading.Thread(target=_check_api_forever, args=(client, health, stop), daemon=True,
                         name="api-check").start()

        def lead(leading: Callable[[], bool]) -> None:
            schedule_forever(connected, args=args, conf=conf, health=health, stop=stop,
                             dump_requested=dump_requested, leading=leading,
                             first_lists=first_lists)

        if not args.leader_elect:
            exit_code = _run_until_stopped(lead, stop)
        else:
            exit_code = _run_elected(client, args, lead, health, stop)
    finally:
        if connecting.running:  # the conf failed to load: end the connection attempt too
            stop.set()
            client = connecting.result()[0]
        for server in servers:
            server.stop()
        if client is not None:
            client.close()
        if interrupted.is_set():
            print("lahar run: interrupted (Ctrl-C); stopped.", file=sys.stderr)
    return INTERRUPTED if interrupted.is_set() else exit_code


INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""


def check_api(client: KubeClient, health: Health) -> bool:
    """One read the API server must serve from etcd (a node list of one): an answer, even a
    refusal, counts; a timeout, a lost connection or a 5xx does not."""
    try:
        client.request_json("GET", "/api/v1/nodes", query={"limit": "1"}, timeout=(3.0, 5.0))
    except Exception as error:
        status = status_of(error)
        if status is None or status == 0 or status >= 500:
            return False
    health.answered()
    return True


def _check_api_forever(client: KubeClient, health: Health, stop: threading.Event) -> None:
    unanswered = False
    while not stop.wait(API_CHECK_PERIOD):
        if check_api(client, health):
            if unanswered:
                log.info("the API server serves reads again")
            unanswered = False
        elif not unanswered:
            unanswered = True
            log.warning("the API server did not serve a read; /readyz fails after",
                        seconds=UNANSWERED_AFTER)


def _install_signals(stop: threading.Event,
                     dump_requested: threading.Event | None) -> threading.Event:
    """SIGTERM/SIGINT stop, SIGUSR1 asks for a cache dump; nothing off the main thread
    (embedded in tests, the caller owns ``stop``). Returns the event SIGINT sets (with
    ``stop``), so that Ctrl-C ends with its own status."""
    interrupted = threading.Event()
    events = {signal.SIGTERM: stop, signal.SIGINT: interrupted}
    if dump_requested is not None and hasattr(signal, "SIGUSR1"):
        events[signal.SIGUSR1] = dump_requested
    if set_on_signals(events):

        def stop_on_interrupt() -> None:
            interrupted.wait()
            stop.set()

        threading.Thread(target=stop_on_interrupt, daemon=True, name="interrupt").start()
    return interrupted


def _start_servers(args: argparse.Namespace, health: Health) -> list[HttpServer]:
    wanted: dict[str, set[str]] = {}
    if args.enable_metrics:
        wanted.setdefault(args.listen_address, set()).add("/metrics")
    if args.enable_healthz:
        wanted.setdefault(args.healthz_address, set()).update({"/healthz", "/readyz"})
    return [HttpServer(address, endpoints=endpoints, healthz=health.alive,
                       readyz=health.ready).start()
            for address, endpoints in wanted.items()]


def _load_conf(args: argparse.Namespace, gates: str) -> Any:
    """The conf of ``--scheduler-conf`` (the built-in one when it does not load), with the
    collector off meanwhile: loading it imports the plugins, the actions, the framework and
    numpy, hundreds of modules whose objects all live on, and the full collections that
    allocating them sets off would walk them again and again (about a seventh of the
    imports' CPU)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from scheduler.conf import ConfError, load_conf
        from scheduler.deviceconf import with_dra

        try:
            return with_dra(load_conf(args.scheduler_conf or None), gates)
        except ConfError as error:
            log.error("cannot load the scheduler conf; using the built-in default",
                      error=str(error))
            return with_dra(load_conf(None), gates)
    finally:
        if collecting:
            gc.enable()


WARM_BINDS = 8
"""Connections opened for the first cycle's binds as the caches sync (see ``Transport.warm``)."""

FIRST_LISTS_KEPT = 30.0
"""Seconds the first LISTs' answers wait for the scheduler to take them (a standby that has not
won the Lease by then drops them and lists again when it leads)."""


class _Connecting:
    """:func:`_connect` and then the first LISTs (:func:`send_first_lists`), in a thread."""

    def __init__(self, args: argparse.Namespace, stop: threading.Event,
                 health: Health) -> None:
        self._outcome: tuple[KubeClient | None, FirstLists | None] = (None, None)
        self._thread = threading.Thread(target=self._run, args=(args, stop, health),
                                        daemon=True, name="connect")
        self._thread.start()

    def _run(self, args: argparse.Namespace, stop: threading.Event, health: Health) -> None:
        client = _connect(args, stop, health)
        if client is not None:
            self._outcome = (client, send_first_lists(client, resources_watched(args),
                                                      keep_for=FIRST_LISTS_KEPT))
        else:
            self._outcome = (None, None)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> tuple[KubeClient | None, FirstLists | None]:
        self._thread.join()
        return self._outcome


def _connect(args: argparse.Namespace, stop: threading.Event,
             health: Health) -> KubeClient | None:
    """A client whose server answered; None when stopped first or the config is unusable."""
    failures = 0
    while not stop.is_set():
        try:
            client = KubeClient.from_flags(kubeconfig=args.kubeconfig or None,
                                           master=args.master or None,
                                           context=args.context or None,
                                           qps=args.kube_api_qps, burst=args.kube_api_burst)
        except (OSError, ValueError) as error:  # a ConfigError is a ValueError
            log.error("cannot build the API client configuration", error=str(error))
            return None
        try:
            client.request_json("GET", "/version", timeout=(5.0, 10.0))
        except Exception as error:
            status = status_of(error)
            if status is None or status == 0 or status >= 500:
                client.close()
                failures += 1
                delay = random.uniform(0, min(30.0, 0.5 * 2 ** min(failures, 10)))
                log.warning("API server unreachable; retrying", host=client.host,
                            error=str(error), retry_in=round(delay, 2))
                stop.wait(delay)
                continue
        health.connected = True
        log.info("connected to the API server", host=client.host)
        return client
    return None


Lead = Callable[[Callable[[], bool]], None]
"""The leader's work; called with "may this replica still write?"."""


def _lead_guarded(lead: Lead, leading: Callable[[], bool], stop: threading.Event,
                  outcome: dict[str, int]) -> None:
    """Run ``lead``; an unexpected error is logged, sets exit code 1 and stops the process."""
    try:
        lead(leading)
    except Exception:
        log.exception("scheduler stopped by an unexpected error")
        outcome["code"] = 1
        stop.set()


def _run_until_stopped(lead: Lead, stop: threading.Event) -> int:
    outcome = {"code": 0}
    worker = threading.Thread(target=_lead_guarded, args=(lead, lambda: True, stop, outcome),
                              daemon=True, name="scheduler")
    worker.start()
    while not stop.wait(0.5):
        pass
    worker.join(30.0)
    return outcome["code"]


def _run_elected(client: KubeClient, args: argparse.Namespace, lead: Lead,
                 health: Health, stop: threading.Event) -> int:
    elector = LeaderElector(client, LeaseConfig(
        name=args.leader_elect_resource_name, namespace=args.leader_elect_resource_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period))
    outcome = {"code": 0}
    finished = threading.Event()

    def started() -> None:
        health.leading = True
        try:
            _lead_guarded(lead, elector.is_leader, stop, outcome)
        finally:
            finished.set()

    def stopped() -> None:
        health.leading = False
        if not stop.is_set():
            log.error("lost the leader lease; exiting", identity=elector.identity)
            outcome["code"] = 1
            stop.set()
        finished.wait(args.leader_elect_renew_deadline)  # no writes once the lease is gone

    campaign = threading.Thread(target=elector.run, args=(started, stopped), daemon=True,
                                name="leader-election")
    campaign.start()
    while not stop.wait(0.5):
        pass
    elector.stop()
    campaign.join(args.leader_elect_renew_deadline + 5.0)
    return outcome["code"]


# -- loop glue: the only code that knows the scheduler core's API -------------------------------

class ConfWatcher:
    """Reloads the conf when the file or its directory changes (ConfigMaps swap a symlink).

    Polled from the loop about once a second; a conf that fails to load is logged and the
    previous one kept.
    """

    def __init__(self, path: str, *, load: Callable[[str], Any], apply: Callable[[Any], None],
                 interval: float = 1.0) -> None:
        self.path = path
        self.load = load
        self.apply = apply
        self.interval = interval
        self._signature = self._current()
        self._checked = time.monotonic()

    def _current(self) -> tuple[Any, ...]:
        def stat(path: str) -> tuple[int, int, int] | None:
            try:
                info = os.stat(path)
            except OSError:
                return None
            return info.st_ino, info.st_mtime_ns, info.st_size

        directory = os.path.dirname(os.path.abspath(self.path))
        return os.path.realpath(self.path), stat(self.path), stat(directory)

    def poll(self, *, force: bool = False) -> bool:
        """Reload if due and changed; True when a new conf was applied."""
        now = time.monotonic()
        if not force and now - self._checked < self.interval:
            return False
        self._checked = now
        signature = self._current()
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            conf = self.load(self.path)
        except Exception as error:
            log.error("scheduler conf changed but does not load; keeping the previous one",
                      path=self.path, error=str(error))
            return False
        self.apply(conf)
        log.info("scheduler conf reloaded", path=self.path)
        return True


def write_cache_dump(dump: dict[str, Any], directory: str) -> str:
    """Write ``dump`` as JSON into ``directory``; returns the file's path."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    path = os.path.join(directory, f"lahar-cache-{stamp}-{os.getpid()}.json")
    partial = path + ".partial"
    with open(partial, "w") as handle:
        json.dump(dump, handle, indent=1, sort_keys=True, default=str)
    os.replace(partial, path)
    return path


def _dump(cache: Any, directory: str) -> None:
    try:
        log.info("cache dumped", path=write_cache_dump(cache.dump(), directory))
    except OSError as error:
        log.error("cannot write the cache dump", directory=directory, error=str(error))


def _device_config_maps(client: Any, conf: Any) -> list[dict[str, Any]]:
    """Volcano's device ConfigMap, read once at start as Volcano reads it (none: defaults)."""
    from scheduler.deviceconf import device_config_map_path

    path = device_config_map_path(conf)
    if path is None:
        return []
    try:
        return [client.request_json("GET", path)]
    except Exception as exc:  # absent or forbidden: Volcano also falls back to its defaults
        log.info("device ConfigMap not read; built-in vGPU defaults used", path=path,
                 error=str(exc))
        return []


def _feed(cache: Any, kind: str, groups: PodGroupController | None = None,
          discovery: DiscoveryController | None = None,
          seen: Callable[[], None] | None = None) -> Handler:
    def handler(event_type: str, obj: dict[str, Any]) -> None:
        cache.apply(event_type, kind, obj)
        if seen is not None:
            seen()
        if groups is not None and kind == "Pod":
            groups.observe(event_type, obj)
        if discovery is not None and kind in ("Node", "HyperNode"):
            discovery.observe(kind, event_type, obj)

    return handler


def _known_podgroup(cache: Any, namespace: str, name: str) -> bool:
    """Whether the cache holds the real PodGroup (not only the one a plain pod implies)."""
    uid = f"{namespace}/{name}"
    return uid in cache.podgroups and uid not in cache.implied


def _report_pod(writer: KubeClusterWriter, pod: Mapping[str, Any], message: str) -> None:
    from scheduler.cache.interface import ObjectRef

    meta = pod.get("metadata") or {}
    involved = ObjectRef(kind="Pod", name=meta.get("name", ""),
                         namespace=meta.get("namespace", "default"), uid=meta.get("uid", ""))
    try:
        writer.record_event(involved=involved, type="Warning", reason="FailedCreatePodGroup",
                            message=message)
    except Exception as error:
        log.warning("cannot record event", pod=involved.name, error=str(error))


def _ensure_default_queue(writer: KubeClusterWriter, name: str, stop: threading.Event, *,
                          deadline: float | None = None) -> None:
    """Create the default queue if missing, retrying once a second, at most 60 times and,
    with a ``deadline`` (``time.monotonic``), not past it: --resource-sync-timeout bounds the
    whole wait before the first cycle, this included."""
    for attempt in range(60):
        try:
            if writer.ensure_queue(name):
                log.info("created the default queue", queue=name)
            return
        except Exception as error:
            log.warning("cannot ensure the default queue yet", queue=name, error=str(error),
                        attempt=attempt + 1)
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                log.error("default queue not ensured within --resource-sync-timeout; "
                          "scheduling anyway", queue=name)
                return
            if stop.wait(left):
                return
    log.error("giving up creating the default queue", queue=name)


def resources_watched(args: argparse.Namespace) -> tuple[ResourceSpec, ...]:
    """Every collection the cache mirrors; NodeShards only with node sharding on, as
    Volcano starts its NodeShard informer only then."""
    if args.scheduler_sharding_mode == "none":
        return RESOURCES
    return (*RESOURCES, NODESHARDS)


def schedule_forever(client: KubeClient, *, args: argparse.Namespace, conf: Any, health: Health,
                     stop: threading.Event, dump_requested: threading.Event,
                     leading: Callable[[], bool] = lambda: True,
                     first_lists: FirstLists | None = None) -> None:
    """The leader's work: mirror the cluster into the cache and run cycles until ``stop``.

    Binds leave from ``--bind-workers`` threads, each only while ``leading()``; status writes
    from a coalescing writer. At the end queued binds are sent if this replica still leads
    (graceful stop) and dropped if it lost the Lease; status writes are flushed either way,
    before the Lease is released, and after a lost Lease only within half the time before
    another replica may take it.
    """
    times = StartupTimes()
    times.mark("leading")
    # The first LISTs go out before the scheduler core is imported (most of a start's CPU),
    # so that the API server answers while this process imports; ``run_main`` sent them
    # already, while the conf loaded (unless they were dropped while the Lease was waited for).
    if first_lists is None or not len(first_lists):
        first_lists = send_first_lists(client, resources_watched(args))
    times.mark("lists_sent", at=first_lists.sent_at)
    from scheduler.cache.cache import SchedulerCache
    from scheduler.cluster.kube.cyclemetrics import record_cycle
    from scheduler.cluster.kube.podgroups import PodGroupController
    from scheduler.cluster.kube.sessionmetrics import LaharGauges, SessionMetrics, chain
    from scheduler.cluster.kube.writer import KubeClusterWriter
    from scheduler.collector import Collector
    from scheduler.conf import load_conf
    from scheduler.deviceconf import device_support, with_dra
    from scheduler.framework.session import NodeSampling
    from scheduler.loop import Scheduler

    times.mark("imported")
    writer = KubeClusterWriter(client, scheduler_name=args.scheduler_name[0])
    # Device families come from the conf at start; switching them needs a restart.
    devices = device_support(conf, config_maps=_device_config_maps(client, conf))
    cache = SchedulerCache(writer=writer, scheduler_names=args.scheduler_name,
                           default_queue=args.default_queue, clock=time.time,
                           node_selector=args.node_selector,
                           implied_groups=args.enable_podgroup_controller,
                           sharding_mode=args.scheduler_sharding_mode,
                           sharding_name=args.scheduler_sharding_name,
                           **devices.cache_options())
    devices.install(cache, access=writer, clock=time.time)
    # A restart waits for the sync and the first cycle: pods' strings are interned after it,
    # while the loop waits between cycles (scheduler/cache/intern.py).
    cache.strings.deferred = True
    cache.start_background(bind_workers=args.bind_workers, gate=leading)
    writer.background = cache.enqueue_status
    writer.may_bind = leading  # checked again before each retry of a bind
    binds = cache.binds
    groups = (PodGroupController(client, args.scheduler_name,
                                 report=lambda pod, message: _report_pod(writer, pod, message),
                                 yield_to=lambda: binds is not None and binds.recently_busy(),
                                 known=lambda namespace, name: _known_podgroup(cache, namespace,
                                                                               name))
              if args.enable_podgroup_controller else None)
    discovery: DiscoveryController | None = None
    if args.hypernode_discovery_config:  # its module only then (a few dataclasses, 6 ms)
        from scheduler.cluster.kube.discovery import DiscoveryController

        discovery = DiscoveryController(client, args.hypernode_discovery_config,
                                        leading=leading)
    gauges = LaharGauges(cache, groups)
    reflectors = ReflectorGroup([Reflector(client=client, resource=spec,
                                           handler=_feed(cache, spec.kind, groups, discovery,
                                                         seen=gauges.saw_event),
                                           first_page=first_lists.take(spec.path))
                                 for spec in resources_watched(args)])
    if groups is not None:
        groups.synced = lambda: reflectors.has_synced
    # The first mirror makes objects that live on (pods, nodes, their tasks): collections
    # while it loads would only walk them again and again. Once it is in, they leave the
    # collector's reach (gc.freeze), and so does what survives each cycle (see Collector).
    collector = Collector()
    collecting = gc.isenabled()
    gc.disable()
    reflectors.start(stop)
    if groups is not None:
        groups.start(stop)
    if discovery is not None:  # off the loop's path, only while leading, after the sync
        discovery.synced = lambda: reflectors.has_synced
        discovery.start(stop)
    sync_deadline = (time.monotonic() + args.resource_sync_timeout
                     if args.resource_sync_timeout else None)
    _ensure_default_queue(writer, args.default_queue, stop, deadline=sync_deadline)
    timeout = None if sync_deadline is None else max(0.0, sync_deadline - time.monotonic())
    try:
        if not reflectors.wait_for_sync(stop, timeout=timeout) and not stop.is_set():
            log.warning("caches not synced in time; scheduling anyway", timeout=timeout)
    finally:
        collector.settle()
        if collecting:
            gc.enable()
    times.mark("synced")
    # The first cycle's binds leave together, each on a connection of its own: open a few
    # while the cycle runs (the watches have taken theirs by now), so that the first binds do
    # not each wait for a TLS handshake.
    threading.Thread(target=client.transport.warm, args=(min(args.bind_workers, WARM_BINDS),),
                     daemon=True, name="warm-connections").start()
    # A queue created a moment ago reaches the cache through its watch; without this wait the
    # first cycles would tell the default queue's pods that their queue does not exist.
    for _ in range(100):
        with cache.lock:
            if any(queue.name == args.default_queue for queue in cache.queues.values()):
                break
        if stop.wait(0.05):
            break
    scheduler = Scheduler(cache=cache, conf=conf, clock=time.time, rng=random.Random(),
                          sampling=NodeSampling(args.percentage_nodes_to_find,
                                                args.minimum_feasible_nodes,
                                                args.minimum_percentage_nodes_to_find),
                          on_cycle=lambda stats: record_cycle(stats, cache),
                          # session-only metrics, then the web view's publisher (set by
                          # ``lahar run --web-address``)
                          on_close=chain(SessionMetrics(), gauges,
                                         getattr(args, "on_close", None)))
    watcher = (ConfWatcher(args.scheduler_conf,
                           load=lambda path: with_dra(load_conf(path),
                                                      getattr(args, "feature_gates", "")),
                           apply=scheduler.set_conf)
               if args.scheduler_conf else None)
    log.info("scheduling", names=args.scheduler_name, period=args.schedule_period,
             period_from=args.schedule_period_from, on_arrival=args.schedule_on_arrival)
    from_start = args.schedule_period_from == "start"
    sent = 0
    try:
        while not stop.is_set():
            health.synced = reflectors.has_synced
            # Volcano's period runs from the end of runOnce (wait.Until, sliding), ours from
            # its start with --schedule-period-from=start. Either way what this process does
            # after a cycle (writes queued for flush, a full collection) takes its time out of
            # the wait, not on top of it.
            deadline: float | None = None
            started = time.monotonic()
            cache.arrived.clear()  # what arrives from here on is in this snapshot or wakes the next
            # From this moment an arrival ends the wait (--schedule-on-arrival; never when off).
            wakeable = started + args.schedule_on_arrival if args.schedule_on_arrival else math.inf
            try:
                stats = scheduler.run_once()
                times.mark("first_cycle_done")
                cache.strings.deferred = False
                deadline = (started if from_start else time.monotonic()) + args.schedule_period
                cache.flush()
                # Busy: binds went out since the last cycle, or writes are waiting.
                sent_before = sent
                sent = binds.sent if binds is not None else 0
                collector.after_cycle(busy=sent != sent_before or cache.pending_writes > 0)
                log.debug("cycle done", seconds=round(stats.seconds, 4), jobs=stats.jobs,
                          binds_waiting=cache.binds.backlog if cache.binds else 0,
                          status_waiting=cache.background.backlog if cache.background else 0)
            except Exception:
                log.exception("scheduling cycle failed")
            times.report()
            health.beat()
            if deadline is None:  # the cycle failed
                deadline = time.monotonic() + args.schedule_period
            cache.intern_deferred()  # some each cycle, the rest while there is time to wait
            while True:
                if watcher is not None:
                    watcher.poll()
                if dump_requested.is_set():
                    dump_requested.clear()
                    _dump(cache, args.cache_dump_dir)
                now = time.monotonic()
                if now >= deadline:
                    break
                if cache.intern_deferred():
                    if now >= wakeable and cache.arrived.is_set():
                        break
                    continue
                if now >= wakeable:
                    if cache.arrived.wait(min(deadline - now, 0.1)) or stop.is_set():
                        break
                elif stop.wait(min(deadline, wakeable, now + 1.0) - now):
                    break
    finally:
        still_leading = leading()
        if not args.leader_elect:
            grace = 10.0
        elif still_leading:  # both steps end before the elector releases the Lease
            grace = args.leader_elect_renew_deadline / 2
        else:  # the Lease is gone; another replica may take it after the difference
            grace = (args.leader_elect_lease_duration - args.leader_elect_renew_deadline) / 2
        cache.stop_background(send_binds=still_leading, timeout=grace)
        if cache.binds is not None and cache.binds.discarded:
            log.warning("binds not sent: this replica no longer leads",
                        count=cache.binds.discarded)
        reflectors.interrupt()
        reflectors.join(timeout=5.0)
        if groups is not None:
            groups.join(timeout=1.0)
        if discovery is not None:
            discovery.join(timeout=1.0)
