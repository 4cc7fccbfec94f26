"""``lahar node-agent --dra``: the kubelet plugin, the ResourceSlice publisher and the health
loop that keeps the two in step with the cards.

Start: the slices are published first (the scheduler can allocate as soon as they are there),
then the plugin's sockets are served (kubelet registers the driver and prepares claims). Every
``health_interval`` the inventory is read again; a change of health re-publishes the pool (the
publisher removes or taints an unhealthy card and bumps the generation) and prepare refuses the
unhealthy card from then on. Stop: the sockets go; the slices are deleted only when asked
(``--dra-delete-slices``), as a driver being upgraded keeps its pool.

``--dra-cards`` splits the cards between the device-plugin families and DRA:
:class:`CardSplit` gives each side its own view of the inventory, so no card is offered twice.
:func:`check_split` refuses at start what would serve a card both ways, naming the conflict.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from scheduler.devices.node.dra.plugin import DraPlugin
from scheduler.devices.node.inventory import DeviceSource, Inventory

__all__ = ["CardSplit", "DraAgent", "check_split", "parse_cards"]

log = structlog.get_logger("lahar.nodeagent")


class Publisher(Protocol):
    def sync(self, inventory: Inventory, mig: Any = None) -> bool: ...

    def delete_all(self) -> int: ...


def parse_cards(text: str) -> frozenset[int]:
    """``--dra-cards 0,1`` or ``0-3``: GPU indices. Raises ValueError naming the flag."""
    cards: set[int] = set()
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        low, _, high = token.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"--dra-cards: {token!r} is not a GPU index or a range like 0-3")
        cards.update(range(int(low), int(high or low) + 1))
    if not cards:
        raise ValueError("--dra-cards: names no GPU")
    return frozenset(cards)


def check_split(*, legacy: Sequence[str], cards: Collection[int] | None,
                inventory: Inventory) -> str | None:
    """What is wrong with serving ``legacy`` (the device-plugin families on) next to DRA on
    ``cards`` (None: every card); None when nothing is."""
    present = {gpu.index for gpu in inventory.gpus}
    if cards is not None:
        missing = sorted(set(cards) - present)
        if missing:
            return (f"--dra-cards: the node has no GPU with index "
                    f"{', '.join(map(str, missing))} (it has {sorted(present)})")
    if not legacy:
        return None
    families = ", ".join(legacy)
    if cards is None:
        return (f"--dra and {families} would both serve every GPU of the node: name the "
                f"GPUs DRA serves with --dra-cards (the others stay with {families})")
    if present <= set(cards):
        return (f"--dra-cards names every GPU of the node ({sorted(present)}), so {families} "
                f"would serve none: leave some out or turn {families} off")
    return None


@dataclass(slots=True)
class CardSplit:
    """One side's view of a shared source: only ``cards`` (``dra``) or all but them."""

    source: DeviceSource
    cards: frozenset[int]
    dra: bool

    def read(self) -> Inventory:
        inventory = self.source.read()
        return replace(inventory, gpus=tuple(g for g in inventory.gpus
                                             if (g.index in self.cards) == self.dra))

    def __getattr__(self, name: str) -> Any:  # set_health, close, events of the source
        return getattr(self.source, name)


@dataclass(slots=True)
class DraAgent:
    plugin: DraPlugin
    source: DeviceSource
    publisher: Publisher | None = None
    mig: Any = None
    health_interval: float = 0.5
    delete_slices: bool = False
    published: int = 0
    _pending: bool = False
    """The last publication failed: tried again every interval."""
    _health: tuple[tuple[str, bool], ...] = ()
    _stopped: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        inventory = self.source.read()
        self._health = inventory.health()
        self._publish(inventory)
        self.plugin.start()
        self._thread = threading.Thread(target=self._loop, name="dra-health", daemon=True)
        self._thread.start()

    def _publish(self, inventory: Inventory) -> None:
        if self.publisher is None:
            return
        try:
            if self.publisher.sync(inventory, self._layout(inventory)):
                self.published += 1
            self._pending = False
        except Exception as exc:  # the API server is down: retried every interval
            log.warning("cannot publish the ResourceSlices", error=str(exc))
            self._pending = True

    def _layout(self, inventory: Inventory) -> Any:
        if self.mig is None:
            return None
        from scheduler.devices.node.dra.devices import mig_layout

        return mig_layout(self.mig, inventory)

    def _loop(self) -> None:
        while not self._stopped.wait(self.health_interval):
            try:
                inventory = self.source.read()
            except Exception as exc:  # NVML hiccup: keep the last state
                log.warning("cannot read the devices", error=str(exc))
                continue
            health = inventory.health()
            if health != self._health:
                log.info("device health changed: publishing the pool again")
                self._health = health
                self._publish(inventory)
            elif self._pending:
                self._publish(inventory)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.plugin.stop()
        if self.delete_slices and self.publisher is not None:
            try:
                self.publisher.delete_all()
            except Exception as exc:
                log.warning("cannot delete the ResourceSlices", error=str(exc))
