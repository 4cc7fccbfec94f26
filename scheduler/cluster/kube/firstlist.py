"""The reflectors' first LIST requests, sent before the scheduler core is imported.

``lahar run`` needs the cache, the framework and numpy before it can take in a single object,
and importing them is most of what a start costs. The answers to the first LISTs do not need
any of it: :func:`send_first_lists` sends them from threads at once, and each
:class:`~scheduler.cluster.kube.reflector.Reflector` built later takes its answer (or its
error) in place of its own first request. The API server's work and the network wait then
overlap the imports instead of following them. kube-scheduler does the same in effect: its
informers start listing before its scheduling framework is set up
(``cmd/kube-scheduler/app/server.go``, ``Run``: ``InformerFactory.Start`` before
``WaitForCacheSync`` and the scheduling loop).

The request is exactly the reflector's own first page (:func:`first_page_query`), so what the
reflector then does (pages, 404 of an optional CRD, errors and back-off) is unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from scheduler.cluster.kube.client import KubeClient, QueryValue

if TYPE_CHECKING:
    from scheduler.cluster.kube.reflector import ResourceSpec

__all__ = ["FirstList", "FirstLists", "first_page_query", "send_first_lists"]

PAGE_SIZE = 500
"""The reflectors' page size (:class:`Reflector` ``page_size``)."""


def first_page_query(*, limit: int, label_selector: str | None,
                     field_selector: str | None) -> dict[str, QueryValue]:
    """The query of a reflector's first page: served from the API server's watch cache
    (``resourceVersion=0``), as client-go's reflectors ask."""
    return {"limit": limit, "continue": None, "resourceVersion": "0",
            "labelSelector": label_selector, "fieldSelector": field_selector}


class FirstList:
    """One first page on its way: :meth:`result` waits for it and returns the decoded answer,
    or raises what the request raised."""

    __slots__ = ("_done", "_error", "_page", "path", "query")

    def __init__(self, path: str, query: dict[str, QueryValue]) -> None:
        self.path = path
        self.query = query
        self._done = threading.Event()
        self._page: dict[str, Any] = {}
        self._error: BaseException | None = None

    def fetch(self, client: KubeClient) -> None:
        try:
            self._page = client.request_json("GET", self.path, query=self.query)
        except Exception as error:  # handed to the reflector, which decides
            self._error = error
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> dict[str, Any]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._page


class FirstLists:
    """The first pages sent, by collection path; each is taken once. With ``keep_for``, what
    is not taken by then is dropped (a standby replica does not hold a copy of the cluster
    while it waits for the Lease)."""

    def __init__(self, pending: dict[str, FirstList], *, sent_at: float,
                 keep_for: float | None = None) -> None:
        self._pending = pending
        self._lock = threading.Lock()
        self.sent_at = sent_at
        """When the requests left (``time.monotonic``)."""
        if keep_for is not None:
            timer = threading.Timer(keep_for, self.drop)
            timer.daemon = True
            timer.start()

    def take(self, path: str) -> FirstList | None:
        """The page sent for ``path`` (a reflector uses it only if its query is the one the
        reflector would send); None once taken or dropped."""
        with self._lock:
            return self._pending.pop(path, None)

    def drop(self) -> None:
        with self._lock:
            self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)


def send_first_lists(client: KubeClient, resources: Iterable[ResourceSpec], *,
                     page_size: int = PAGE_SIZE, keep_for: float | None = None) -> FirstLists:
    """Send the first page of every collection in ``resources``, each from a daemon thread;
    returns at once. ``keep_for``: seconds after which pages not taken are dropped."""
    sent_at = time.monotonic()
    pending: dict[str, FirstList] = {}
    for spec in resources:
        sent = FirstList(spec.path, first_page_query(limit=page_size,
                                                     label_selector=spec.label_selector,
                                                     field_selector=spec.field_selector))
        pending[spec.path] = sent
        threading.Thread(target=sent.fetch, args=(client,), daemon=True,
                         name=f"first-list-{spec.plural}").start()
    return FirstLists(pending, sent_at=sent_at, keep_for=keep_for)
