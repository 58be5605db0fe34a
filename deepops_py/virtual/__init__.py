"""The virtual cluster: systemd containers with simulated GPUs, reachable over SSH (see cluster.py)."""
