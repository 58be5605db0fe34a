"""Jinja filters over deepops' NVIDIA compatibility table (``deepops_py/compat.py``).

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

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError

_MODULE_NAME = "deepops_py.compat"


def _compat() -> ModuleType:
    """deepops_py.compat from the installed package, else by path from the checkout or wheel beside this plugin."""
    try:
        from deepops_py import compat
    except ImportError:
        pass
    else:
        return compat
    if _MODULE_NAME in sys.modules:
        return sys.modules[_MODULE_NAME]
    here = Path(__file__).resolve().parent.parent.parent
    for path in (here / "deepops_py" / "compat.py", here.parent / "compat.py"):
        if path.is_file():
            spec = importlib.util.spec_from_file_location(_MODULE_NAME, path)
            if spec is None or spec.loader is None:
                break
            module = importlib.util.module_from_spec(spec)
            sys.modules[_MODULE_NAME] = module
            spec.loader.exec_module(module)
            return module
    raise AnsibleFilterError("cannot find deepops_py/compat.py: run Ansible from the deepops virtualenv")


def _list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return [value]
    return list(value)


def nvidia_compat_driver_version(version: Any, branch: Any) -> list[str]:
    return _compat().driver_version_problems(branch, version)


def nvidia_compat_cuda(cuda_versions: Any, branch: Any) -> list[str]:
    return _compat().cuda_problems(branch, _list(cuda_versions))


def nvidia_compat_fabricmanager(fabricmanager_version: Any, branch: Any, driver_version: Any = "") -> list[str]:
    return _compat().fabricmanager_problems(branch, driver_version, fabricmanager_version)


def nvidia_compat_gpu_models(gpus: Any, branch: Any) -> list[str]:
    return _compat().gpu_model_problems(branch, _list(gpus))


def nvidia_compat_power_limit(gpus: Any, power_limit_w: Any) -> list[str]:
    return _compat().power_limit_problems(power_limit_w, _list(gpus))


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
