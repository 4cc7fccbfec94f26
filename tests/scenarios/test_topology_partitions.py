"""Volcano's allocate cases with sub-group partitions, one test per Go case.

Source: ``pkg/scheduler/actions/allocate/allocate_test.go`` at Volcano ed72c7c,
``TestAllocateWithPartitionPolicyNetworkTopology`` (the line of each case's ``Name`` is in the
test id). Each case runs one session of allocate with gang, predicates and
network-topology-aware, as the Go test does, and checks how many pods were bound (the Go cases
marked ``MinimalBindCheck`` check only that; the others also where). A pod given a node runs
there; the job's and each partition's HyperNode are recovered from those pods, as Volcano's
session recovers them. Pods carry their ``volcano.sh/task-spec`` / ``volcano.sh/task-instance``
labels, which name both their role and their partition.

Functions matched: ``allocateForJob``, ``allocateForSubJob`` and ``organizeJobWorksheet``
(``allocate.go``), ``getOrCreateSubJob`` / ``CheckSubJobReady`` (``job_info.go``), gang's
``SubJobReadyFn`` and ``CheckSubJobValid`` (``gang.go``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
import yaml

from scheduler.api.podgroup import podgroup_from_object
from scheduler.api.subjob import partition_tasks
from scheduler.api.task import task_from_pod
from scheduler.commands.cli import main
from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue, simulate

CONF = """
actions: "allocate"
tiers:
- plugins:
  - {name: gang}
  - {name: predicates}
  - {name: network-topology-aware}
