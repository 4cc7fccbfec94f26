"""Hostile YAML is refused fast, before it is built: alias bombs ("billion laughs", also through
merge keys), an alias to the node holding it, nesting deep enough to overflow libyaml's C
composer. Every reader refuses it the same way (manifests, confs, and ``lahar run``'s conf
reload, which keeps the conf it has).

The alias budget is go-yaml's, which the API server's YAML decoder applies
(gopkg.in/yaml.v2 decode.go ``allowedAliasRatio`` and ``decoder.unmarshal``: more than 100
alias-driven nodes in over 1000, above 99% of a small document, 10% of a large one).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from scheduler.cluster.kube.run import ConfWatcher
from scheduler.cluster.manifests import ManifestError, parse_documents
from scheduler.cluster.yamlload import load_all
from scheduler.conf import ConfError, load_conf, parse_conf
from scheduler.confyaml import load_conf_yaml

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"
ALIASING = "not valid YAML: document contains excessive aliasing"


def _lahar(*args: str) -> subprocess.CompletedProcess[str]:
    # bounded: before the fix these ran for minutes and ended in MemoryError (or a crash)
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", *args], cwd=REPO, capture_output=True, text=True,
        timeout=60, check=False, stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("simulate", f"{BAD}/alias-bomb.yaml"),
                     f"error: {BAD}/alias-bomb.yaml#1: {ALIASING}", id="simulate-laughs"),
        pytest.param(("simulate", f"{BAD}/merge-bomb.yaml"),
                     f"error: {BAD}/merge-bomb.yaml#1: {ALIASING}", id="simulate-merge-keys"),
        pytest.param(("simulate", f"{BAD}/deep-nesting.yaml"),
                     f"error: {BAD}/deep-nesting.yaml#1: not valid YAML: maps and lists nested "
                     "more than 500 deep", id="simulate-deep"),
        pytest.param(("conf", "check", f"{BAD}/alias-bomb.conf"),
                     f"error: {BAD}/alias-bomb.conf: {ALIASING}", id="conf-check"),
        pytest.param(("simulate", "conf/samples/quickstart.yaml", "--conf",
                      f"{BAD}/alias-bomb.conf"),
                     f"error: {BAD}/alias-bomb.conf: {ALIASING}", id="simulate-conf"),
    ],
)
def test_hostile_yaml_exits_2_naming_the_file(args: tuple[str, ...], message: str) -> None:
    result = _lahar(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].startswith(message)


@pytest.mark.parametrize("name", ["alias-bomb.yaml", "merge-bomb.yaml", "deep-nesting.yaml"])
def test_a_manifest_bomb_is_refused_within_a_second(name: str) -> None:
    text = (REPO / BAD / name).read_text()
    started = time.perf_counter()
    with pytest.raises(ManifestError, match=rf"^{name}#1: not valid YAML: "):
        parse_documents(text, source=name)
    assert time.perf_counter() - started < 1.0


def test_a_conf_bomb_is_refused_within_a_second() -> None:
    text = (REPO / BAD / "alias-bomb.conf").read_text()
    started = time.perf_counter()
    with pytest.raises(ConfError, match=r"^c: not valid YAML: document contains excessive"):
        parse_conf(text, source="c")
    assert time.perf_counter() - started < 1.0


def test_lahar_run_keeps_its_conf_when_the_new_one_is_a_bomb(tmp_path: Path) -> None:
    path = tmp_path / "lahar-scheduler.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    applied: list[object] = []
    watcher = ConfWatcher(str(path), load=load_conf, apply=applied.append)
    path.write_text((REPO / BAD / "alias-bomb.conf").read_text())
    started = time.perf_counter()
    assert watcher.poll(force=True) is False
    assert time.perf_counter() - started < 1.0
    assert applied == []


def test_an_alias_to_the_node_holding_it_is_refused() -> None:
    with pytest.raises(yaml.YAMLError, match="refers to a node that contains it"):
        load_conf_yaml("a: &x [1, *x]\n")
    with pytest.raises(yaml.YAMLError, match="refers to a node that contains it"):
        list(load_all("a: &x [1, *x]\n"))


def test_ordinary_aliases_still_load_shared() -> None:
    text = "base: &b {cpu: '1', memory: 1Gi}\n" + "".join(
        f"p{i}: {{<<: *b, name: p{i}}}\nq{i}: *b\n" for i in range(300))
    (document,) = load_all(text)
    assert document["q299"] is document["base"] and document["p7"]["name"] == "p7"
    assert load_conf_yaml(text)[0]["p299"] == {"cpu": "1", "memory": "1Gi", "name": "p299"}
