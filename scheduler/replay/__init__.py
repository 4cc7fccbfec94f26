"""Trace replay of GPU-sharing workloads: the experiment that measures the placement policies
of :mod:`scheduler.devices.placement`.

- ``sources``  finds the trace: the sample shipped in ``data/``, or a traces folder;
- ``trace``    loads the Alibaba GPU trace CSVs and builds a run's pod sequence;
- ``run``      drives one run's pods through the scheduler's own path on the embedded cluster;
- ``metrics``  the per-pod-event metrics, their arrival buckets and the CSV files;
- ``bound``    the unallocated GPU no placement of the same pods can go below;
- ``batch``    many runs side by side in worker processes, their progress, Ctrl-C;
- ``plot``     the figure.

Only :mod:`scheduler.commands` imports this package.
"""
