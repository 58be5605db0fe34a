"""Jinja filters about the cluster's members: the groups that default to others, and each
member's cluster address.

``hostvars[host] | deepops.cluster.cluster_address`` is the address the other
members reach HOST at (what /etc/hosts maps its name to, and where the
monitoring servers listen): its ``common_hosts_address``, else the default
IPv4 address in its facts, else "" (not reached in this run).
``text | deepops.cluster.hosts_file_addresses`` reads hosts(5) lines back:
``{name: address}``, e.g. from a host's /etc/hosts block, for the members
not reached in this run.

``groups | deepops.cluster.resolved_groups(deepops_removed_nodes)`` gives
``{'deepops_slurm_dbd': [...], 'deepops_monitoring': [...], ...}``, the first
two each the inventory group's hosts or, when it is empty, the first
controller; ``deepops_members`` and ``deepops_slurm_compute`` leave out the
nodes being removed. The rule lives in
``plugins/module_utils/cluster_groups.py``; ``playbooks/groups.yml`` turns the
result into in-memory groups for every later play.

With ``hostvars`` as a second argument after the removed nodes, the result
also holds ``deepops_nvidia_stack`` (the compute members any role of the
NVIDIA stack is switched on for, where the NVIDIA plays run) and
``deepops_mig_managed`` (those whose mig_layout manages MIG, where the MIG
play runs), from each member's host variables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups


def resolved_groups(groups: Any, removed: Any = None, hostvars: Any = None) -> dict[str, list[str]]:
    """Resolved group name -> host names, from Ansible's ``groups`` and the nodes being removed;
    with ``hostvars``, also the compute members the NVIDIA plays and the MIG play run on."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"resolved_groups expects the groups mapping, got {type(groups).__name__}")
    if removed is not None and not isinstance(removed, Sequence):
        raise AnsibleFilterError(f"resolved_groups expects the removed nodes as a list or a string, got {type(removed).__name__}")
    resolved = cluster_groups.resolved_groups(
        {str(name): [str(host) for host in hosts] for name, hosts in groups.items()}, removed
    )
    if hostvars is not None:
        computes = resolved[cluster_groups.COMPUTE_MEMBERS]
        resolved[cluster_groups.NVIDIA_STACK] = nvidia_stack_hosts(computes, hostvars)
        resolved[cluster_groups.MIG_MANAGED] = mig_managed_hosts(computes, hostvars)
    return resolved


def removed_names(removed: Any) -> list[str]:
    """The host names in ``deepops_removed_nodes`` (a list, or comma-separated names), each once."""
    if removed is not None and not isinstance(removed, Sequence):
        raise AnsibleFilterError(f"removed_names expects a list or a string, got {type(removed).__name__}")
    return cluster_groups.removed_names(removed)


def nvidia_stack_hosts(computes: Any, hostvars: Any) -> list[str]:
    """The compute members (a list of names) with any NVIDIA stack role switched on, from their host variables.
    A switch that cannot be resolved yet (a template naming facts gathered later) counts as on: its role
    decides on the host."""
    given = _given("nvidia_stack_hosts", computes, hostvars, cluster_groups.NVIDIA_STACK_SWITCHES)
    switches_on = {
        host: {name: boolean(value, strict=False) for name, value in values.items() if value is not _NOT_KNOWN_YET}
        for host, values in given.items()
    }
    return cluster_groups.nvidia_stack(list(given), switches_on)


def mig_managed_hosts(computes: Any, hostvars: Any) -> list[str]:
    """The compute members (a list of names) whose mig_layout manages MIG, from their host variables.
    A layout that cannot be resolved yet counts as managed: the mig role decides on the host."""
    given = _given("mig_managed_hosts", computes, hostvars, ("mig_layout",))
    layouts = {host: values.get("mig_layout", cluster_groups.MIG_UNMANAGED) for host, values in given.items()}
    return cluster_groups.mig_managed(
        list(given), {host: "not known yet" if layout is _NOT_KNOWN_YET else layout for host, layout in layouts.items()}
    )


# A variable whose template names what is only known later in the run.
_NOT_KNOWN_YET = object()


def _given(filter_name: str, computes: Any, hostvars: Any, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """host -> {name: value} of NAMES given for each of COMPUTES (None counts as not given;
    _NOT_KNOWN_YET where resolving fails), hosts in order."""
    if isinstance(computes, (str, bytes)) or not isinstance(computes, Sequence):
        raise AnsibleFilterError(f"{filter_name} expects a list of host names, got {type(computes).__name__}")
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError(f"{filter_name} expects hostvars, got {type(hostvars).__name__}")
    given: dict[str, dict[str, Any]] = {}
    for host in computes:
        variables = hostvars.get(str(host))
        values = given.setdefault(str(host), {})
        for name in names if variables is not None else ():
            try:
                value = variables.get(name)
            except AnsibleError:
                value = _NOT_KNOWN_YET
            if value is not None:
                values[name] = value
    return given


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


def hosts_file_addresses(text: Any) -> dict[str, str]:
    """{name: address} from hosts(5) lines ("address name [alias...]", # comments); the first line naming one wins."""
    addresses: dict[str, str] = {}
    for line in text.splitlines() if isinstance(text, str) else ():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            addresses.setdefault(name, fields[0])
    return addresses


class FilterModule:
    """Groups that default to others; members' cluster addresses."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {"resolved_groups": resolved_groups, "removed_names": removed_names, "cluster_address": cluster_address,
                "hosts_file_addresses": hosts_file_addresses}
