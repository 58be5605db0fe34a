"""Where deepops finds its Ansible content and keeps its state."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def content_dir() -> Path:
    """Directory holding playbooks/, roles/, plugins/ and ansible.cfg.

    An installed wheel carries them in ``deepops_py/_content``; a checkout (or
    an editable install) has them at the repository root beside the package.
    """
    for candidate in (_PACKAGE_DIR / "_content", _PACKAGE_DIR.parent):
        if (candidate / "playbooks" / "site.yml").is_file():
            return candidate
    raise RuntimeError(f"deepops Ansible content not found next to {_PACKAGE_DIR}; the installation is broken")


def playbook(name: str) -> Path:
    return content_dir() / "playbooks" / name


def state_dir() -> Path:
    """Per-working-directory state (.deepops/): runs, virtual cluster, secrets."""
    return Path(os.environ.get("DEEPOPS_STATE_DIR", ".deepops")).absolute()


def runs_dir() -> Path:
    return state_dir() / "runs"


def virtual_dir() -> Path:
    return state_dir() / "virtual"


def default_config_dir() -> Path:
    return Path("config")
