"""What the nvidia-debian* scenarios' testinfra modules share: the scenario's
hosts by group, the versions converge installs, and small dpkg helpers.

Shared by molecule/nvidia-debian12 and nvidia-debian13 (symlinks there).
The ...-nvidia-repo node went from branch 570 (proprietary modules, CUDA
12.8) to 580 (open modules, CUDA 13.0 + 12.8) against the stand-in NVIDIA
repository; the ...-nvidia-distro node was already on Debian's driver.
Each test module names its hosts (testinfra_hosts), so no test skips itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
REPO_HOSTS = RUNNER.get_hosts("nvidia_repo")
DISTRO_HOSTS = RUNNER.get_hosts("nvidia_distro")
PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
# Debian's own driver branch per release.
DEBIAN_BRANCH = {"debian12": "535", "debian13": "550"}
REPO_BRANCH = "580"
REPO_DRIVER = "580.95.05-1"
DISTRO_PACKAGES = ["nvidia-smi", "libnvidia-ml1", "nvidia-persistenced"]


def name(host) -> str:
    return host.backend.get_hostname()


def is_repo(host) -> bool:
    return name(host) in REPO_HOSTS


def branch(host) -> str:
    return REPO_BRANCH if is_repo(host) else DEBIAN_BRANCH[name(host).rsplit("-", 1)[1]]


def version(host, package: str) -> str:
    return host.check_output(f"dpkg-query --show --showformat='${{Version}}' {package}")


def selection(host, package: str) -> str:
    return host.check_output(f"dpkg --get-selections {package}").split()[-1]
