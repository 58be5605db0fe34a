"""Jinja filters over deepops' NVIDIA compatibility table (``plugins/module_utils/compat.py``).

The roles' preflight calls these with the host's variables and GPU facts, so
the table that ``deepops check`` applies is the same one, in one place. Each
filter returns a list of messages; an empty list means the combination is fine.

- ``nvidia_compat_driver_version(version, branch)``
- ``nvidia_compat_cuda(cuda_versions, branch)``
- ``nvidia_compat_fabricmanager(fabricmanager_version, branch, driver_version)``
- ``nvidia_compat_gpu_models(gpus, branch)`` (``deepops_gpus.gpus``)
- ``nvidia_compat_power_limit(gpus, power_limit_w)``
"""

from __future__ import annotations

from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import compat


def _list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return [value]
    return list(value)


def nvidia_compat_driver_version(version: Any, branch: Any) -> list[str]:
    return compat.driver_version_problems(branch, version)


def nvidia_compat_cuda(cuda_versions: Any, branch: Any) -> list[str]:
    return compat.cuda_problems(branch, _list(cuda_versions))


def nvidia_compat_fabricmanager(fabricmanager_version: Any, branch: Any, driver_version: Any = "") -> list[str]:
    return compat.fabricmanager_problems(branch, driver_version, fabricmanager_version)


def nvidia_compat_gpu_models(gpus: Any, branch: Any) -> list[str]:
    return compat.gpu_model_problems(branch, _list(gpus))


def nvidia_compat_power_limit(gpus: Any, power_limit_w: Any) -> list[str]:
    return compat.power_limit_problems(power_limit_w, _list(gpus))


class FilterModule:
    """deepops NVIDIA compatibility filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "nvidia_compat_driver_version": nvidia_compat_driver_version,
            "nvidia_compat_cuda": nvidia_compat_cuda,
            "nvidia_compat_fabricmanager": nvidia_compat_fabricmanager,
            "nvidia_compat_gpu_models": nvidia_compat_gpu_models,
            "nvidia_compat_power_limit": nvidia_compat_power_limit,
        }
