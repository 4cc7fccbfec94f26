"""Koordinator-style fine-grained devices: GPU (core, memory, memory ratio), RDMA, FPGA, their
PCIe/NUMA topology, joint GPU+NIC allocation and allocation hints."""
