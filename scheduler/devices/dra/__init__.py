"""Dynamic Resource Allocation (``resource.k8s.io/v1``): the objects and kube-scheduler's
structured-parameters allocator, pure (no I/O), for the session and the tools to build on."""
