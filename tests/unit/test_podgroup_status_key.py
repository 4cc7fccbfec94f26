"""The status digest a cycle compares for every job, taken from the PodGroup's fields, is the
digest of the status it would write (the recorder writes a PodGroup's status only when it
changed, as Volcano's ``updatePodGroup`` skips an unchanged status:
pkg/scheduler/framework/job_updater.go ``isPodGroupStatusUpdated``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.podgroup import PodGroup
from scheduler.cache.status import _status_key, podgroup_status_key

_conditions = st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["Scheduled", "Unschedulable"]),
     "status": st.sampled_from(["True", "False"])},
    optional={"reason": st.text(max_size=5), "message": st.text(max_size=5),
              "lastTransitionTime": st.just("2026-11-29T00:00:00Z")}), max_size=3)


@settings(max_examples=150, deadline=None)
@given(phase=st.sampled_from(["Pending", "Inqueue", "Running", "Unknown", "Completed"]),
       conditions=_conditions, running=st.integers(0, 3), succeeded=st.integers(0, 3),
       failed=st.integers(0, 3))
def test_the_digest_of_the_fields_is_the_digest_of_the_status(
        phase: str, conditions: list[dict[str, Any]], running: int, succeeded: int,
        failed: int) -> None:
    podgroup = PodGroup("pg", "ns", phase=phase, conditions=conditions, running=running,
                        succeeded=succeeded, failed=failed)
    assert podgroup_status_key(podgroup) == _status_key(podgroup.status_dict())
