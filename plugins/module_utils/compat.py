"""Which NVIDIA driver, CUDA toolkit, Fabric Manager and GPU go together.

One table, used twice: by ``deepops check`` (through ``plugin_utils/inventory.py``,
before any host is touched) and by the roles' preflight (through the filter
plugin ``plugins/filter/nvidia_compat.py``, with the GPU facts of each host).
Every check is a plain function that returns a list of messages; an empty list
means the combination is fine.

Sources of the tables:
- ``CUDA_MIN_DRIVER``: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit
  and Corresponding Driver Versions" (Linux x86_64, GA releases),
  https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ . deepops requires
  the toolkit's own minimum driver branch (full compatibility); CUDA's "minor
  version compatibility" (a 12.x toolkit on any >= 525 driver, without PTX JIT
  of newer code) is deliberately not relied on.
- ``ARCH_DRIVER_BRANCHES``: the first driver branch that supports each GPU
  architecture (NVIDIA data-center driver release notes, "Hardware
  Supported"), and the last branch for architectures NVIDIA retired (Kepler
  after 470; Maxwell, Pascal and Volta after 580).
- ``GPU_TYPE_ARCH``: the GRES types of ``plugins/module_utils/nvidia_smi.py``
  mapped to their architecture, for captures without <product_architecture>.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# CUDA toolkit (major.minor) -> first driver branch with full support.
CUDA_MIN_DRIVER: dict[str, int] = {
    "11.0": 450, "11.1": 455, "11.2": 460, "11.3": 465, "11.4": 470, "11.5": 495,
    "11.6": 510, "11.7": 515, "11.8": 520,
    "12.0": 525, "12.1": 530, "12.2": 535, "12.3": 545, "12.4": 550, "12.5": 555,
    "12.6": 560, "12.8": 570, "12.9": 575,
    "13.0": 580,
}

# Architecture -> (first driver branch, last driver branch or None).
ARCH_DRIVER_BRANCHES: dict[str, tuple[int, int | None]] = {
    "Kepler": (0, 470),
    "Maxwell": (0, 580),
    "Pascal": (0, 580),
    "Volta": (384, 580),
    "Turing": (410, None),
    "Ampere": (450, None),
    "Ada Lovelace": (525, None),
    "Hopper": (525, None),
    "Blackwell": (570, None),
}

GPU_TYPE_ARCH: dict[str, str] = {
    **dict.fromkeys(("gb300", "gb200", "b300", "b200", "b100", "rtxpro6000"), "Blackwell"),
    **dict.fromkeys(("gh200", "h200", "h100", "h800", "h20"), "Hopper"),
    **dict.fromkeys(("l40s", "l40", "l20", "l4", "rtx6000ada"), "Ada Lovelace"),
    **dict.fromkeys(("a100", "a800", "a40", "a30", "a16", "a10g", "a10", "a2", "rtxa6000", "rtxa5000", "rtxa4000"),
                    "Ampere"),
    "t4": "Turing",
    **dict.fromkeys(("v100s", "v100"), "Volta"),
    **dict.fromkeys(("p100", "p40"), "Pascal"),
}

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def _branch(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _templated(value: Any) -> bool:
    """A value Ansible still has to template; deepops check cannot judge it."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def driver_version_problems(branch: Any, version: Any) -> list[str]:
    """An exact driver version must be a release of the pinned branch."""
    if _templated(branch) or _templated(version):
        return []
    if _branch(branch) is None:
        return [f"nvidia_driver_branch must be a number like 580, found {branch!r}"]
    if not version:
        return []
    text = str(version)
    if not re.match(r"^\d+\.\d+(\.\d+)?$", text):
        return [f"nvidia_driver_version must look like 580.95.05 (no Debian revision), found {text!r}"]
    if int(text.split(".", maxsplit=1)[0]) != _branch(branch):
        return [f"nvidia_driver_version {text} is not in driver branch {branch} (nvidia_driver_branch)"]
    return []


def cuda_min_driver(cuda_version: str) -> int | None:
    """The first driver branch that fully supports toolkit ``cuda_version`` (12.8, 12.8.1, ...)."""
    match = _VERSION.match(str(cuda_version).strip())
    if not match:
        return None
    return CUDA_MIN_DRIVER.get(f"{int(match.group(1))}.{int(match.group(2))}")


