"""Device families and everything about a card, between the data model and the framework.

- ``base``, ``registry``: the family protocol, the conf switches and the registry of families;
- ``names``, ``codec``, ``requests``, ``usage``: annotation keys, their encodings, the requests
  a pod makes and what bound pods hold (Volcano GPU share and HAMi vGPU);
- ``gpushare``, ``vgpu``: the Volcano and HAMi families;
- ``finegrained/``: the Koordinator family (GPU, RDMA, FPGA, topology, joint allocation);
- ``placement/``: how a card is chosen among those that fit (FGD and the other policies);
- ``node/``: the node side: handshake, node lock, what a node reports, a container's env.

Nothing here imports the framework, the cache or anything above them.
"""
