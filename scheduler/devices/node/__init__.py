"""The node side of device sharing: the handshake a node's device plugin completes after the
scheduler's bind (``handshake``), the node lock (``nodelock``), what a node reports in its
``Device`` object (``report``) and what a container of a pod with devices must be given
(``runtime``)."""
