"""The action registry: every entry loads the class of its conf name, a scheduler imports an
action's module only when its conf runs that action, and an unknown name is refused as before.

Volcano registers its actions in a map filled at init (pkg/scheduler/framework/
plugins.go, ``RegisterAction``/``GetAction``) and refuses a conf naming one it lacks
(pkg/scheduler/util.go, ``UnmarshalSchedulerConf``: "failed to find Action %s"); Lahar's
registry names every module up front and imports it at its first lookup.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from actions import ACTIONS
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.lazyregistry import LazyRegistry

ROOT = Path(__file__).resolve().parents[2]

NOT_IN_DEFAULT = ("actions.preempt", "actions.reclaim", "actions.shuffle",
                  "actions.gangpreempt", "actions.gangreclaim")


def test_every_entry_loads_the_class_of_its_name() -> None:
    assert sorted(ACTIONS) == ["allocate", "backfill", "enqueue", "gangpreempt", "gangreclaim",
                               "preempt", "reclaim", "shuffle"]
    for name in ACTIONS:
        assert name == ACTIONS[name].NAME
        assert callable(ACTIONS[name]().execute)


def test_a_misnamed_entry_is_refused() -> None:
    registry = LazyRegistry({"allocates": "actions.allocate:Allocate"})
    with pytest.raises(ImportError, match="'allocate', not 'allocates'"):
        registry["allocates"]


def test_an_unknown_action_is_refused_with_the_known_names() -> None:
    with pytest.raises(ConfError, match=r"unknown action 'alocate' \(known: allocate, "
                                        r"backfill, enqueue, gangpreempt, gangreclaim, preempt, "
                                        r"reclaim, shuffle\)"):
        parse_conf('actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: gang\n')


CYCLE = """
import json, sys
from scheduler.cluster.simulation import build_simulation
from scheduler.cluster.manifests import Manifest
from scheduler.conf import load_conf, parse_conf
from tests.builders import make_node, make_pod
conf = CONF
before = sorted(m for m in sys.modules if m.startswith("actions."))
objs = [make_node("n1"), make_pod("p1")]
_, _, scheduler = build_simulation([Manifest(f"t#{i}", o) for i, o in enumerate(objs)],
                                   conf=conf)
scheduler.run_once()
after = sorted(m for m in sys.modules if m.startswith("actions."))
print(json.dumps([before, after, sorted(scheduler.actions)]))
"""


def _cycle(conf: str) -> list[list[str]]:
    out = subprocess.run([sys.executable, "-c", CYCLE.replace("CONF", conf)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result: list[list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_the_default_conf_imports_only_its_actions_and_at_their_first_run() -> None:
    before, after, made = _cycle("load_conf(None)")
    assert before == []  # loading the conf imported no action module
    assert made == ["allocate", "backfill", "enqueue"]
    assert after == ["actions.allocate", "actions.backfill", "actions.enqueue"]


def test_an_action_the_conf_configures_is_imported_with_the_conf() -> None:
    """Its typed arguments are checked at load, so its module loads then; the others still
    wait for their first run."""
    conf = ("parse_conf('actions: \"enqueue, allocate, preempt\"\\nconfigurations:\\n"
            "- name: preempt\\n  arguments: {minCandidateNodesPercentage: 5}\\n"
            "tiers:\\n- plugins:\\n  - name: gang\\n  - name: predicates\\n')")
    before, after, made = _cycle(conf)
    assert before == ["actions.preempt"]
    assert made == ["allocate", "enqueue", "preempt"]
    assert after == ["actions.allocate", "actions.enqueue", "actions.preempt"]
    assert not set(NOT_IN_DEFAULT[1:]) & set(after)
