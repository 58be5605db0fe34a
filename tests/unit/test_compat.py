"""The NVIDIA compatibility table and its checks (plugins/module_utils/compat.py): each
rejected combination, the table's shape, and the hook into inventory loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.filter import nvidia_compat
from ansible_collections.deepops.cluster.plugins.module_utils import compat, nvidia_smi
from ansible_collections.deepops.cluster.plugins.plugin_utils.inventory import _check_host_nvidia_vars
from deepops_py import inventory as inv
from deepops_py.errors import InputError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "deepops_py" / "virtual" / "fixtures"


def _gpus(fixture: str) -> list[dict]:
    return nvidia_smi.gpu_facts((FIXTURES / fixture).read_text())["gpus"]


# --------------------------------------------------------------------------
# the table


def test_cuda_table_needs_newer_drivers_for_newer_toolkits():
    ordered = sorted(compat.CUDA_MIN_DRIVER.items(), key=lambda item: tuple(int(part) for part in item[0].split(".")))
    branches = [branch for _, branch in ordered]
    assert branches == sorted(branches)
    assert compat.CUDA_MIN_DRIVER["13.0"] == 580 and compat.CUDA_MIN_DRIVER["12.8"] == 570


def test_every_gres_type_has_an_architecture():
    types = {gpu_type for _, gpu_type in nvidia_smi.GPU_TYPE_PATTERNS}
    assert types - set(compat.GPU_TYPE_ARCH) == set()
    assert set(compat.GPU_TYPE_ARCH.values()) <= set(compat.ARCH_DRIVER_BRANCHES)


def test_the_source_is_named_in_the_module():
    assert "CUDA Toolkit Release Notes" in compat.__doc__


# --------------------------------------------------------------------------
# CUDA toolkit against the driver branch


@pytest.mark.parametrize(("branch", "toolkit", "needed"), [(570, "13.0", 580), (535, "12.8", 570), (525, "12.2", 535), (520, "12.0", 525)])
def test_cuda_toolkit_newer_than_the_driver_branch_is_rejected(branch, toolkit, needed):
    problems = compat.cuda_problems(branch, [toolkit])
    assert len(problems) == 1
    assert f"CUDA toolkit {toolkit} needs driver branch {needed} or newer" in problems[0]
    assert f"nvidia_driver_branch is {branch}" in problems[0]


@pytest.mark.parametrize(("branch", "toolkits"), [(580, ["13.0", "12.8", "11.8"]), (570, ["12.8"]), (535, ["11.8", "12.2"])])
def test_supported_toolkits_pass(branch, toolkits):
    assert compat.cuda_problems(branch, toolkits) == []


def test_unknown_toolkit_is_rejected_with_the_known_ones():
    (problem,) = compat.cuda_problems(580, ["14.2"])
    assert "14.2 is not in deepops' compatibility table" in problem and "13.0" in problem


def test_patch_versions_use_their_minor():
    assert compat.cuda_min_driver("12.8.1") == 570
    assert compat.cuda_problems("565", ["12.8.1"]) != []


# --------------------------------------------------------------------------
# Fabric Manager against the driver


def test_fabricmanager_version_differing_from_the_driver_is_rejected():
    (problem,) = compat.fabricmanager_problems(580, "580.95.05", "580.82.07")
    assert "Fabric Manager 580.82.07 differs from the driver 580.95.05" in problem


def test_fabricmanager_of_another_branch_is_rejected():
    (problem,) = compat.fabricmanager_problems(580, "", "570.195.03")
    assert "not in driver branch 580" in problem


def test_fabricmanager_pinned_while_the_driver_floats_is_rejected():
    (problem,) = compat.fabricmanager_problems(580, "", "580.95.05")
    assert "set nvidia_driver_version: 580.95.05" in problem


@pytest.mark.parametrize(("driver", "fm"), [("580.95.05", "580.95.05"), ("580.95.05", ""), ("", "")])
def test_fabricmanager_following_the_driver_passes(driver, fm):
    assert compat.fabricmanager_problems(580, driver, fm) == []


# --------------------------------------------------------------------------
# GPU models against the driver branch


def test_hopper_needs_525():
    gpus = _gpus("h100-sxm5-80gb-x8-driver580.xml")
    (problem,) = compat.gpu_model_problems(520, gpus)  # eight GPUs, one message
    assert "(Hopper) needs driver branch 525 or newer" in problem
    assert compat.gpu_model_problems(525, gpus) == []


def test_blackwell_needs_570():
    b200 = [{"index": 0, "product_name": "NVIDIA B200", "type": "b200", "architecture": "Blackwell"}]
    (problem,) = compat.gpu_model_problems(565, b200)
    assert "NVIDIA B200 (Blackwell) needs driver branch 570 or newer" in problem
    assert compat.gpu_model_problems(570, b200) == []


def test_architecture_from_the_gres_type_when_the_capture_lacks_it():
    old_capture = [{"index": 0, "product_name": "NVIDIA H100 80GB HBM3", "type": "h100", "architecture": None}]
    assert compat.gpu_model_problems(515, old_capture) != []


def test_retired_architecture_is_rejected_on_newer_branches():
    v100 = [{"index": 0, "product_name": "Tesla V100-SXM2-32GB", "type": "v100", "architecture": "Volta"}]
    (problem,) = compat.gpu_model_problems(590, v100)
    assert "supported up to driver branch 580 only" in problem
    assert compat.gpu_model_problems(580, v100) == []


def test_ampere_and_ada_captures_pass_on_the_default_branch():
    assert compat.gpu_model_problems(580, _gpus("a100-sxm4-40gb-x1-nomig-driver570.xml") + _gpus("l40s-x1-driver595.xml")) == []


# --------------------------------------------------------------------------
# power limits against the GPUs' range


def test_power_limit_outside_the_range_is_rejected():
    gpus = _gpus("h100-sxm5-80gb-x8-driver580.xml")
    limits = gpus[0]["power_limits_w"]
    problems = compat.power_limit_problems(limits["max"] + 50, gpus)
    assert len(problems) == len(gpus)
    assert f"outside GPU 0 (NVIDIA H100 80GB HBM3)'s range {limits['min']:g}-{limits['max']:g} W" in problems[0]
    assert compat.power_limit_problems(limits["min"] - 1, gpus) != []


def test_power_limit_within_the_range_or_unmanaged_passes():
    gpus = _gpus("h100-sxm5-80gb-x8-driver580.xml")
    limits = gpus[0]["power_limits_w"]
    assert compat.power_limit_problems((limits["min"] + limits["max"]) / 2, gpus) == []
    assert compat.power_limit_problems(0, gpus) == []


def test_power_limit_on_a_gpu_without_a_range_is_rejected():
    (problem,) = compat.power_limit_problems(300, [{"index": 0, "type": "t4", "power_limits_w": {"min": None, "max": None}}])
    assert "reports no power limit range" in problem


# --------------------------------------------------------------------------
# exact driver version


def test_exact_version_of_another_branch_is_rejected():
    (problem,) = compat.driver_version_problems(580, "570.195.03")
    assert "not in driver branch 580" in problem


def test_exact_version_with_a_debian_revision_is_rejected():
    (problem,) = compat.driver_version_problems(580, "580.95.05-1")
    assert "no Debian revision" in problem


def test_templated_values_are_left_to_ansible():
    assert _check_host_nvidia_vars({"nvidia_driver_branch": "{{ site_branch }}", "cuda_versions": ["13.0"]}) == []
    assert compat.cuda_problems(570, ["{{ site_cuda }}"]) == []


# --------------------------------------------------------------------------
# deepops check: inventory loading runs the checks per host, with role defaults


@pytest.fixture
def real_roles() -> Path:
    return REPO / "roles"


def test_inventory_with_an_unsupported_toolkit_is_rejected(write_inventory, real_roles):
    path = write_inventory(files={"group_vars/slurm_compute.yml": {"nvidia_driver_branch": 570}})
    with pytest.raises(InputError) as error:
        inv.load_cluster(path, roles_dir=real_roles)
    problems = error.value.problems
    assert [(problem.scope, problem.key) for problem in problems] == [("host gpu01", "cuda_versions")]
    assert "CUDA toolkit 13.0 needs driver branch 580" in problems[0].message


def test_inventory_with_a_mismatched_fabricmanager_is_rejected(write_inventory, real_roles):
    path = write_inventory(files={"group_vars/all.yml": {"nvidia_driver_version": "580.95.05", "nvidia_fabricmanager_version": "580.82.07"}})
    with pytest.raises(InputError) as error:
        inv.load_cluster(path, roles_dir=real_roles)
    assert {problem.key for problem in error.value.problems} == {"nvidia_fabricmanager_version"}


def test_inventory_defaults_are_compatible(write_inventory, real_roles):
    assert set(inv.load_cluster(write_inventory(), roles_dir=real_roles).hosts) == {"ctl01", "gpu01", "gpu02"}


def test_inventory_with_the_driver_disabled_is_not_checked(write_inventory, real_roles):
    path = write_inventory(files={"group_vars/all.yml": {"nvidia_driver_enabled": False, "nvidia_driver_branch": 470}})
    inv.load_cluster(path, roles_dir=real_roles)


# --------------------------------------------------------------------------
# the roles' filter plugin is the same table


def test_filter_plugin_uses_the_same_checks():
    filters = nvidia_compat.FilterModule().filters()
    assert filters["nvidia_compat_cuda"](["13.0"], 570) == compat.cuda_problems(570, ["13.0"]) != []
    assert filters["nvidia_compat_cuda"]("13.0", 580) == []
    assert filters["nvidia_compat_fabricmanager"]("580.82.07", 580, "580.95.05") != []
    assert filters["nvidia_compat_gpu_models"](_gpus("h100-sxm5-80gb-x8-driver580.xml"), 520) != []
    assert filters["nvidia_compat_power_limit"](_gpus("h100-sxm5-80gb-x8-driver580.xml"), 5000) != []
    assert filters["nvidia_compat_driver_version"]("570.195.03", 580) != []
