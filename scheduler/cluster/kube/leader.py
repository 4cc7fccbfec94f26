"""Lease-based leader election, so that exactly one scheduler replica writes at a time.

The elector follows client-go's rules for a ``coordination.k8s.io/v1`` Lease:

* A candidate takes the lease when it is free (no holder) or when the holder's record has not
  changed for ``leaseDurationSeconds`` *as observed on the candidate's own monotonic clock* — so
  skewed wall clocks between nodes cannot make a live lease look expired.
* Every write carries ``metadata.resourceVersion``; of two racing candidates the API server lets
  exactly one through and the other gets 409.
* The leader renews every ``retry_period``. It considers itself leader only until
  ``renew_deadline`` after the *start* of its last successful renewal, and ``renew_deadline`` is
  shorter than the lease duration, so it has stepped down before anyone else may take over.

Losing the lease calls ``on_stopped_leading``; the process is expected to exit, as Volcano does.
A graceful :meth:`LeaderElector.stop` releases the lease so a standby takes over at once.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.cluster.kube.client import KubeClient, object_path
from scheduler.cluster.kube.retry import status_of

__all__ = ["LeaderElector", "LeaseConfig", "default_identity", "micro_time"]

_log = logging.getLogger(__name__)
COORDINATION = "/apis/coordination.k8s.io/v1"


def default_identity() -> str:
    """``<hostname>_<uuid4>``, unique per process even for pods that share a hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(seconds: float) -> str:
    """MicroTime as the API server wants it: six fractional digits and a ``Z``."""
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Where the lease lives and how long it lasts (Volcano's defaults)."""

    name: str = "volcano"
    namespace: str = "volcano-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0, got "
                             f"{self.lease_duration}/{self.renew_deadline}/{self.retry_period}")


class LeaderElector:
    """Campaigns for one Lease; :meth:`run` blocks while campaigning and leading."""

    def __init__(self, client: KubeClient, config: LeaseConfig | None = None, *,
                 identity: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.config = config or LeaseConfig()
        self.identity = identity or default_identity()
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._valid_until: float | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._path = object_path(COORDINATION, "leases", namespace=self.config.namespace,
                                 name=self.config.name)

    def is_leader(self) -> bool:
        """True while the last successful renewal is younger than the renew deadline."""
        valid_until = self._valid_until
        return valid_until is not None and self._monotonic() < valid_until

    def stop(self) -> None:
        """Stop campaigning; a leader releases the lease and calls ``on_stopped_leading``."""
        self._stop.set()

    def run(self, on_started_leading: Callable[[], None],
            on_stopped_leading: Callable[[], None]) -> None:
        """Acquire, start ``on_started_leading`` in a daemon thread, renew until lost or stopped."""
        config = self.config
        _log.info("leader election: %s campaigning for lease %s/%s", self.identity,
                  config.namespace, config.name)
        while not self._stop.is_set() and not self._try_acquire_or_renew():
            self._stop.wait(config.retry_period)
        if self._stop.is_set():
            return
        _log.info("leader election: %s became leader", self.identity)
        threading.Thread(target=on_started_leading, daemon=True, name="leading").start()
        try:
            self._renew_until_lost()
        finally:
            released = self._stop.is_set()
            if not released:
                self._valid_until = None
                _log.error("leader election: %s lost lease %s/%s", self.identity,
                           config.namespace, config.name)
            try:
                # Leader work ends before anyone else may start. On a graceful stop the lease
                # is still ours until released, so is_leader() stays true (up to the renew
                # deadline) while the leader finishes its writes.
                on_stopped_leading()
            finally:
                self._valid_until = None
                if released:
                    self._release()

    def _renew_until_lost(self) -> None:
        while not self._stop.wait(self.config.retry_period):
            while not self._try_acquire_or_renew():
                if not self.is_leader() or self._stop.is_set():
                    return
                self._stop.wait(self.config.retry_period / 4)

    def _try_acquire_or_renew(self) -> bool:
        started = self._monotonic()
        budget = max(self.config.renew_deadline / 2, 0.2)
        try:
            lease = self.client.request_json("GET", self._path, timeout=(budget, budget))
        except Exception as error:
            if status_of(error) != 404:
                _log.warning("leader election: reading lease failed: %s", error)
                return False
            return self._create(started, budget)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"),
                  spec.get("leaseDurationSeconds"))
        if record != self._observed:
            # Observed when the answer arrived: never earlier than the holder's last write.
            self._observed, self._observed_at = record, self._monotonic()
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
            if self._monotonic() < self._observed_at + duration:
                return False
        now = micro_time(self._wall_clock())
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            new_spec["acquireTime"] = now
        new_spec.update(holderIdentity=self.identity, renewTime=now,
                        leaseDurationSeconds=self._duration_seconds())
        lease["spec"] = new_spec
        try:
            self.client.request_json("PUT", self._path, body=lease, timeout=(budget, budget))
        except Exception as error:
            _log.info("leader election: updating lease failed: %s", _short(error))
            return False
        self._renewed(started)
        return True

    def _create(self, started: float, budget: float) -> bool:
        now = micro_time(self._wall_clock())
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": {"holderIdentity": self.identity,
                         "leaseDurationSeconds": self._duration_seconds(),
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        collection = object_path(COORDINATION, "leases", namespace=self.config.namespace)
        try:
            self.client.request_json("POST", collection, body=body, timeout=(budget, budget))
        except Exception as error:
            _log.info("leader election: creating lease failed: %s", _short(error))
            return False
        self._renewed(started)
        return True

    def _renewed(self, started: float) -> None:
        self._valid_until = started + self.config.renew_deadline

    def _duration_seconds(self) -> int:
        return max(1, math.ceil(self.config.lease_duration))

    def _release(self) -> None:
        """Hand the lease back (empty holder, 1 s duration) if we still hold it."""
        try:
            lease = self.client.request_json("GET", self._path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1,
                        renewTime=micro_time(self._wall_clock()))
            lease["spec"] = spec
            self.client.request_json("PUT", self._path, body=lease)
            _log.info("leader election: %s released the lease", self.identity)
        except Exception as error:
            _log.warning("leader election: releasing the lease failed: %s", _short(error))


def _short(error: BaseException) -> str:
    status = status_of(error)
    return f"HTTP {status}" if status else f"{type(error).__name__}: {error}"
