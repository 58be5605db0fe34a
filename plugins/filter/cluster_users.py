"""Jinja filters of the cluster_users role.

``hostvars_list | deepops.cluster.cluster_users_host_problems`` -> every clash
of the hosts' declared users with their local users and groups (each host's
``cluster_users`` against its ``getent`` output, read by the preflight's host_reads).
``cluster_users | deepops.cluster.cluster_users_record(saved_text, passwd_text)``
-> ``{users: [...to record], undeclared: [...]}``.
``cluster_users | deepops.cluster.cluster_users_key_files(home_base[, existing_names])``
-> the ``managed_files`` entries of the users' ~/.ssh and authorized_keys.
``cluster_users | deepops.cluster.cluster_users_homes_here(home_base, shared_mounts_plan, play_hosts, inventory_hostname)``
-> the names of the users whose home this host creates: a home on a shared
mount (``deepops_shared_mounts``, set by the nfs_client role) is made by one host.
``cluster_users | deepops.cluster.cluster_users_home_paths(home_base)`` -> ``{name: home}``.
``cluster_users | deepops.cluster.cluster_users_unsettled(passwd_text, group_text, home_base,
default_shell, homes_here, homes_found)`` -> ``{groups: [...], users: [...]}``: the names
the role's group and user tasks would change (no read, ``none``: all of them).

The logic lives in ``plugins/module_utils/cluster_users.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import cluster_users


def cluster_users_host_problems(hosts: Any) -> list[str]:
    if not isinstance(hosts, list):
        raise AnsibleFilterError(f"cluster_users_host_problems expects a list of hostvars, got {type(hosts).__name__}")
    problems = []
    for variables in hosts:
        if not isinstance(variables, Mapping):
            continue
        problems += cluster_users.host_problems(
            str(variables.get("inventory_hostname")),
            list(variables.get("cluster_users") or []),
            _read_output(variables, "passwd"),
            _read_output(variables, "group"),
        )
    return problems


def _read_output(variables: Mapping, command: str) -> str:
    """A command's output from the common play's first host_reads result (deepops_host_reads)."""
    reads = variables.get("deepops_host_reads") or {}
    return str(((reads.get("commands") or {}).get(command) or {}).get("stdout", ""))


def cluster_users_record(entries: Any, saved: Any, passwd: Any) -> dict[str, list[str]]:
    if not isinstance(entries, list):
        raise AnsibleFilterError(f"cluster_users_record expects the cluster_users list, got {type(entries).__name__}")
    return cluster_users.record(entries, str(saved or ""), str(passwd or ""))


def cluster_users_key_files(entries: Any, base: Any = "/home", existing: Any = None) -> list[dict]:
    if not isinstance(entries, list):
        raise AnsibleFilterError(f"cluster_users_key_files expects the cluster_users list, got {type(entries).__name__}")
    return cluster_users.key_files(entries, str(base), None if existing is None else [str(name) for name in existing])


def cluster_users_homes_here(entries: Any, base: Any, plan: Any, play_hosts: Any, hostname: Any) -> list[str]:
    for value, what in ((entries, "the cluster_users list"), (plan, "the shared_mounts plan"), (play_hosts, "the play's hosts")):
        if not isinstance(value, list):
            raise AnsibleFilterError(f"cluster_users_homes_here expects {what}, got {type(value).__name__}")
    return cluster_users.homes_written_here(entries, str(base), plan, [str(host) for host in play_hosts], str(hostname))


def cluster_users_home_paths(entries: Any, base: Any = "/home") -> dict[str, str]:
    if not isinstance(entries, list):
        raise AnsibleFilterError(f"cluster_users_home_paths expects the cluster_users list, got {type(entries).__name__}")
    return cluster_users.home_paths(entries, str(base))


def cluster_users_unsettled(entries: Any, passwd: Any, group: Any, base: Any, default_shell: Any, homes_here: Any,
                            homes_found: Any = None) -> dict[str, list[str]]:
    for value, what in ((entries, "the cluster_users list"), (homes_here, "the names of the homes made here")):
        if not isinstance(value, list):
            raise AnsibleFilterError(f"cluster_users_unsettled expects {what}, got {type(value).__name__}")
    return cluster_users.unsettled(
        entries, None if passwd is None else str(passwd), None if group is None else str(group), str(base),
        str(default_shell), [str(name) for name in homes_here], homes_found if isinstance(homes_found, Mapping) else None)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"cluster_users_host_problems": cluster_users_host_problems, "cluster_users_record": cluster_users_record,
                "cluster_users_key_files": cluster_users_key_files, "cluster_users_homes_here": cluster_users_homes_here,
                "cluster_users_home_paths": cluster_users_home_paths, "cluster_users_unsettled": cluster_users_unsettled}
