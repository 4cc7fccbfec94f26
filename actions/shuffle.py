"""shuffle: evict the running tasks the plugins' VictimTasks hooks ask for.

Volcano's ``actions/shuffle/shuffle.go``: every Running task is offered to the VictimTasks
plugins (union within a tier, the first tier with any answer decides) and each chosen task is
evicted at once with reason ``shuffle``. None of the plugins shipped here implements
VictimTasks (Volcano's are ``tdm``, ``rescheduling`` and ``pdb``), so with the stock plugins
the action evicts nothing; a third-party plugin implementing the hook drives it.
"""

from __future__ import annotations

from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

__all__ = ["Shuffle"]

REASON = "shuffle"


class Shuffle:
    NAME = "shuffle"

    def execute(self, session: Session) -> None:
        running: list[TaskInfo] = [
            task
            for job in session.jobs.values()
            for task in job.task_status_index.get(TaskStatus.RUNNING, {}).values()
        ]
        if not running:
            return
        for victim in session.victim_tasks(running):
            if victim.status is not TaskStatus.RUNNING:
                continue
            statement = Statement(session)
            statement.evict(victim, REASON)
            statement.commit()
