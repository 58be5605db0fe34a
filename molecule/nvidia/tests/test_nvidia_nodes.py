"""What the NVIDIA roles leave on every node of the scenario, whichever the driver source."""

from __future__ import annotations

import json

from nvidia_nodes import DISTRO_PACKAGES, RELEASE, RUNNER, branch, is_repo, selection

testinfra_hosts = RUNNER.get_hosts("all")


def test_node_runs_the_release_under_test(host):
    # The release's expectations (vars/releases.yml) are checked against that release.
    assert f'VERSION_ID="{RELEASE.removeprefix("debian")}"' in host.file("/etc/os-release").content_string


def test_driver_branch_is_pinned(host):
    pin = host.file("/etc/apt/preferences.d/deepops-nvidia-driver").content_string
    assert f"Pin: version {branch(host)}.*" in pin
    assert "Pin-Priority: 1001" in pin
    package = "nvidia-driver" if is_repo(host) else "nvidia-smi"
    policy = host.check_output(f"apt-cache policy {package}")
    assert f"Installed: {branch(host)}." in policy, policy
    assert "1001" in policy, policy


def test_driver_packages_are_held(host):
    for package in [f"nvidia-open-{branch(host)}"] if is_repo(host) else DISTRO_PACKAGES:
        assert selection(host, package) == "hold", package


def test_nouveau_blacklisted(host):
    conf = host.file("/etc/modprobe.d/deepops-blacklist-nouveau.conf")
    assert "blacklist nouveau" in conf.content_string
    assert "options nouveau modeset=0" in conf.content_string


def test_persistenced_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_gpu_settings_unit_enabled(host):
    assert host.service("deepops-gpu-settings").is_enabled
    unit = host.file("/etc/systemd/system/deepops-gpu-settings.service").content_string
    assert "Type=oneshot" in unit and "ExecStart=/usr/local/sbin/deepops-gpu-settings --apply" in unit


def test_reboot_flag_only_where_the_driver_changed(host):
    fact = json.loads(host.check_output("/etc/ansible/facts.d/nvidia_driver.fact"))
    if is_repo(host):
        assert fact["reboot_required"] is True
        assert "580" in fact["reason"]
    else:
        assert fact == {"reboot_required": False}
