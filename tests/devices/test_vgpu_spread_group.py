"""``volcano.sh/vgpu-podgroup-policy: spread``: which same-group pods keep a card off-limits."""

from __future__ import annotations

import pytest

from tests.builders import make_podgroup, simulate
from tests.devices.conftest import card, vgpu_conf, vgpu_node, vgpu_pod

SPREAD = {"volcano.sh/vgpu-podgroup-policy": "spread"}


@pytest.mark.parametrize(
    ("held", "card_of_new"),
    [
        pytest.param("GPU-0,NVIDIA,0,0:", "GPU-0", id="member-holding-nothing-is-absent"),
        pytest.param("GPU-0,NVIDIA,0,10:", "GPU-1", id="member-holding-cores-is-present"),
        pytest.param("GPU-0,NVIDIA,500,0:", "GPU-1", id="member-holding-memory-is-present"),
    ],
)
def test_a_same_group_pod_counts_only_when_it_holds_something(held: str,
                                                              card_of_new: str) -> None:
    """Volcano's ``deviceHasPodFromSameGroup`` (vgpu/utils.go) counts a same-group pod on a card
    only when its usage there is above 0 MiB or 0 cores. Binpack walks cards by used memory,
    then index, so GPU-0 comes first whenever it may be used."""
    member = vgpu_pod("old", memory=1000, group="job", node="n1", phase="Running",
                      annotations={**SPREAD, "volcano.sh/vgpu-node": "n1",
                                   "volcano.sh/vgpu-ids-new": held})
    new = vgpu_pod("new", memory=1000, group="job", annotations=SPREAD)
    run = simulate([vgpu_node("n1", [card("GPU-0"), card("GPU-1")]),
                    make_podgroup("job", min_member=1), member, new],
                   conf=vgpu_conf(policy="binpack"))
    ids = run.pod("new")["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"]
    assert ids.split(",")[0] == card_of_new
