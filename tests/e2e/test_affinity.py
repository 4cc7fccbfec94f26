"""Inter-pod anti-affinity on a real (or bare) API server."""

from __future__ import annotations

from tests.e2e.conftest import Case
from tests.e2e.kube import condition, eventually


def test_required_anti_affinity_puts_one_pod_per_node_and_says_why_the_last_waits(
        case: Case) -> None:
    """kube-scheduler's InterPodAffinity filter (``satisfyPodAntiAffinity``): a gang whose pods
    refuse to share a hostname lands one per node; one more such pod has no node left and is
    told so in kube-scheduler's words."""
    nodes = case.add_nodes(3, units=4)
    app = f"web-{case.case_id}"
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    pods = case.job("web", pods=3, labels={"app": app}, affinity=affinity)
    eventually(lambda: len(case.bound(pods)) == 3, what="three anti-affine pods bound")
    assert sorted(case.node_of(pod) for pod in pods) == sorted(nodes)
    extra = case.job("web-extra", pods=1, labels={"app": app}, affinity=affinity)
    message = eventually(lambda: condition(case.kube.pod(case.namespace, extra[0]),
                                           "PodScheduled").get("message"),
                         what="PodScheduled condition of the fourth pod")
    assert "node(s) didn't match pod anti-affinity rules" in message, message
    assert case.bound(extra) == []