"""

HN = tuple[str, int, tuple[str, ...], tuple[str, ...]]
Policy = tuple[str, tuple[str, ...], str, int, int, int]
"""name, matchLabelKeys, mode ("" for none), highestTierAllowed, subGroupSize, minSubGroups."""
Pod = tuple[Any, ...]
"""name, node (None: pending), cpu, memory, labels[, nodeSelector]."""


@dataclass
class Case:
    line: int
    min_member: int
    job: tuple[str, int] | None
    policies: list[Policy]
    pods: list[Pod]
    nodes: tuple[tuple[Any, ...], ...]
    tree: tuple[HN, ...]
    binds: int
    bind_map: dict[str, str] | None = None


# fmt: off
TREE_0 = (('s0', 0, ('s0-n1', 's0-n2'), ()), ('s1', 0, ('s1-n3', 's1-n4'), ()), ('s2', 1, (), ('s0', 's1')),)
TREE_1 = (('s0', 1, ('s0-n1', 's0-n2'), ()), ('s1', 1, ('s1-n3', 's1-n4'), ()), ('s2', 2, (), ('s0', 's1')),)
TREE_2 = (('s0', 0, ('s0-n1',), ()), ('s1', 0, ('s1-n2',), ()),)
TREE_3 = (('s3', 1, ('s3-n1', 's3-n2'), ()), ('s4', 1, ('s4-n1', 's4-n2'), ()), ('s5', 1, ('s5-n1', 's5-n2'), ()), ('s6', 1, ('s6-n1', 's6-n2'), ()), ('s1', 2, (), ('s3', 's4')), ('s2', 2, (), ('s5', 's6')), ('s0', 3, (), ('s1', 's2')),)
TREE_4 = (('s0', 1, ('s0-n1', 's0-n2'), ()), ('s1', 1, ('s1-n3',), ()), ('s2', 2, (), ('s0', 's1')),)
TREE_5 = (('s0', 1, ('s0-n1', 's0-n2'), ()), ('s1', 1, ('s1-n3', 's1-n4'), ()),)
TREE_6 = (('s0', 1, ('s0-n1', 's0-n2'), ()), ('s1', 1, ('s1-n3', 's1-n4'), ()), ('s2', 1, ('s2-n5',), ()), ('s3', 2, (), ('s0', 's1', 's2')),)
TREE_7 = (('s0', 1, ('s0-n1', 's0-n2'), ()),)
TREE_8: tuple[HN, ...] = ()
NODES_0 = (('s0-n1', '2', '4Gi'), ('s0-n2', '2', '4Gi'), ('s1-n3', '2', '4Gi'), ('s1-n4', '2', '4Gi'),)
NODES_1 = (('s0-n1', '2', '4Gi'), ('s1-n2', '2', '4Gi', {'nodeRole': 'master'}),)
NODES_2 = (('s3-n1', '2', '4Gi'), ('s3-n2', '2', '4Gi'), ('s4-n1', '2', '4Gi'), ('s4-n2', '2', '4Gi'), ('s5-n1', '2', '4Gi'), ('s5-n2', '2', '4Gi'), ('s6-n1', '2', '4Gi'), ('s6-n2', '2', '4Gi'),)
NODES_3 = (('s0-n1', '2', '4Gi'), ('s0-n2', '2', '4Gi'), ('s1-n3', '2', '4Gi'),)
NODES_4 = (('s0-n1', '2', '4Gi'), ('s0-n2', '2', '4Gi'), ('s1-n3', '2', '4Gi'), ('s1-n4', '2', '4Gi'), ('s2-n5', '2', '4Gi'),)
NODES_5 = (('s0-n1', '4', '8Gi'), ('s0-n2', '4', '8Gi'), ('s1-n3', '4', '8Gi'), ('s1-n4', '4', '8Gi'),)
NODES_6 = (('s0-n1', '4', '8Gi'), ('s0-n2', '4', '8Gi'), ('s1-n3', '4', '8Gi'),)
NODES_7 = (('s0-n1', '10', '20Gi'), ('s0-n2', '10', '20Gi'),)
NODES_8 = (('s0-n1', '4', '8Gi'), ('s0-n2', '4', '8Gi'),)
NODES_9 = (('n1', '2', '4Gi'), ('n2', '2', '4Gi'),)

CASES = [
    Case(2897, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_0, binds=3),
    Case(2929, min_member=1, job=('hard', 1),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(2998, min_member=1, job=('hard', 1),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}, {'nodeRole': 'master'})],
         nodes=NODES_1, tree=TREE_2, binds=1, bind_map={'p1': 's1-n2'}),
    Case(3026, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(3096, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(3166, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'soft', 0, 1, 0)],
         pods=[('p1', 's3-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's3-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_2, tree=TREE_3, binds=1),
    Case(3295, min_member=3, job=('soft', 0),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 2, 0), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-instance': 'worker'})],
         nodes=NODES_3, tree=TREE_4, binds=3),
    Case(3363, min_member=1, job=('soft', 0),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(3432, min_member=3, job=('soft', 0),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=0),
    Case(3465, min_member=2, job=('soft', 0),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's1-n3', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(3538, min_member=2, job=('soft', 0),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 1, 0)],
         pods=[('p1', 's3-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's3-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', 's4-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', 's4-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p5', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_2, tree=TREE_3, binds=0),
    Case(3669, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=3),
    Case(3739, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-instance': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-instance': 'worker'})],
         nodes=NODES_3, tree=TREE_4, binds=3),
    Case(3807, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(3876, min_member=1, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(3945, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's1-n3', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(4018, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(4088, min_member=2, job=('hard', 3),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 1, 0)],
         pods=[('p1', 's3-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's3-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_2, tree=TREE_3, binds=1),
    Case(4217, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=0),
    Case(4287, min_member=2, job=('hard', 3),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 1, 0)],
         pods=[('p1', 's3-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's3-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', 's4-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', 's4-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p5', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_2, tree=TREE_3, binds=0),
    Case(4418, min_member=2, job=('hard', 3),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 1, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_5, binds=1),
    Case(4475, min_member=5, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 1), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 2)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p3', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p4', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_4, tree=TREE_6, binds=5),
    Case(4565, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 1), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 1)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p3', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p4', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_3, tree=TREE_4, binds=3),
    Case(4635, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 2), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 1)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-spec': 'master2'}),
               ('p3', None, '2', '4Gi', {'volcano.sh/task-spec': 'master3'}),
               ('p4', None, '2', '4Gi', {'volcano.sh/task-spec': 'master4'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p6', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p7', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p8', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_0, tree=TREE_1, binds=4),
    Case(4711, min_member=5, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 1), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 1)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p3', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p4', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_0, tree=TREE_1, binds=0),
    Case(4784, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 1), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 2)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p3', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p4', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_0, tree=TREE_1, binds=0),
    Case(4857, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 2, 1)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's1-n3', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=1),
    Case(4930, min_member=2, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 2, 1)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's1-n3', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', 's1-n4', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_0, tree=TREE_1, binds=0),
    Case(5001, min_member=4, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 2, 2)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', None, '2', '4G', {'volcano.sh/task-spec': 'master'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(5072, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 1, 2), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 2, 1)],
         pods=[('p1', None, '2', '4Gi', {'volcano.sh/task-spec': 'master'}),
               ('p2', None, '2', '4Gi', {'volcano.sh/task-spec': 'master2'}),
               ('p3', 's0-n1', '2', '4Gi', {'volcano.sh/task-spec': 'master3'}),
               ('p4', 's0-n2', '2', '4Gi', {'volcano.sh/task-spec': 'master4'}),
               ('p5', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p6', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker'}),
               ('p7', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'}),
               ('p8', None, '2', '4Gi', {'volcano.sh/task-instance': 'worker2'})],
         nodes=NODES_0, tree=TREE_1, binds=2),
    Case(5148, min_member=4, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 4, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_5, tree=TREE_1, binds=2),
    Case(5220, min_member=3, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 3, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_6, tree=TREE_4, binds=1),
    Case(5285, min_member=6, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 3, 0), ('task2', ('volcano.sh/task-instance',), 'hard', 1, 3, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'master'}),
               ('p4', 's1-n3', '2', '4G', {'volcano.sh/task-instance': 'worker'}),
               ('p5', None, '2', '4G', {'volcano.sh/task-instance': 'worker'}),
               ('p6', None, '2', '4G', {'volcano.sh/task-instance': 'worker'})],
         nodes=NODES_5, tree=TREE_1, binds=3),
    Case(5362, min_member=3, job=('hard', 1),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 3, 0)],
         pods=[('p1-running', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p2-pending-small', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3-pending-large', None, '4', '8G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_7, tree=TREE_7, binds=2),
    Case(5408, min_member=3, job=('hard', 1),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 1, 3, 0)],
         pods=[('p1', 's0-n1', '4', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p2', None, '4', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '4', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_8, tree=TREE_7, binds=0),
    Case(5454, min_member=4, job=('hard', 2),
         policies=[('task1', ('volcano.sh/task-spec',), 'hard', 2, 4, 0)],
         pods=[('p1', 's0-n1', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p2', 's0-n2', '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p3', None, '2', '4G', {'volcano.sh/task-spec': 'worker'}),
               ('p4', None, '2', '4G', {'volcano.sh/task-spec': 'worker'})],
         nodes=NODES_5, tree=TREE_1, binds=2),
    Case(5529, min_member=2, job=None,
         policies=[('worker', ('volcano.sh/task-spec',), '', 0, 1, 2)],
         pods=[('p1', None, '2', '4G', {'volcano.sh/task-spec': 'worker-0'}),
               ('p2', None, '2', '4G', {'volcano.sh/task-spec': 'worker-1'})],
         nodes=NODES_9, tree=TREE_8, binds=2),
]
# fmt: on


def _topology(mode: str, tier: int) -> dict[str, Any] | None:
    return {"mode": mode, "highestTierAllowed": tier} if mode else None


def objects(case: Case) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [make_queue("q1")]
    for name, cpu, memory, *labels in case.nodes:
        objs.append(
            make_node(name, cpu=cpu, memory=memory, pods="10", labels=labels[0] if labels else None)
        )
    for name, tier, nodes, children in case.tree:
        objs.append(make_hypernode(name, tier=tier, nodes=nodes, hypernodes=children))
    policies = []
    for name, keys, mode, tier, size, minimum in case.policies:
        policy: dict[str, Any] = {
            "name": name,
            "matchLabelKeys": list(keys),
            "subGroupSize": size,
            "minSubGroups": minimum,
        }
        topology = _topology(mode, tier)
        if topology is not None:
            policy["networkTopology"] = topology
        policies.append(policy)
    objs.append(
        make_podgroup(
            "pg1",
            namespace="c1",
            queue="q1",
            min_member=case.min_member,
            phase="Inqueue",
            network_topology=_topology(*case.job) if case.job else None,
            sub_group_policy=policies,
        )
    )
    for name, node, cpu, memory, labels, *selector in case.pods:
        pod = make_pod(
            name,
            namespace="c1",
            cpu=cpu,
            memory=memory,
            group="pg1",
            node=node,
            node_selector=selector[0] if selector else None,
        )
        pod["metadata"]["labels"] = dict(labels)
        objs.append(pod)
    return objs


@pytest.mark.parametrize("case", CASES, ids=[f"L{c.line}" for c in CASES])
def test_allocate_with_partition_policy_network_topology(case: Case) -> None:
    """allocate_test.go TestAllocateWithPartitionPolicyNetworkTopology (line in the id): the
    pods bound in one allocate session (and where, when the Go case checks it)."""
    run = simulate(objects(case), conf=CONF, max_cycles=1)
    pending = {pod[0] for pod in case.pods if pod[1] is None}
    new_binds = {pod: node for pod, node in run.binds().items() if pod in pending}
    assert len(new_binds) == case.binds, new_binds
    if case.bind_map is not None:
        assert new_binds == case.bind_map


CLI_MANIFEST = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q1}
spec: {weight: 1}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-a}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^a-"}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-b}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^b-"}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members:
  - {type: HyperNode, selector: {exactMatch: {name: leaf-a}}}
  - {type: HyperNode, selector: {exactMatch: {name: leaf-b}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train, namespace: default}
spec:
  minMember: 4
  queue: q1
  networkTopology: {mode: hard, highestTierAllowed: 2}
  subGroupPolicy:
  - name: teams
    matchLabelKeys: [team]
    subGroupSize: 2
    minSubGroups: 2
    networkTopology: {mode: hard, highestTierAllowed: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: short, namespace: default}
spec:
  minMember: 1
  queue: q1
  subGroupPolicy:
  - {name: teams, matchLabelKeys: [team], minSubGroups: 2}
"""


