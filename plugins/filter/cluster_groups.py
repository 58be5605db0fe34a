"""Jinja filters about the cluster's members: the groups that default to others, and each
member's cluster address.

``hostvars[host] | deepops.cluster.cluster_address`` is the address the other
members reach HOST at (what /etc/hosts maps its name to, and where the
monitoring servers listen): its ``common_hosts_address``, else the default
IPv4 address in its facts, else "" (not reached in this run).

``groups | deepops.cluster.resolved_groups(deepops_removed_nodes)`` gives
``{'deepops_slurm_dbd': [...], 'deepops_monitoring': [...], ...}``, the first
two each the inventory group's hosts or, when it is empty, the first
controller; ``deepops_members`` and ``deepops_slurm_compute`` leave out the
nodes being removed. The rule lives in
``plugins/module_utils/cluster_groups.py``; ``playbooks/groups.yml`` turns the
result into in-memory groups for every later play.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups


def resolved_groups(groups: Any, removed: Any = None) -> dict[str, list[str]]:
    """Resolved group name -> host names, from Ansible's ``groups`` and the nodes being removed."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"resolved_groups expects the groups mapping, got {type(groups).__name__}")
    if removed is not None and not isinstance(removed, Sequence):
        raise AnsibleFilterError(f"resolved_groups expects the removed nodes as a list or a string, got {type(removed).__name__}")
    return cluster_groups.resolved_groups(
        {str(name): [str(host) for host in hosts] for name, hosts in groups.items()}, removed
    )


def removed_names(removed: Any) -> list[str]:
    """The host names in ``deepops_removed_nodes`` (a list, or comma-separated names), each once."""
    if removed is not None and not isinstance(removed, Sequence):
        raise AnsibleFilterError(f"removed_names expects a list or a string, got {type(removed).__name__}")
    return cluster_groups.removed_names(removed)


def cluster_address(host_vars: Any) -> str:
    """A member's address for the others, from its host variables; "" when unknown."""
    if not isinstance(host_vars, Mapping):
        return ""
    pinned = host_vars.get("common_hosts_address") or ""
    if pinned:
        return str(pinned)
    facts = host_vars.get("ansible_facts") or {}
    default = facts.get("default_ipv4") if isinstance(facts, Mapping) else None
    return str(default.get("address") or "") if isinstance(default, Mapping) else ""


class FilterModule:
    """Groups that default to others; members' cluster addresses."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {"resolved_groups": resolved_groups, "removed_names": removed_names, "cluster_address": cluster_address}
