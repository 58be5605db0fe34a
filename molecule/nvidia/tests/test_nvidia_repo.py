"""The node on NVIDIA's repository (the stand-in): the 570 -> 580 move, Fabric
Manager, CUDA side by side, cuDNN/NCCL/DCGM, GPU settings, and deepops plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nvidia_nodes import INVENTORY, PROJECT, RELEASE, REPO_DRIVER, REPO_HOSTS, name, selection, version

testinfra_hosts = REPO_HOSTS


def test_moved_to_the_new_branch_and_open_modules(host):
    assert version(host, "nvidia-driver") == REPO_DRIVER
    assert host.package("nvidia-open-kernel-dkms").is_installed
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.package("cuda-drivers-570").is_installed
    source = host.file(f"/etc/apt/sources.list.d/cuda-{RELEASE}-x86_64.list").content_string
    assert source.strip() == "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] http://127.0.0.1:8089/ /"


def test_gpu_settings_applied(host):
    values = host.check_output(
        "nvidia-smi --query-gpu=persistence_mode,power.limit,clocks.applications.memory,clocks.applications.graphics "
        "--format=csv,noheader,nounits").splitlines()
    assert values == ["Enabled, 450.00, 2619, 1980"] * 2
    assert host.run("/usr/local/sbin/deepops-gpu-settings --check").rc == 0


def test_fabricmanager_matches_the_driver(host):
    assert version(host, "nvidia-fabricmanager") == REPO_DRIVER
    assert selection(host, "nvidia-fabricmanager") == "hold"
    assert not host.package("nvidia-fabricmanager-570").is_installed
    assert host.service("nvidia-fabricmanager").is_enabled


def test_cuda_toolkits_side_by_side_with_one_default(host):
    for toolkit in ("13.0", "12.8"):
        assert host.file(f"/usr/local/cuda-{toolkit}/bin/nvcc").is_executable
        assert selection(host, f"cuda-toolkit-{toolkit.replace('.', '-')}") == "hold"
    login = host.run("bash -lc 'nvcc; echo \"$LD_LIBRARY_PATH\"'")
    assert "release 13.0" in login.stdout
    assert "/usr/local/cuda-13.0/lib64" in login.stdout


def test_lmod_loads_each_toolkit_and_the_default(host):
    def cuda_home(module: str) -> str:
        return host.check_output(f"bash -lc 'module purge; module load {module}; echo $CUDA_HOME; command -v nvcc'")

    assert cuda_home("cuda").split() == ["/usr/local/cuda-13.0", "/usr/local/cuda-13.0/bin/nvcc"]
    assert cuda_home("cuda/12.8").split() == ["/usr/local/cuda-12.8", "/usr/local/cuda-12.8/bin/nvcc"]


def test_cudnn_nccl_and_dcgm_for_the_cuda_major(host):
    assert host.package("libcudnn9-cuda-13").is_installed
    assert version(host, "libnccl2").endswith("+cuda13.0")
    assert host.package("datacenter-gpu-manager-4-cuda13").is_installed
    assert host.service("nvidia-dcgm").is_enabled


# --------------------------------------------------------------------------
# deepops plan: the component playbook in check mode, from the controller


def _plan(*extra: str) -> dict:
    # The project's own ansible.cfg (its roles and plugins), as deepops runs it;
    # none of molecule's ANSIBLE_* settings, and only the json callback on stdout.
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update({"ANSIBLE_CONFIG": str(PROJECT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    result = subprocess.run(
        # The scenario's converge playbook: the groups every entry playbook
        # resolves first (the NVIDIA plays run on deepops_nvidia_stack), then
        # the NVIDIA component plays; the component alone would run on no host.
        [playbook, "-i", INVENTORY, str(PROJECT / "molecule" / "nvidia" / "converge.yml"), "--check", *extra],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


def _task_results(run: dict, task_name: str) -> dict:
    found = {}
    for play in run["plays"]:
        for task in play["tasks"]:
            # The json callback names role tasks "role : name".
            if task["task"]["name"].split(" : ", 1)[-1] == task_name:
                found.update(task["hosts"])
    return found


def test_plan_of_the_same_branch_changes_nothing_and_keeps_the_reboot_plan(host):
    run = _plan()
    assert {node: stats["changed"] for node, stats in run["stats"].items()} == dict.fromkeys(run["stats"], 0)
    plan = _task_results(run, "NVIDIA driver | Show the reboot plan")
    assert "batch 1 of 1" in plan[name(host)]["msg"], plan
    assert "not rebooting" in plan[name(host)]["msg"]
    assert all(result.get("skipped") for node, result in plan.items() if node != name(host)), plan


def test_plan_of_a_branch_change_shows_it(host):
    run = _plan("--limit", name(host), "-e", json.dumps(
        {"nvidia_driver_branch": 570, "nvidia_driver_open_kernel_modules": False, "cuda_versions": ["12.8"]}))
    planned = _task_results(run, "NVIDIA driver | Report the driver a deploy would install")[name(host)]
    assert planned["changed"] is True
    assert "cuda-drivers-570" in planned["msg"]
    assert run["stats"][name(host)]["changed"] > 0
    # Check mode only: the node still runs 580.
    assert version(host, "nvidia-driver") == REPO_DRIVER


def test_dgx_os_with_its_driver_preinstalled_is_left_alone(host):
    # /etc/dgx-release and a driver that answers: what a DGX OS node has.
    host.check_output("printf 'DGX_NAME=\"DGX Server\"\\n' > /etc/dgx-release")
    try:
        run = _plan("--limit", name(host), "-e", json.dumps(
            {"nvidia_driver_branch": 570, "nvidia_driver_open_kernel_modules": False, "cuda_versions": ["12.8"]}))
    finally:
        host.check_output("rm -f /etc/dgx-release")
    said = _task_results(run, "NVIDIA driver | Say the preinstalled driver is left alone")[name(host)]
    assert "DGX OS with driver 580.95.05 preinstalled" in said["msg"]
    for task in ("NVIDIA driver | Pin the driver branch", "NVIDIA driver | Report the driver a deploy would install"):
        assert not _task_results(run, task).get(name(host), {}).get("changed"), task


# --------------------------------------------------------------------------
# nccl-tests: built once from the (stand-in) release, against the toolkit and NCCL

NCCL_TESTS = "/opt/deepops/nccl-tests"
NCCL_TESTS_VERSION = "2.13.6"


def test_nccl_tests_built_with_mpi_against_the_default_toolkit_and_nccl(host):
    assert host.file(f"{NCCL_TESTS}/bin").linked_to == f"{NCCL_TESTS}/{NCCL_TESTS_VERSION}/bin"
    built = host.check_output(f"{NCCL_TESTS}/bin/all_reduce_perf")
    # What the stand-in Makefile was given by the role's make command.
    assert "CUDA_HOME=/usr/local/cuda-13.0 NCCL_HOME=/usr MPI=1" in built
    assert "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90" in built
    assert host.file(f"{NCCL_TESTS}/bin/sendrecv_perf").is_executable
    assert not host.file(f"{NCCL_TESTS}/bin/common.o").exists  # the programs only
    # NCCL's headers are the installed library's release exactly.
    assert version(host, "libnccl-dev") == version(host, "libnccl2")
    assert host.file("/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h").exists
    stamp = host.file(f"{NCCL_TESTS}/{NCCL_TESTS_VERSION}/.deepops-build").content_string
    assert f"version={NCCL_TESTS_VERSION}\n" in stamp and "cuda_archs=80,86,89,90\n" in stamp
    assert not host.file(f"/var/cache/deepops/nccl-tests-{NCCL_TESTS_VERSION}").exists  # source tree removed


def test_plan_of_another_nccl_tests_release_shows_a_build(host):
    # Only the role's tasks (and the always-tagged checks): the stamp decides, nothing else needs to run.
    run = _plan("--limit", name(host), "--tags", "nccl_tests", "-e", json.dumps(
        {"nccl_tests_version": "2.13.7", "nccl_tests_sha256": "0" * 64}))
    planned = _task_results(run, "NCCL tests | Report the build a deploy would make")[name(host)]
    assert planned["changed"] is True and "would build nccl-tests 2.13.7" in planned["msg"], planned
    assert host.file(f"{NCCL_TESTS}/bin").linked_to == f"{NCCL_TESTS}/{NCCL_TESTS_VERSION}/bin"  # check mode only