def _cli_objects() -> str:
    docs = [CLI_MANIFEST]
    for name in ("a-0", "a-1", "b-0", "b-1"):
        docs.append(yaml.safe_dump(make_node(name, cpu="4", memory="8Gi", pods="10")))
    for i, team in enumerate("xxyy"):
        pod = make_pod(f"train-{i}", cpu="4", memory="1Gi", group="train")
        pod["metadata"]["labels"] = {"team": team}
        docs.append(yaml.safe_dump(pod))
    lone = make_pod("short-0", cpu="1", memory="1Gi", group="short")
    lone["metadata"]["labels"] = {"team": "x"}
    docs.append(yaml.safe_dump(lone))
    return "\n---\n".join(docs)


def test_lahar_simulate_places_each_partition_in_one_leaf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lahar simulate`` with ``subGroupPolicy``: each team of the ``train`` job is a gang of
    two inside one leaf HyperNode (``allocateForSubJob``), so the two teams take one leaf each;
    ``short`` has one partition where its policy asks for two: gang finds it invalid
    (``CheckSubJobValid`` in gang.go ``validJobFn``) and it stays unscheduled."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(_cli_objects())
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    assert main(["simulate", str(cluster), "--conf", str(conf), "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}
    nodes = {name: pods[name]["spec"].get("nodeName", "") for name in pods}
    team_x = {nodes["train-0"][0], nodes["train-1"][0]}
    team_y = {nodes["train-2"][0], nodes["train-3"][0]}
    assert len(team_x) == len(team_y) == 1 and team_x != team_y, nodes
    assert nodes["short-0"] == ""
    group = next(i for i in items if i["kind"] == "PodGroup" and i["metadata"]["name"] == "short")
    assert [c["type"] for c in group["status"]["conditions"]] == ["Unschedulable"]


def test_sub_group_tier_name_matching_no_tier_drops_that_constraint() -> None:
    """A sub-group ``highestTierName`` that names no tier: Volcano's
    ``translateHighestTierNameToAllowed`` (session.go) fails and leaves that partition
    unconstrained, and the job is placed; so is it here, with a warning naming the field."""
    case = next(c for c in CASES if c.line == 2897)
    objs = objects(case)
    group = next(o for o in objs if o["kind"] == "PodGroup")
    group["spec"]["subGroupPolicy"][0]["networkTopology"] = {
        "mode": "hard",
        "highestTierName": "volcano.sh/nowhere",
    }
    with structlog.testing.capture_logs() as logs:
        run = simulate(objs, conf=CONF, max_cycles=1)
    assert run.binds()
    assert any("spec.subGroupPolicy[0].networkTopology.highestTierName" in str(e.get("problem"))
               for e in logs)


def test_pods_go_to_the_first_policy_that_selects_them() -> None:
    """``getOrCreateSubJob`` / ``getSubJobMatchValues`` (job_info.go, sub_job_info.go): the
    first policy whose selector matches and whose keys the pod all carries (non-empty) takes
    it; a policy without ``matchLabelKeys`` takes nothing; the rest is the default sub-job,
    which needs 1 pod and keeps the PodGroup's constraint."""
    group = podgroup_from_object(
        make_podgroup(
            "pg",
            min_member=3,
            network_topology={"mode": "hard", "highestTierAllowed": 2},
            sub_group_policy=[
                {"name": "keyless", "subGroupSize": 5},
                {
                    "name": "gpu",
                    "matchLabelKeys": ["rank", "slot"],
                    "labelSelector": {"matchLabels": {"kind": "gpu"}},
                    "subGroupSize": 2,
                    "minSubGroups": 1,
                },
                {"name": "any", "matchLabelKeys": ["rank"]},
            ],
        )
    )
    labels = {
        "a": {"kind": "gpu", "rank": "3", "slot": "x"},
        "b": {"kind": "gpu", "rank": "3", "slot": "x"},
        "c": {"kind": "cpu", "rank": "3", "slot": "x"},  # not selected by gpu: goes to any
        "d": {"kind": "gpu", "rank": "3", "slot": ""},  # empty value: not gpu either
        "e": {"kind": "gpu"},  # no key at all: default
    }
    tasks = []
    for name, pod_labels in labels.items():
        pod = make_pod(name, group="pg")
        pod["metadata"]["labels"] = pod_labels
        tasks.append(task_from_pod(pod))
    subs = partition_tasks("ns/pg", group, min_available=3, tasks=tasks)
    members = {uid: sorted(t.name for t in sub.tasks.values()) for uid, sub in subs.by_uid.items()}
    assert members == {
        "ns/pg/gpu-3-x": ["a", "b"],
        "ns/pg/any-3": ["c", "d"],
        "ns/pg": ["e"],
    }
    gpu, default = subs.by_uid["ns/pg/gpu-3-x"], subs.by_uid["ns/pg"]
    assert (gpu.min_available, gpu.match_index, gpu.topology) == (2, 3, None)
    assert default.min_available == 1 and default.topology == group.network_topology
    assert subs.min_sub_groups == {"ns/pg/keyless": 0, "ns/pg/gpu": 1, "ns/pg/any": 0}
    assert subs.valid()
    assert not subs.enough(pipelined=False)  # no pod of gpu is placed yet
