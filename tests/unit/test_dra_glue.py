"""The DRA glue outside the session: reading a pod's claims (both API shapes), the conf and
flag form of the feature gates, and manifests of the four kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.api.errors import ObjectError
from scheduler.api.podclaims import (
    POD_CLAIM_NAME_ANNOTATION,
    PodClaim,
    pod_claims,
    resolve_claim_names,
    template_claim,
)
from scheduler.cluster.manifests import ManifestError, load_manifests
from scheduler.cluster.simdra import SUFFIX_ALPHABET, create_template_claims
from scheduler.conf import ConfError, parse_conf
from scheduler.deviceconf import with_dra

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
    arguments: {predicate.DRAFeatureGates: "%s"}
"""


def _pod(*entries: dict, statuses: list | None = None) -> dict:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
           "spec": {"resourceClaims": list(entries)}}
    if statuses is not None:
        pod["status"] = {"resourceClaimStatuses": statuses}
    return pod


def test_both_pod_shapes_are_read() -> None:
    """core/v1 PodResourceClaim (1.31+) and its 1.28-1.30 ``source`` (ClaimSource)."""
    pod = _pod({"name": "a", "resourceClaimName": "c1"},
               {"name": "b", "source": {"resourceClaimTemplateName": "t"}})
    assert pod_claims(pod) == (PodClaim("a", claim_name="c1"), PodClaim("b", template_name="t"))


@pytest.mark.parametrize("entry, problem", [
    ({"name": "a"}, "exactly one of resourceClaimName and resourceClaimTemplateName"),
    ({"name": "a", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}, "exactly one"),
    ({"resourceClaimName": "c"}, "spec.resourceClaims[0].name: is required"),
    ("a", "spec.resourceClaims[0]: must be a map"),
])
def test_bad_claim_entries_name_the_pod_and_field(entry: object, problem: str) -> None:
    with pytest.raises(ObjectError, match="Pod ns/p") as caught:
        pod_claims(_pod(entry))  # type: ignore[arg-type]
    assert problem in str(caught.value)


def test_duplicate_entry_names_are_refused() -> None:
    with pytest.raises(ObjectError, match="duplicate name 'a'"):
        pod_claims(_pod({"name": "a", "resourceClaimName": "c"},
                        {"name": "a", "resourceClaimName": "d"}))


def test_template_claims_are_found_through_the_pod_status() -> None:
    """resourceclaim.Name: a template's claim is the one status.resourceClaimStatuses names;
    an entry without a name there needs no claim."""
    pod = _pod({"name": "a", "resourceClaimTemplateName": "t"},
               {"name": "b", "resourceClaimTemplateName": "t"},
               {"name": "c", "resourceClaimTemplateName": "t"},
               statuses=[{"name": "a", "resourceClaimName": "p-a-x"}, {"name": "b"}])
    names = [name for _, name in resolve_claim_names(pod, pod_claims(pod))]
    assert names == ["p-a-x", "", None]


def test_the_embedded_controller_makes_claims_as_kube_controller_manager() -> None:
    """pkg/controller/resourceclaim/controller.go handleClaim: generated name
    <pod>-<claim>-<suffix>, controller owner reference, pod-claim-name annotation."""
    pod = _pod({"name": "gpu", "resourceClaimTemplateName": "t"})
    template = {"metadata": {"name": "t", "namespace": "ns"},
                "spec": {"metadata": {"labels": {"team": "x"}},
                         "spec": {"devices": {"requests": []}}}}
    made: list[dict] = []
    create_template_claims([pod], {"ns/t": template}, store=made.append)
    claim, = made
    meta = claim["metadata"]
    assert meta["name"].startswith("p-gpu-") and len(meta["name"]) == len("p-gpu-") + 5
    assert set(meta["name"][-5:]) <= set(SUFFIX_ALPHABET)
    assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu"
    assert meta["labels"] == {"team": "x"}
    assert meta["ownerReferences"][0]["uid"] == "u1" and meta["ownerReferences"][0]["controller"]
    assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpu",
                                                       "resourceClaimName": meta["name"]}]
    create_template_claims([pod], {"ns/t": template}, store=made.append)
    assert len(made) == 1  # already recorded in the pod's status: not made twice
    assert template_claim(pod, PodClaim("gpu", template_name="t"), template,
                          suffix="bcdfg")["spec"] == {"devices": {"requests": []}}


def test_feature_gates_from_the_conf_and_the_flag() -> None:
    conf = parse_conf(CONF % "DRAConsumableCapacity=true")
    predicates = conf.plugin("predicates")
    assert predicates is not None
    assert predicates.args.dra_feature_gates == "DRAConsumableCapacity=true"
    merged = with_dra(conf, "DRAConsumableCapacity=false")
    args = merged.plugin("predicates").args  # type: ignore[union-attr]
    assert args.dra_feature_gates == "DRAConsumableCapacity=true,DRAConsumableCapacity=false"
    assert with_dra(conf, "") is conf


def test_a_bad_gate_in_the_conf_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfError, match=r"predicate\.DRAFeatureGates"):
        parse_conf(CONF % "DRAConsumableCapacity=maybe")


def test_dra_manifests_are_checked_at_load(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\n"
                    "metadata: {name: c}\n")
    with pytest.raises(ManifestError, match=r"expected resource\.k8s\.io/v1"):
        load_manifests([path])
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                    "  containers: [{name: c, image: i}]\n  resourceClaims: [{name: a}]\n")
    with pytest.raises(ManifestError, match=r"Pod default/p: field spec.resourceClaims\[0\]"):
        load_manifests([path])


def test_a_late_watch_event_does_not_undo_a_claim_write() -> None:
    """The store applies the claim the status write returned at once; the watch may still
    deliver an earlier version afterwards, which must not make the devices look free again
    (client-go's informers never go back in resourceVersion either)."""
    from scheduler.cache.dra import DraStore

    def claim(version: str, allocated: bool) -> dict:
        obj: dict = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "c", "namespace": "ns", "resourceVersion": version},
                     "spec": {"devices": {"requests": [
                         {"name": "gpu", "exactly": {"deviceClassName": "x"}}]}}}
        if allocated:
            obj["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "d", "pool": "p", "device": "g0"}]}}}
        return obj

    store = DraStore()
    store.apply("ResourceClaim", False, claim("7", allocated=True))
    store.apply("ResourceClaim", False, claim("5", allocated=False))
    assert "ns/c" in store.view().allocations
    store.apply("ResourceClaim", False, claim("9", allocated=False))
    assert "ns/c" not in store.view().allocations


def test_a_reason_that_names_no_claim_gets_the_pods_claims() -> None:
    from scheduler.framework.dra import DraFilter, _Claims

    dra = DraFilter(None)
    task = type("T", (), {"uid": "u", "pod": {"spec": {"resourceClaims": [{}]}}})()
    dra._claims["u"] = _Claims(keys=[("ns/c1", None)])
    assert dra._naming_claims(task, "no device fits") == "claim ns/c1: no device fits"  # type: ignore[arg-type]
    assert dra._naming_claims(task, "ns/c1 is too big") == "ns/c1 is too big"  # type: ignore[arg-type]
    dra._claims["u"] = _Claims(keys=[("ns/a", None), ("ns/b", None)])
    assert dra._naming_claims(task, "x").startswith("claims ns/a, ns/b: ")  # type: ignore[arg-type]
