"""Jinja filters of pam_slurm_adopt on compute nodes (roles/slurm/tasks/pam_adopt.yml).

``users | deepops.cluster.pam_adopt_access_lines(groups)`` -> the pam_access
table that lets root, USERS and ``(GROUPS)`` past pam_slurm_adopt and sends
everyone else to it.
``access_file | deepops.cluster.pam_adopt_account_lines(options)`` -> the two
account lines appended to /etc/pam.d/sshd (pam_access, then pam_slurm_adopt
with deepops' arguments and OPTIONS merged over them).

The logic lives in ``plugins/module_utils/pam_slurm_adopt.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import pam_slurm_adopt


def _list(value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnsibleFilterError(f"pam_adopt_access_lines: {what} must be a list, got {type(value).__name__}")
    return value


def pam_adopt_access_lines(users: Any, groups: Any = None) -> list[str]:
    try:
        return pam_slurm_adopt.access_lines(_list(users, "the users"), _list(groups, "the groups"))
    except pam_slurm_adopt.PamAdoptError as error:
        raise AnsibleFilterError(f"pam_adopt_access_lines: {error}") from error


def pam_adopt_account_lines(access_file: Any, options: Any = None) -> list[str]:
    if options is not None and not isinstance(options, Mapping):
        raise AnsibleFilterError(f"pam_adopt_account_lines: the options must be a dict, got {type(options).__name__}")
    try:
        return pam_slurm_adopt.account_lines(access_file, options)
    except pam_slurm_adopt.PamAdoptError as error:
        raise AnsibleFilterError(f"pam_adopt_account_lines: {error}") from error


class FilterModule:
    """pam_slurm_adopt rendering helpers."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {
            "pam_adopt_access_lines": pam_adopt_access_lines,
            "pam_adopt_account_lines": pam_adopt_account_lines,
        }
