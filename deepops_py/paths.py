"""Where deepops finds its Ansible content and keeps its state."""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path

from deepops_py.errors import InputError

COLLECTION = "deepops.cluster"


@cache
def content_dir() -> Path:
    """The collection deepops.cluster: playbooks/, roles/, plugins/ and ansible.cfg.

    An editable install finds it through the checkout's collections/ directory
    (a symlink to the checkout), a wheel as site-packages/ansible_collections/
    deepops/cluster; Python's own import system says which (see hatch_build.py).
    """
    spec = importlib.util.find_spec(f"ansible_collections.{COLLECTION}")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location).resolve()
        if (candidate / "playbooks" / "site.yml").is_file():
            return candidate
    raise RuntimeError(f"the Ansible collection {COLLECTION} is not importable; the deepops installation is broken")


def playbook(name: str) -> Path:
    return content_dir() / "playbooks" / name


def role_default(role: str, name: str):
    """A public variable's default, from ROLE's defaults/main.yml (the one place it is set)."""
    import yaml

    return (yaml.safe_load((content_dir() / "roles" / role / "defaults" / "main.yml").read_text()) or {})[name]


def state_dir() -> Path:
    """Per-working-directory state (.deepops/): runs, virtual cluster, secrets."""
    path = Path(os.environ.get("DEEPOPS_STATE_DIR", ".deepops")).absolute()
    if path.exists() and not path.is_dir():
        raise InputError(f"{_state_dir_origin()} {path} is not a directory")
    return path


def make_dir(path: Path) -> Path:
    """Create PATH, a directory under the state directory, with its parents.

    Failing here means the state directory is not one deepops can write to
    (DEEPOPS_STATE_DIR at a file's child, under /proc, read-only): say so.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"cannot create {path} ({error.strerror}); {_state_dir_origin()} must be a directory deepops can write to"
        ) from None
    return path


def _state_dir_origin() -> str:
    return "DEEPOPS_STATE_DIR" if "DEEPOPS_STATE_DIR" in os.environ else "the state directory"


def runs_dir() -> Path:
    return state_dir() / "runs"


def virtual_dir() -> Path:
    return state_dir() / "virtual"


def default_config_dir() -> Path:
    return Path("config")
