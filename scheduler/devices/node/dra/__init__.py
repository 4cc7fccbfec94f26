"""The node agent as a DRA driver: its devices, ResourceSlices and kubelet plugin."""
