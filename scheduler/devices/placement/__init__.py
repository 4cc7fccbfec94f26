"""How a card is chosen: the fragmentation-aware placement policies.

The pieces are pure and fast so that the fine-grained device family can call them on every
pod, and the trace replay (:mod:`scheduler.replay`) measures them:

- ``state``    the columnar per-node free resources the policies read;
- ``frag``     the FGD fragmentation measure and its per-placement delta;
- ``fgd``      FGD's node score and card choice;
- ``online``   a decayed estimate of the target workload from the pods seen so far;
- ``learned``  ours, ``fgd-learned``;
- ``policies`` node scores and card choice of the six published policies and ours.
"""
