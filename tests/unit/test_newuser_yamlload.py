"""The fast manifest loader returns exactly what ``yaml.safe_load_all`` returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cluster.yamlload import load_all
from tests.builders import make_node, make_pod, make_podgroup, simulate

ROOT = Path(__file__).resolve().parents[2]

TRICKY = """\
plain: text
quoted: "123"
int: 123
octal: 0o17
hex: 0x1F
float: 1.5
exp: 1.0e+3
inf: .inf
bools: [yes, No, true, off]
nulls: [~, null, ]
date: 2026-01-01
stamp: 2026-01-01T00:00:00Z
quantity: 500m
colon: "a: b"
anchor: &base {cpu: "1", memory: 2Gi}
alias: *base
merged:
  <<: *base
  cpu: "2"
merged_last:
  cpu: "3"
  extra: {x: 1}
  <<: [*base, {gpu: 1}]
tagged_merge:
  !!merge <<: *base
  memory: 1Gi
binary: !!binary aGVsbG8=
set: !!set {a, b}
nested: [[1, 2], {k: [v]}]
empty_map: {}
empty_list: []
123: numeric key
---
second: document
---
- a list document
"""


def test_same_data_as_pyyaml_on_tricky_yaml() -> None:
    ours = list(load_all(TRICKY))
    assert ours == list(yaml.safe_load_all(TRICKY))
    first = ours[0]
    assert first["alias"] is first["anchor"]  # aliases are shared, as PyYAML shares them
    assert first["merged"] == {"cpu": "2", "memory": "2Gi"}
    assert first["merged_last"] == {"cpu": "3", "memory": "2Gi", "gpu": 1, "extra": {"x": 1}}
    assert first["tagged_merge"] == {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize("name", ["quickstart.yaml", "gpushare.yaml", "vgpu.yaml"])
def test_same_data_as_pyyaml_on_the_samples(name: str) -> None:
    text = (ROOT / "conf" / "samples" / name).read_text()
    assert list(load_all(text)) == list(yaml.safe_load_all(text))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("? [a, b]\n: value\n", "found unhashable key"),
        ("a: !custom x\n", "could not determine a constructor"),
        ("a: [\n", "while parsing"),
    ],
)
def test_errors_are_pyyaml_errors(text: str, words: str) -> None:
    with pytest.raises(yaml.YAMLError, match=words):
        list(load_all(text))


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=12),
    st.floats(allow_nan=False),
)
_data: Any = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_data, min_size=1, max_size=3))
def test_round_trips_like_pyyaml(documents: list[Any]) -> None:
    text = yaml.safe_dump_all(documents)
    assert list(load_all(text)) == list(yaml.safe_load_all(text))



def test_pods_sharing_one_spec_map_are_bound_one_by_one() -> None:
    """YAML anchors and merge keys (``<<: *pod``) can hand the embedded cluster several pods
    whose ``spec`` is one map; it must store copies, or the first bind writes
    ``spec.nodeName`` into every pod sharing it."""
    shared = make_pod("a", cpu="1", group="g")
    other = make_pod("b", cpu="1", group="g")
    other["spec"] = shared["spec"]
    run = simulate([make_node("n1", cpu="1"), make_node("n2", cpu="1"),
                    make_podgroup("g", min_member=2), shared, other])
    assert sorted(run.node_of(name) for name in ("a", "b")) == ["n1", "n2"]
