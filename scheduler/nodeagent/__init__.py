"""The node side of fine-grained devices, as a library: what a node reports and what a
container of a pod with devices must be given."""