def cuda_problems(branch: Any, cuda_versions: Iterable[Any]) -> list[str]:
    """Every CUDA toolkit version must be supported by the driver branch."""
    driver = _branch(branch)
    if driver is None or _templated(branch):
        return []
    problems = []
    for version in cuda_versions:
        if _templated(version):
            continue
        needed = cuda_min_driver(str(version))
        if needed is None:
            known = ", ".join(CUDA_MIN_DRIVER)
            problems.append(f"CUDA toolkit {version} is not in deepops' compatibility table (known: {known})")
        elif driver < needed:
            problems.append(
                f"CUDA toolkit {version} needs driver branch {needed} or newer, but nvidia_driver_branch is {driver} "
                "(CUDA Toolkit Release Notes, Table 3)"
            )
    return problems


def fabricmanager_problems(branch: Any, driver_version: Any, fabricmanager_version: Any) -> list[str]:
    """Fabric Manager must be exactly the driver's version; empty means 'the driver's'."""
    if not fabricmanager_version or _templated(fabricmanager_version) or _templated(driver_version):
        return []
    fm = str(fabricmanager_version)
    if driver_version:
        if fm != str(driver_version):
            return [f"Fabric Manager {fm} differs from the driver {driver_version}: they must be the same version"]
        return []
    if _branch(branch) is not None and fm.split(".", maxsplit=1)[0] != str(_branch(branch)):
        return [f"Fabric Manager {fm} is not in driver branch {branch}: they must be the same version"]
    if _branch(branch) is not None:
        return [
            f"Fabric Manager {fm} is pinned but the driver is not (nvidia_driver_version is empty): "
            f"set nvidia_driver_version: {fm}, or leave nvidia_fabricmanager_version empty to follow the driver"
        ]
    return []


def gpu_architecture(gpu: Mapping[str, Any]) -> str | None:
    """The architecture of one GPU from its facts (deepops_gpus.gpus[]), or None when unknown."""
    reported = str(gpu.get("architecture") or "").strip()
    for name in ARCH_DRIVER_BRANCHES:
        if reported.lower() == name.lower() or (name == "Ada Lovelace" and reported.lower() == "ada"):
            return name
    return GPU_TYPE_ARCH.get(str(gpu.get("type") or "").lower())


def gpu_model_problems(branch: Any, gpus: Iterable[Mapping[str, Any]]) -> list[str]:
    """The driver branch must support every GPU model present."""
    driver = _branch(branch)
    if driver is None or _templated(branch):
        return []
    problems = []
    seen = set()
    for gpu in gpus:
        arch = gpu_architecture(gpu)
        model = gpu.get("product_name") or gpu.get("type") or "unknown GPU"
        if arch is None or (model, arch) in seen:
            continue
        seen.add((model, arch))
        first, last = ARCH_DRIVER_BRANCHES[arch]
        if driver < first:
            problems.append(f"{model} ({arch}) needs driver branch {first} or newer, but nvidia_driver_branch is {driver}")
        elif last is not None and driver > last:
            problems.append(f"{model} ({arch}) is supported up to driver branch {last} only, but nvidia_driver_branch is {driver}")
    return problems


def power_limit_problems(power_limit_w: Any, gpus: Iterable[Mapping[str, Any]]) -> list[str]:
    """A power limit (0: leave the default) must lie within each GPU's min/max from nvidia-smi."""
    try:
        limit = float(power_limit_w or 0)
    except (TypeError, ValueError):
        return [f"gpu_settings_power_limit_w must be a number of watts, found {power_limit_w!r}"]
    if limit == 0:
        return []
    problems = []
    for gpu in gpus:
        limits = gpu.get("power_limits_w") or {}
        low, high = limits.get("min"), limits.get("max")
        name = f"GPU {gpu.get('index')} ({gpu.get('product_name') or gpu.get('type')})"
        if low is None or high is None:
            problems.append(f"{name} reports no power limit range; it cannot take gpu_settings_power_limit_w {limit:g}")
        elif not low <= limit <= high:
            problems.append(f"gpu_settings_power_limit_w {limit:g} W is outside {name}'s range {low:g}-{high:g} W")
    return problems
