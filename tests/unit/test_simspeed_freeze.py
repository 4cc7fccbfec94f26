"""``build_simulation(freeze_loaded=True)``: the collector is paused while the cluster loads,
the loaded objects are frozen out of its reach, and its on/off state is given back as found
(also when loading fails)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from tests.builders import conf_of, make_node, make_pod


@pytest.fixture
def restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()


def _manifests() -> list[Manifest]:
    objects = [make_node("n1", cpu="4"), make_pod("p1", cpu="1")]
    return [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)]


@pytest.mark.usefixtures("restore_gc")
@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off"])
def test_loaded_objects_are_frozen_and_the_collector_state_kept(enabled: bool) -> None:
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()
    seen: list[bool] = []
    build_simulation(
        _manifests(), conf=conf_of(None), freeze_loaded=True,
        setup=lambda cluster, cache: seen.append(gc.isenabled()),
    )
    assert seen == [False]  # paused while the cluster and the cache fill
    assert gc.isenabled() is enabled
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("restore_gc")
def test_a_failed_load_freezes_nothing_and_turns_the_collector_back_on() -> None:
    gc.unfreeze()
    gc.enable()

    def fail(cluster: object, cache: object) -> None:
        raise RuntimeError("setup failed")

    with pytest.raises(RuntimeError, match="setup failed"):
        build_simulation(_manifests(), conf=conf_of(None), freeze_loaded=True, setup=fail)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("restore_gc")
def test_without_freeze_loaded_the_collector_is_left_alone() -> None:
    gc.unfreeze()
    gc.enable()
    seen: list[bool] = []
    build_simulation(_manifests(), conf=conf_of(None),
                     setup=lambda cluster, cache: seen.append(gc.isenabled()))
    assert seen == [True]
    assert gc.get_freeze_count() == 0
