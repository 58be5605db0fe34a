"""Jinja filter ``deepops.cluster.resolved_groups``: the groups that default to others.

``groups | deepops.cluster.resolved_groups`` gives ``{'deepops_slurm_dbd':
[...], 'deepops_monitoring': [...]}``, each the inventory group's hosts or,
when it is empty, the first controller. The rule lives in
``plugins/module_utils/cluster_groups.py``; ``playbooks/groups.yml`` turns the
result into in-memory groups for every later play.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups


def resolved_groups(groups: Any) -> dict[str, list[str]]:
    """Resolved group name -> host names, from Ansible's ``groups``."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"resolved_groups expects the groups mapping, got {type(groups).__name__}")
    return cluster_groups.resolved_groups({str(name): [str(host) for host in hosts] for name, hosts in groups.items()})


class FilterModule:
    """Groups that default to others."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {"resolved_groups": resolved_groups}
