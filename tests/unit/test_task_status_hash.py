"""Task statuses as dictionary keys: identity hashing must agree with equality."""

from __future__ import annotations

import copy
import pickle

from scheduler.api.types import ALLOCATED_STATUS, TaskStatus


def test_statuses_and_their_combinations_find_their_entries() -> None:
    index = {status: status.name for status in TaskStatus}
    index[ALLOCATED_STATUS] = "allocated-status"
    for status in TaskStatus:
        for again in (TaskStatus(status.value), pickle.loads(pickle.dumps(status)),
                      copy.deepcopy(status)):
            assert again == status and hash(again) == hash(status)
            assert index[again] == status.name
    combined = TaskStatus.BOUND | TaskStatus.BINDING | TaskStatus.RUNNING | TaskStatus.ALLOCATED
    assert index[combined] == "allocated-status"
    assert index[TaskStatus(ALLOCATED_STATUS.value)] == "allocated-status"
