"""The HyperNode CRD, the PodGroup CRD's topology fields and the discovery controller's
optional RBAC, checked offline against Volcano's schemas and against the calls the code makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "conf" / "crds"


def _crd(file: str) -> dict[str, Any]:
    (crd,) = [d for d in yaml.safe_load_all((CRDS / file).read_text()) if d]
    return crd


def _spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def test_hypernode_crd_is_volcanos() -> None:
    """config/crd/volcano/bases/topology.volcano.sh_hypernodes.yaml: cluster scope, v1alpha1,
    short name hn, status subresource, tier required, members of type Node or HyperNode with
    exactly one of exactMatch / regexMatch / labelMatch."""
    crd = _crd("topology.volcano.sh_hypernodes.yaml")
    assert crd["metadata"]["name"] == "hypernodes.topology.volcano.sh"
    spec = crd["spec"]
    assert (spec["scope"], spec["names"]["kind"], spec["names"]["shortNames"]) == (
        "Cluster", "HyperNode", ["hn"])
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["jsonPath"] for c in version["additionalPrinterColumns"]] == [
        ".spec.tier", ".spec.tierName", ".status.nodeCount", ".metadata.creationTimestamp"]
    hn_spec = _spec_schema(crd)
    assert hn_spec["required"] == ["tier"]
    assert set(hn_spec["properties"]) == {"tier", "tierName", "members"}
    member = hn_spec["properties"]["members"]["items"]
    assert member["properties"]["type"]["enum"] == ["Node", "HyperNode"]
    selector = member["properties"]["selector"]
    assert set(selector["properties"]) == {"exactMatch", "regexMatch", "labelMatch"}
    rules = [v["rule"] for v in selector["x-kubernetes-validations"]]
    assert any("<= 1" in rule for rule in rules) and len(rules) == 2
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {"nodeCount", "conditions"}


def test_podgroup_crd_carries_heads_topology_fields() -> None:
    """config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml at HEAD: networkTopology
    (mode hard|soft defaulting to hard, highestTierAllowed >= 0, highestTierName) on the spec
    and on each subGroupPolicy entry, with subGroupSize >= 1 (default 1) and minSubGroups
    >= 0 (default 0)."""
    props = _spec_schema(_crd("scheduling.volcano.sh_podgroups.yaml"))["properties"]
    policy = props["subGroupPolicy"]["items"]["properties"]
    assert set(policy) == {"name", "labelSelector", "matchLabelKeys", "subGroupSize",
                           "minSubGroups", "networkTopology"}
    assert (policy["subGroupSize"]["default"], policy["subGroupSize"]["minimum"]) == (1, 1)
    assert (policy["minSubGroups"]["default"], policy["minSubGroups"]["minimum"]) == (0, 0)
    for topology in (props["networkTopology"], policy["networkTopology"]):
        fields = topology["properties"]
        assert set(fields) == {"mode", "highestTierAllowed", "highestTierName"}
        assert fields["mode"]["enum"] == ["hard", "soft"]
        assert fields["mode"]["default"] == "hard"
        assert fields["highestTierAllowed"]["minimum"] == 0
        assert "required" not in topology
