"""``lahar shard-controller``: Volcano's node sharding controller, for clusters without Volcano.

It splits the nodes among schedulers and writes one ``NodeShard`` per scheduler, as Volcano's
``pkg/controllers/sharding`` does: :mod:`.config` reads Volcano's ``sharding.yaml`` (and the
older ``--scheduler-configs`` strings), :mod:`.policies` holds the policies (allocation-rate
bands, warmup preference, node-count limits), :mod:`.metrics` the per-node allocation rates
they read and :mod:`.assign` the filter → sort → select pipeline. The API side is in
:mod:`scheduler.cluster.kube.shardcontroller`.
"""
