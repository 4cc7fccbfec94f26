"""Trace replay of GPU-sharing workloads and fragmentation-aware placement policies.

The pieces here are pure and fast so that the fine-grained device family and the
``lahar replay`` command can call them on every pod:

- ``trace``    loads the Alibaba GPU trace CSVs and builds a run's pod sequence;
- ``state``    the columnar per-node free resources the policies read;
- ``frag``     the FGD fragmentation measure and its per-placement delta;
- ``online``   a decayed estimate of the target workload from the pods seen so far;
- ``policies`` node scores and card choice of the six published policies and ours;
- ``metrics``  the per-pod-event metrics, their arrival buckets and the CSV files.

Nothing here imports the scheduler framework, so the device family can use it directly.
"""
