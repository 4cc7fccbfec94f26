"""The node agent as a DRA driver: its devices, ResourceSlices and kubelet plugin
(registration, ``NodePrepareResources`` / ``NodeUnprepareResources``, CDI specs per claim and
the on-disk checkpoint)."""
