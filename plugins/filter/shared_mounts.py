"""Jinja filters of the shared storage roles (shared_mounts, nfs_server, nfs_client).

``shared_mounts | deepops.cluster.shared_mounts_problems`` -> what is wrong with the list.
``shared_mounts | deepops.cluster.shared_mounts_plan(groups, inventory_hostname)``
-> this host's mounts, every key resolved (module_utils/shared_mounts.py, ``plan``).
``mount | deepops.cluster.shared_mount_unit`` -> the text of one mount unit.
``plan | deepops.cluster.shared_mounts_unit_files`` -> managed_files entries of the mount units.
``plan | deepops.cluster.shared_mounts_dropin_files(services)`` -> the slurmd/sackd drop-ins (RequiresMountsFor=).
``plan | deepops.cluster.shared_mounts_unit_states(registered)`` -> {start: [units], active: [units]}.
``plan | deepops.cluster.shared_mounts_exports(inventory_hostname, clients)`` -> an exports(5) file.
``plan | deepops.cluster.shared_mounts_served_here(inventory_hostname)`` -> the mounts this host exports.
``plan | deepops.cluster.shared_mounts_export_dirs(inventory_hostname)`` -> managed_files entries of the directories to make there.
``plan | deepops.cluster.shared_mounts_missing(inventory_hostname, findmnt_json)`` -> what is not mounted.
``plan | deepops.cluster.shared_mounts_paths`` -> the mount points (RequiresMountsFor=).
``plan | deepops.cluster.shared_mounts_modulefiles`` -> the Lmod directories on them.

The logic lives in ``plugins/module_utils/shared_mounts.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.systemd_units import parse_systemctl_show
from ansible_collections.deepops.cluster.plugins.module_utils import shared_mounts


def _list(value: Any, what: str, name: str) -> list:
    if not isinstance(value, list):
        raise AnsibleFilterError(f"{name} expects {what}, got {type(value).__name__}")
    return value


def shared_mounts_problems(entries: Any) -> list[str]:
    if not isinstance(entries, list):
        return [f"shared_mounts must be a list, found {type(entries).__name__}"]
    wrong = [f"item {index}: expected a dict with a path, found {type(entry).__name__}"
             for index, entry in enumerate(entries, 1) if not isinstance(entry, Mapping)]
    return wrong + shared_mounts.entry_problems(entries)


def shared_mounts_plan(entries: Any, groups: Any, hostname: Any) -> list[dict]:
    problems = shared_mounts_problems(entries)
    if problems:
        raise AnsibleFilterError("shared_mounts: " + "; ".join(problems))
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"shared_mounts_plan expects the groups, got {type(groups).__name__}")
    servers = [str(host) for host in groups.get(shared_mounts.NFS_SERVER_GROUP) or []]
    return shared_mounts.plan(entries, servers, str(hostname))


def shared_mount_unit(mount: Any) -> str:
    if not isinstance(mount, Mapping):
        raise AnsibleFilterError(f"shared_mount_unit expects one mount of the plan, got {type(mount).__name__}")
    return shared_mounts.mount_unit(mount)


def shared_mounts_exports(plan: Any, hostname: Any, clients: Any) -> str:
    try:
        return shared_mounts.exports(_list(plan, "the plan", "shared_mounts_exports"), str(hostname),
                                     [str(client) for client in _list(clients, "a list of clients", "shared_mounts_exports")])
    except ValueError as error:
        raise AnsibleFilterError(f"shared_mounts_exports: {error}") from None


def shared_mounts_unit_files(plan: Any) -> list[dict[str, str]]:
    return shared_mounts.unit_files(_list(plan, "the plan", "shared_mounts_unit_files"))


def shared_mounts_dropin_files(plan: Any, services: Any) -> list[dict[str, str]]:
    return shared_mounts.dropin_files(_list(plan, "the plan", "shared_mounts_dropin_files"),
                                      [str(service) for service in _list(services, "a list of services", "shared_mounts_dropin_files")])


def shared_mounts_unit_states(plan: Any, registered: Any) -> dict[str, list[str]]:
    """REGISTERED: the result of ``systemctl show --property=Id,ActiveState,SubState,UnitFileState UNIT...``."""
    stdout = registered.get("stdout") if isinstance(registered, Mapping) else None
    units = parse_systemctl_show(stdout) if isinstance(stdout, str) else {}
    return shared_mounts.unit_states(_list(plan, "the plan", "shared_mounts_unit_states"), units)


def shared_mounts_served_here(plan: Any, hostname: Any) -> list:
    return shared_mounts.served_here(_list(plan, "the plan", "shared_mounts_served_here"), str(hostname))


def shared_mounts_export_dirs(plan: Any, hostname: Any) -> list[dict[str, str]]:
    return shared_mounts.export_directories(_list(plan, "the plan", "shared_mounts_export_dirs"), str(hostname))


def shared_mounts_missing(plan: Any, hostname: Any, findmnt_json: Any) -> list[str]:
    return shared_mounts.mount_problems(str(hostname), _list(plan, "the plan", "shared_mounts_missing"),
                                        str(findmnt_json or ""))


def shared_mounts_paths(plan: Any) -> list[str]:
    return shared_mounts.ordering_paths(_list(plan, "the plan", "shared_mounts_paths"))


def shared_mounts_modulefiles(plan: Any) -> list[str]:
    return shared_mounts.modulefiles_dirs(_list(plan, "the plan", "shared_mounts_modulefiles"))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "shared_mounts_problems": shared_mounts_problems,
            "shared_mounts_plan": shared_mounts_plan,
            "shared_mount_unit": shared_mount_unit,
            "shared_mounts_exports": shared_mounts_exports,
            "shared_mounts_served_here": shared_mounts_served_here,
            "shared_mounts_unit_files": shared_mounts_unit_files,
            "shared_mounts_dropin_files": shared_mounts_dropin_files,
            "shared_mounts_unit_states": shared_mounts_unit_states,
            "shared_mounts_export_dirs": shared_mounts_export_dirs,
            "shared_mounts_missing": shared_mounts_missing,
            "shared_mounts_paths": shared_mounts_paths,
            "shared_mounts_modulefiles": shared_mounts_modulefiles,
        }
