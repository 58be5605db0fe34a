"""What role common leaves on a node, checked from inside the container."""

from __future__ import annotations

import os

import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")


def test_base_and_extra_packages_installed(host):
    for name in ("chrony", "tzdata", "curl", "rsync", "jq", "numactl", "hwloc", "pciutils", "file"):
        assert host.package(name).is_installed, name


def test_recommends_not_pulled_in(host):
    # libhwloc15 (under hwloc) recommends libhwloc-plugins, which pulls in X
    # and GL libraries: install_recommends: false keeps nodes lean.
    assert not host.package("libhwloc-plugins").is_installed


def test_stale_apt_proxy_removed(host):
    assert not host.file("/etc/apt/apt.conf.d/01deepops-proxy").exists


def test_hosts_block_maps_every_member(host):
    hosts = host.file("/etc/hosts").content_string
    assert "# BEGIN deepops cluster hosts" in hosts and "# END deepops cluster hosts" in hosts
    block = hosts.split("# BEGIN deepops cluster hosts\n", 1)[1].split("# END deepops cluster hosts", 1)[0]
    facts = host.ansible("setup", "gather_subset=!all,!min,network", check=False)["ansible_facts"]
    assert [line.split() for line in block.strip().splitlines()] == [
        [facts["ansible_default_ipv4"]["address"], "deepops-molecule-debian12"]
    ]
    assert host.run("getent hosts deepops-molecule-debian12").rc == 0


def test_chrony_configured_and_enabled(host):
    conf = host.file("/etc/chrony/chrony.conf")
    assert conf.mode == 0o644
    assert "server ntp1.example.org iburst" in conf.content_string
    assert "server ntp2.example.org iburst" in conf.content_string
    assert "debian.pool.ntp.org" not in conf.content_string
    assert host.service("chrony").is_enabled


def test_chrony_running_or_declined_by_its_condition(host):
    # Containers lack CAP_SYS_TIME, so systemd skips chronyd by its unit
    # condition; anywhere else it must be running.
    show = host.check_output("systemctl show chrony.service --property=ActiveState,ConditionResult")
    state = dict(line.split("=", 1) for line in show.splitlines())
    assert state["ActiveState"] == "active" or state["ConditionResult"] == "no", state


def test_timezone(host):
    assert host.file("/etc/localtime").linked_to == "/usr/share/zoneinfo/Europe/Berlin"
    assert host.file("/etc/timezone").content_string == "Europe/Berlin\n"
