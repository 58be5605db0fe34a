"""The node on the distribution's driver: Debian's real non-free user-space packages."""

from __future__ import annotations

from nvidia_nodes import DISTRO_HOSTS, branch, version

testinfra_hosts = DISTRO_HOSTS


def test_runs_debians_user_space_driver(host):
    assert version(host, "nvidia-smi").startswith(branch(host) + ".")
    assert host.file("/etc/apt/sources.list.d/deepops-nvidia-distribution.list").contains("non-free")
    # No real GPU and no kernel module: Debian's real nvidia-smi says so.
    assert host.run("nvidia-smi").rc != 0


def test_no_fabric_manager_without_nvswitch(host):
    assert not host.package("nvidia-fabricmanager").is_installed
