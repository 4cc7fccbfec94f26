"""The scheduling loop body: snapshot, open a session, run the actions, close.

One :meth:`Scheduler.run_once` is one Volcano ``runOnce``. The conf may be swapped between
cycles (hot reload); plugins are rebuilt from it for every session.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from actions import ACTIONS, Action
from plugins import PLUGINS
from scheduler.cache.cache import SchedulerCache
from scheduler.conf import SchedulerConf
from scheduler.deviceconf import with_device_plugin
from scheduler.framework.close import close_session
from scheduler.framework.session import NodeSampling, PluginEntry, Session

__all__ = ["CycleStats", "Scheduler"]

log = structlog.get_logger("lahar.scheduler")


@dataclass(slots=True)
class CycleStats:
    seconds: float = 0.0
    action_seconds: dict[str, float] = field(default_factory=dict)
    plugin_open_seconds: float = 0.0
    plugin_seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    """``(plugin, "OnSessionOpen"|"OnSessionClose")`` → seconds, as Volcano's plugin metric."""
    jobs: int = 0
    nodes: int = 0


class _Actions(dict[str, Action]):
    """Action name → its one instance, made at its first lookup: the registry imports an
    action's module only when a cycle first runs it."""

    def __missing__(self, name: str) -> Action:
        action = self[name] = ACTIONS[name]()
        return action


class Scheduler:
    def __init__(
        self,
        *,
        cache: SchedulerCache,
        conf: SchedulerConf,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        sampling: NodeSampling | None = None,
        on_cycle: Callable[[CycleStats], None] | None = None,
        on_close: Callable[[Session, CycleStats], None] | None = None,
    ) -> None:
        self.cache = cache
        self.conf = with_device_plugin(conf)
        self.clock = clock
        self.rng = rng or random.Random()
        self.sampling = sampling or NodeSampling()
        self.on_cycle = on_cycle
        self.on_close = on_close
        """Told each closed session before it is released (the web view is built there)."""
        self.cursor = 0
        self.actions = _Actions()

    def set_conf(self, conf: SchedulerConf) -> None:
        """Use ``conf`` from the next cycle on."""
        self.conf = with_device_plugin(conf)

    def open_session(self) -> Session:
        conf = self.conf
        tiers = [
            [PluginEntry(PLUGINS[option.name](option.args), option.flags, t) for option in tier]
            for t, tier in enumerate(conf.tiers)
        ]
        session = Session(
            self.cache.snapshot(),
            tiers=tiers,
            sink=self.cache,
            configurations=conf.configurations,
            clock=self.clock,
            rng=self.rng,
            enabled_actions=conf.actions,
            sampling=self.sampling,
            cursor=self.cursor,
        )
        session.open()
        return session

    def run_once(self) -> CycleStats:
        started = time.perf_counter()
        stats = CycleStats()
        session = self.open_session()
        stats.plugin_open_seconds = time.perf_counter() - started
        stats.jobs, stats.nodes = len(session.jobs), len(session.node_list)
        try:
            for name in self.conf.actions:
                action_started = time.perf_counter()
                self.actions[name].execute(session)
                stats.action_seconds[name] = time.perf_counter() - action_started
        finally:
            close_session(session)
            self.cache.report_orphans()
            self.cursor = session.cursor
            stats.plugin_seconds = dict(session.plugin_seconds)
            if self.on_close is not None:
                stats.seconds = time.perf_counter() - started
                self.on_close(session, stats)
            session.release()
        stats.seconds = time.perf_counter() - started
        if self.on_cycle is not None:
            self.on_cycle(stats)
        return stats
