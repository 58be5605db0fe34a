"""The NVIDIA component playbook and the roles' preflight: every rejected
combination fails in the first play, before any task that changes a host.

The preflight play runs for real (ansible-playbook, local connection) against
a stand-in nvidia-smi that prints a recorded H100 capture, one inventory host
per case, so one run covers them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "components" / "nvidia.yml"
ROLES = ("nvidia_driver", "nvidia_fabricmanager", "cuda", "nvidia_dcgm", "gpu_settings", "nccl_tests")
H100_XML = REPO / "deepops_py" / "virtual" / "fixtures" / "h100-sxm5-80gb-x8-driver580.xml"
# Modules a preflight may use: none of them changes a host.
READ_ONLY = {
    "ansible.builtin.assert", "ansible.builtin.stat", "ansible.builtin.include_vars", "ansible.builtin.set_fact",
    "ansible.builtin.debug", "deepops.cluster.nvidia_gpu_facts",
}


def _plays() -> list[dict]:
    return yaml.safe_load(PLAYBOOK.read_text())


def test_first_play_runs_every_roles_preflight_and_nothing_else():
    first = _plays()[0]
    imported = [(task["ansible.builtin.import_role"]["name"], task["ansible.builtin.import_role"]["tasks_from"]) for task in first["tasks"]]
    assert imported == [(role, "preflight.yml") for role in ROLES]


def _preflight_tasks(role: str, name: str = "preflight.yml") -> list[dict]:
    """The preflight's tasks, with those of the task files it includes."""
    tasks = []
    for task in yaml.safe_load((REPO / "roles" / role / "tasks" / name).read_text()):
        included = task.get("ansible.builtin.include_tasks")
        tasks.extend(_preflight_tasks(role, included) if included else [task])
    return tasks


@pytest.mark.parametrize("role", ROLES)
def test_preflight_tasks_only_read(role):
    for task in _preflight_tasks(role):
        modules = set(task) & (READ_ONLY | {"ansible.builtin.command", "ansible.builtin.apt", "ansible.builtin.copy"})
        assert modules and modules <= READ_ONLY, (role, task["name"])


def test_reboot_is_throttled_and_opt_in():
    reboot = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "tasks" / "reboot.yml").read_text())
    (task,) = [task for task in reboot if "ansible.builtin.reboot" in task]
    assert task["throttle"] == "{{ nvidia_driver_reboot_batch_size }}"
    assert "nvidia_driver_reboot | bool" in task["when"]
    assert yaml.safe_load((REPO / "roles" / "nvidia_driver" / "defaults" / "main.yml").read_text())["nvidia_driver_reboot"] is False


def test_site_runs_the_nvidia_stack_after_common_and_before_slurm():
    imports = [play["ansible.builtin.import_playbook"] for play in yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())]
    assert "components/nvidia.yml" in imports
    assert imports.index("components/nvidia.yml") > imports.index("components/common.yml")
    if "components/slurm.yml" in imports:
        assert imports.index("components/nvidia.yml") < imports.index("components/slurm.yml")


def test_virtual_cluster_switches_the_stack_off():
    from deepops_py.virtual import inventory

    text = inventory.render_inventory([inventory.Endpoint("gpu01", "compute", 2222, "ssh-ed25519 AAAA")],
                                      key_path=Path("/k"), known_hosts_path=Path("/kh"), apt_proxy="")
    variables = yaml.safe_load(text)["all"]["vars"]
    for name in ("nvidia_driver_enabled", "nvidia_fabricmanager_enabled", "cuda_enabled", "nvidia_dcgm_enabled", "gpu_settings_enabled",
                 "nccl_tests_enabled"):
        assert variables[name] is False, name


# --------------------------------------------------------------------------
# the preflight play, run


CASES = {
    "ok": {},
    "hopper-on-520": {"nvidia_driver_branch": 520, "cuda_versions": ["11.8"]},
    "cuda13-on-570": {"nvidia_driver_branch": 570},
    "fm-mismatch": {"nvidia_driver_version": "580.95.05", "nvidia_fabricmanager_version": "580.82.07"},
    "power-too-high": {"gpu_settings_power_limit_w": 900},
    "power-too-low": {"gpu_settings_power_limit_w": 100},
    "version-other-branch": {"nvidia_driver_version": "570.195.03"},
}
EXPECTED_FAILURES = {
    "hopper-on-520": ("NVIDIA driver | Assert the branch supports every GPU model present", "(Hopper) needs driver branch 525"),
    "cuda13-on-570": ("CUDA | Assert the driver branch supports every toolkit", "CUDA toolkit 13.0 needs driver branch 580"),
    "fm-mismatch": ("Fabric Manager | Assert its version is the driver's", "differs from the driver 580.95.05"),
    "power-too-high": ("GPU settings | Assert the power limit is within every GPU's range", "900 W is outside GPU 0"),
    "power-too-low": ("GPU settings | Assert the power limit is within every GPU's range", "100 W is outside GPU 0"),
    "version-other-branch": ("NVIDIA driver | Assert the driver version belongs to the branch", "not in driver branch 580"),
}


@pytest.fixture(scope="module")
def preflight_run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("preflight")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -q ] && exec cat {H100_XML}\nexit 3\n")
    smi.chmod(0o755)
    hosts = {
        name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **variables}
        for name, variables in CASES.items()
    }
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"slurm_compute": {"hosts": hosts}}}}))
    playbook = tmp / "preflight.yml"
    # After the groups every entry playbook resolves first: the play runs on deepops_nvidia_stack.
    groups = {"name": "Groups", "ansible.builtin.import_playbook": str(REPO / "playbooks" / "groups.yml")}
    playbook.write_text(yaml.safe_dump([groups, _plays()[0]], sort_keys=False))
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")},
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
    }
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook), "-e", "ansible_become=false"],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300,
    )
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(result.stdout[-4000:] + result.stderr[-4000:])


def _failure(run: dict, host: str) -> tuple[str, str] | None:
    for play in run["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(host)
            if result and result.get("failed"):
                # The json callback names role tasks "role : name".
                return task["task"]["name"].split(" : ", 1)[-1], result.get("msg", "")
    return None


def test_compatible_defaults_pass_the_preflight(preflight_run):
    assert _failure(preflight_run, "ok") is None
    assert preflight_run["stats"]["ok"]["failures"] == 0
    assert preflight_run["stats"]["ok"]["changed"] == 0


@pytest.mark.parametrize("case", sorted(EXPECTED_FAILURES))
def test_incompatible_combination_is_rejected_by_the_preflight(preflight_run, case):
    task, message = EXPECTED_FAILURES[case]
    failure = _failure(preflight_run, case)
    assert failure is not None, f"{case} passed the preflight"
    assert failure[0] == task
    assert message in failure[1]
