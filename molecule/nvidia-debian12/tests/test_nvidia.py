"""What the NVIDIA roles leave on the two nodes of a scenario, checked from inside the containers.

Shared by molecule/nvidia-debian12 and nvidia-debian13 (a symlink there).
The ...-nvidia-repo node went from branch 570 (proprietary modules, CUDA
12.8) to 580 (open modules, CUDA 13.0 + 12.8) against the stand-in NVIDIA
repository; the ...-nvidia-distro node was already on Debian's driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")
PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
# Debian's own driver branch per release.
DEBIAN_BRANCH = {"debian12": "535", "debian13": "550"}
REPO_DRIVER = "580.95.05-1"


def _name(host) -> str:
    return host.backend.get_hostname()


def _is_repo(host) -> bool:
    return "nvidia-repo" in _name(host)


def _branch(host) -> str:
    return "580" if _is_repo(host) else DEBIAN_BRANCH[_name(host).rsplit("-", 1)[1]]


def _version(host, package: str) -> str:
    return host.check_output(f"dpkg-query --show --showformat='${{Version}}' {package}")


def _selection(host, package: str) -> str:
    return host.check_output(f"dpkg --get-selections {package}").split()[-1]


def test_driver_branch_is_pinned(host):
    pin = host.file("/etc/apt/preferences.d/deepops-nvidia-driver").content_string
    assert f"Pin: version {_branch(host)}.*" in pin
    assert "Pin-Priority: 1001" in pin
    package = "nvidia-driver" if _is_repo(host) else "nvidia-smi"
    policy = host.check_output(f"apt-cache policy {package}")
    assert f"Installed: {_branch(host)}." in policy, policy
    assert "1001" in policy, policy


def test_driver_packages_are_held(host):
    packages = ["nvidia-open-580"] if _is_repo(host) else ["nvidia-smi", "libnvidia-ml1", "nvidia-persistenced"]
    for package in packages:
        assert _selection(host, package) == "hold", package


def test_repo_node_moved_to_the_new_branch_and_open_modules(host):
    if not _is_repo(host):
        pytest.skip("NVIDIA-repository node only")
    assert _version(host, "nvidia-driver") == REPO_DRIVER
    assert host.package("nvidia-open-kernel-dkms").is_installed
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.package("cuda-drivers-570").is_installed
    source = host.file("/etc/apt/sources.list.d/cuda-debian{}-x86_64.list".format(_name(host)[-2:])).content_string
    assert source.strip() == "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] http://127.0.0.1:8089/ /"


def test_distribution_node_runs_debians_user_space_driver(host):
    if _is_repo(host):
        pytest.skip("distribution node only")
    assert _version(host, "nvidia-smi").startswith(_branch(host) + ".")
    assert host.file("/etc/apt/sources.list.d/deepops-nvidia-distribution.list").contains("non-free")
    # No real GPU and no kernel module: Debian's real nvidia-smi says so.
    assert host.run("nvidia-smi").rc != 0


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


def test_gpu_settings_applied(host):
    if not _is_repo(host):
        pytest.skip("the distribution node has no GPU to set (its nvidia-smi finds no driver)")
    values = host.check_output(
        "nvidia-smi --query-gpu=persistence_mode,power.limit,clocks.applications.memory,clocks.applications.graphics "
        "--format=csv,noheader,nounits").splitlines()
    assert values == ["Enabled, 450.00, 2619, 1980"] * 2
    assert host.run("/usr/local/sbin/deepops-gpu-settings --check").rc == 0


def test_reboot_flag(host):
    fact = json.loads(host.check_output("/etc/ansible/facts.d/nvidia_driver.fact"))
    if _is_repo(host):
        assert fact["reboot_required"] is True
        assert "580" in fact["reason"]
    else:
        assert fact == {"reboot_required": False}


def test_fabricmanager_matches_the_driver(host):
    if not _is_repo(host):
        assert not host.package("nvidia-fabricmanager").is_installed
        pytest.skip("no NVSwitch on the distribution node")
    assert _version(host, "nvidia-fabricmanager") == REPO_DRIVER
    assert _selection(host, "nvidia-fabricmanager") == "hold"
    assert not host.package("nvidia-fabricmanager-570").is_installed
    assert host.service("nvidia-fabricmanager").is_enabled


def test_cuda_toolkits_side_by_side_with_one_default(host):
    if not _is_repo(host):
        pytest.skip("CUDA from NVIDIA's repository only")
    for version in ("13.0", "12.8"):
        assert host.file(f"/usr/local/cuda-{version}/bin/nvcc").is_executable
        assert _selection(host, f"cuda-toolkit-{version.replace('.', '-')}") == "hold"
    login = host.run("bash -lc 'nvcc; echo \"$LD_LIBRARY_PATH\"'")
    assert "release 13.0" in login.stdout
    assert "/usr/local/cuda-13.0/lib64" in login.stdout


def test_cudnn_nccl_and_dcgm_for_the_cuda_major(host):
    if not _is_repo(host):
        pytest.skip("NVIDIA's repository only")
    assert host.package("libcudnn9-cuda-13").is_installed
    assert _version(host, "libnccl2").endswith("+cuda13.0")
    assert host.package("datacenter-gpu-manager-4-cuda13").is_installed
    assert host.service("nvidia-dcgm").is_enabled


# --------------------------------------------------------------------------
# deepops plan: the component playbook in check mode, from the controller


@cache
def _plan(*extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_COLLECTIONS_PATH"}
    env.update({
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_ROLES_PATH": str(PROJECT / "roles"),
        "ANSIBLE_LIBRARY": str(PROJECT / "plugins" / "modules"),
        "ANSIBLE_MODULE_UTILS": str(PROJECT / "plugins" / "module_utils"),
        "ANSIBLE_FILTER_PLUGINS": str(PROJECT / "plugins" / "filter"),
        "ANSIBLE_ACTION_PLUGINS": str(PROJECT / "plugins" / "action"),
    })
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    result = subprocess.run(
        [playbook, "-i", INVENTORY, str(PROJECT / "playbooks" / "components" / "nvidia.yml"), "--check", *extra],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


def _task_results(run: dict, name: str) -> dict:
    found = {}
    for play in run["plays"]:
        for task in play["tasks"]:
            # The json callback names role tasks "role : name".
            if task["task"]["name"].split(" : ", 1)[-1] == name:
                found.update(task["hosts"])
    return found


def test_plan_of_the_same_branch_changes_nothing_and_keeps_the_reboot_plan(host):
    if not _is_repo(host):
        pytest.skip("runs once, from the repository node's test")
    run = _plan()
    assert {name: stats["changed"] for name, stats in run["stats"].items()} == dict.fromkeys(run["stats"], 0)
    plan = _task_results(run, "NVIDIA driver | Show the reboot plan")
    assert "batch 1 of 1" in plan[_name(host)]["msg"], plan
    assert "not rebooting" in plan[_name(host)]["msg"]
    assert all(result.get("skipped") for name, result in plan.items() if name != _name(host)), plan


def test_plan_of_a_branch_change_shows_it(host):
    if not _is_repo(host):
        pytest.skip("runs once, from the repository node's test")
    run = _plan("--limit", _name(host), "-e", json.dumps(
        {"nvidia_driver_branch": 570, "nvidia_driver_open_kernel_modules": False, "cuda_versions": ["12.8"]}))
    planned = _task_results(run, "NVIDIA driver | Report the driver a deploy would install")[_name(host)]
    assert planned["changed"] is True
    assert "cuda-drivers-570" in planned["msg"]
    assert run["stats"][_name(host)]["changed"] > 0
    # Check mode only: the node still runs 580.
    assert _version(host, "nvidia-driver") == REPO_DRIVER
