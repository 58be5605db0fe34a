"""What the nvidia scenario's testinfra modules share: the scenario's hosts
by group, this run's Debian release and what is expected on it (its row of
vars/releases.yml), the versions converge installs, and small dpkg helpers.

The ...-nvidia-repo node went from branch 570 (proprietary modules, CUDA
12.8) to 580 (open modules, CUDA 13.0 + 12.8) against the stand-in NVIDIA
repository; the ...-nvidia-distro node was already on Debian's driver.
Each test module names its hosts (testinfra_hosts), so no test skips itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import testinfra.utils.ansible_runner
import yaml

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
REPO_HOSTS = RUNNER.get_hosts("nvidia_repo")
DISTRO_HOSTS = RUNNER.get_hosts("nvidia_distro")
PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
# The run's release (molecule.yml: DEEPOPS_NVIDIA_RELEASE) and its row of the table.
RELEASE = RUNNER.get_variables(REPO_HOSTS[0])["deepops_test_release"]
EXPECTED = yaml.safe_load((Path(__file__).resolve().parents[1] / "vars" / "releases.yml").read_text())[RELEASE]
REPO_BRANCH = "580"
REPO_DRIVER = "580.95.05-1"
DISTRO_PACKAGES = ["nvidia-smi", "libnvidia-ml1", "nvidia-persistenced"]


def name(host) -> str:
    return host.backend.get_hostname()


def is_repo(host) -> bool:
    return name(host) in REPO_HOSTS


def branch(host) -> str:
    return REPO_BRANCH if is_repo(host) else str(EXPECTED["distribution_driver_branch"])


def version(host, package: str) -> str:
    return host.check_output(f"dpkg-query --show --showformat='${{Version}}' {package}")


def selection(host, package: str) -> str:
    return host.check_output(f"dpkg --get-selections {package}").split()[-1]
