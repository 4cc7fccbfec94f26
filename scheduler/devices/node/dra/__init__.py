"""The node agent as a DRA kubelet plugin: registration, ``NodePrepareResources`` /
``NodeUnprepareResources``, CDI specs per claim and the on-disk checkpoint."""
