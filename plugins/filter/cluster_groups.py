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

``groups['deepops_slurm_compute'] | deepops.cluster.nvidia_stack_hosts(hostvars)``
gives the compute members any role of the NVIDIA stack is switched on for
(``deepops_nvidia_stack``, where the NVIDIA plays run);
``... | deepops.cluster.mig_managed_hosts(hostvars)`` those whose mig_layout
manages MIG (``deepops_mig_managed``, where the MIG play runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
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


def nvidia_stack_hosts(computes: Any, hostvars: Any) -> list[str]:
    """The compute members (a list of names) with any NVIDIA stack role switched on, from their host variables."""
    if isinstance(computes, (str, bytes)) or not isinstance(computes, Sequence):
        raise AnsibleFilterError(f"nvidia_stack_hosts expects a list of host names, got {type(computes).__name__}")
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError(f"nvidia_stack_hosts expects hostvars, got {type(hostvars).__name__}")
    switches_on = {str(host): _switches(_host_vars(hostvars, host)) for host in computes}
    return cluster_groups.nvidia_stack([str(host) for host in computes], switches_on)


def mig_managed_hosts(computes: Any, hostvars: Any) -> list[str]:
    """The compute members (a list of names) whose mig_layout manages MIG, from their host variables."""
    if isinstance(computes, (str, bytes)) or not isinstance(computes, Sequence):
        raise AnsibleFilterError(f"mig_managed_hosts expects a list of host names, got {type(computes).__name__}")
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError(f"mig_managed_hosts expects hostvars, got {type(hostvars).__name__}")
    layouts: dict[str, Any] = {}
    for host in computes:
        try:
            layout = _host_vars(hostvars, host).get("mig_layout", cluster_groups.MIG_UNMANAGED)
        except AnsibleError:
            layout = "not known yet"  # a template naming later facts: the mig role decides on the host
        layouts[str(host)] = layout
    return cluster_groups.mig_managed([str(host) for host in computes], layouts)


def _host_vars(hostvars: Mapping[str, Any], host: Any) -> Mapping[str, Any]:
    variables = hostvars.get(str(host))
    return {} if variables is None else variables


def _switches(variables: Mapping[str, Any]) -> dict[str, bool]:
    """The NVIDIA stack switches given for a host. One that cannot be resolved yet (a
    template naming facts gathered later) counts as on: its role decides on the host."""
    found = {}
    for name in cluster_groups.NVIDIA_STACK_SWITCHES:
        try:
            value = variables.get(name)
        except AnsibleError:
            continue
        if value is not None:
            found[name] = boolean(value, strict=False)
    return found


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
        return {"resolved_groups": resolved_groups, "removed_names": removed_names, "cluster_address": cluster_address,
                "nvidia_stack_hosts": nvidia_stack_hosts, "mig_managed_hosts": mig_managed_hosts}
