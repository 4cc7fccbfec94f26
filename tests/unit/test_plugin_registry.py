"""The plugin registry: every entry loads the class of its conf name, and a scheduler whose
conf does not list a plugin never imports its module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plugins import PLUGINS, PluginRegistry

ROOT = Path(__file__).resolve().parents[2]


def test_every_entry_loads_the_class_of_its_name() -> None:
    for name in PLUGINS:
        assert name == PLUGINS[name].NAME


def test_a_misnamed_entry_is_refused() -> None:
    registry = PluginRegistry({"gangs": "plugins.gang:Gang"})
    with pytest.raises(ImportError, match="'gang', not 'gangs'"):
        registry["gangs"]


def test_the_default_conf_leaves_unlisted_plugin_modules_unimported() -> None:
    code = (
        "import json, sys\n"
        "from scheduler.conf import load_conf\n"
        "from scheduler.loop import Scheduler\n"
        "conf = load_conf(None)\n"
        "listed = sorted(p.name for tier in conf.tiers for p in tier)\n"
        "print(json.dumps([listed, sorted(m for m in sys.modules if m.startswith('plugins.'))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    listed, imported = json.loads(out.strip().splitlines()[-1])
    assert "sla" not in listed and "network-topology-aware" not in listed
    assert "plugins.sla" not in imported
    assert "plugins.network_topology_aware" not in imported

