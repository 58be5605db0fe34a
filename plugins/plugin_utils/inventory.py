"""The deepops inventory model and its validation, shared by the CLI and the playbooks.

``load_cluster`` reads every file itself first (so broken YAML is reported
with a line number and each variable is checked once, where it is defined),
then lets Ansible's own ``InventoryManager`` build hosts and groups, so that
membership and variable precedence are exactly Ansible's. Every problem is
collected and raised together as one ``InvalidInventory``.

Callers: the deepops command line before every command,
and the action plugin ``deepops.cluster.inventory_check`` when a playbook is
run with ansible-playbook directly.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups, compat, shared_mounts
from ansible_collections.deepops.cluster.plugins.module_utils.cluster_groups import (
    COMPUTE,
    CONTROLLER,
    DBD,
    LOGIN,
    MONITORING,
    NFS_SERVER,
)
from ansible_collections.deepops.cluster.plugins.plugin_utils import inventory_files, schema, suggest, value_rules, yaml_files
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import InvalidInventory, Problem

KNOWN_GROUPS = (CONTROLLER, COMPUTE, LOGIN, DBD, MONITORING, NFS_SERVER)
IMPLICIT_GROUPS = ("all", "ungrouped")
# A host may not sit in both groups of a pair: each role assumes the host is its own.
EXCLUSIVE_GROUPS = ((CONTROLLER, COMPUTE), (LOGIN, COMPUTE))


@dataclass(frozen=True)
class Host:
    """One machine: its groups, how to reach it, and its inventory variables."""

    name: str
    groups: tuple[str, ...]
    address: str
    port: int = 22
    user: str | None = None
    private_key: str | None = None
    become: bool = False
    ssh_common_args: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Cluster:
    """A validated inventory.

    ``groups`` maps each non-empty group (deepops groups and site groups below
    them) to its host names, with slurm_dbd and monitoring defaulted to the
    first controller when the inventory leaves them empty (module_utils/cluster_groups.py).
    """

    inventory: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]


# --------------------------------------------------------------------------
# loading and validating


def load_cluster(path: Path, *, roles_dir: Path | None = None) -> Cluster:
    """Load the inventory file ``path`` with Ansible and validate it, or raise InvalidInventory listing every problem.

    ``roles_dir`` overrides where the roles' argument specs are read from.
    """
    path = Path(path)
    read = inventory_files.read(path)
    problems = list(read.problems)
    if read.data is None or problems:
        # Broken files or structure: Ansible would only guess, so stop here.
        raise _invalid(path, problems)
    manager, parse_problem = _ansible_inventory(path, read.host_patterns)
    if parse_problem:
        raise _invalid(path, [parse_problem])
    known = schema.known_variables(roles_dir)
    problems.extend(_check_groups(path, manager))
    problems.extend(_check_hostnames(path, manager))
    problems.extend(_check_vars_file_targets(read, manager))
    problems.extend(_check_definitions(read.definitions, known))
    if problems:
        raise _invalid(path, problems)
    cluster = _build_cluster(path, manager, read)
    problems.extend(_check_nvidia_compat(cluster, known))
    problems.extend(_check_host_rules(cluster, known))
    problems.extend(_check_shared_mounts(cluster))
    if problems:
        raise _invalid(path, problems)
    return cluster


def _invalid(path: Path, problems: list[Problem]) -> InvalidInventory:
    count = len(problems)
    return InvalidInventory(f"Inventory {path} is invalid ({count} problem{'s' if count != 1 else ''})", problems)


def _ansible_inventory(path: Path, host_patterns: list[str]) -> tuple[Any, Problem | None]:
    """Hosts and groups as Ansible sees them, through its YAML inventory plugin.

    The plugin is called directly (not through every enabled plugin in turn)
    so that a failure comes back as an error rather than a warning, and no
    other plugin gets to reinterpret a YAML file as INI.
    """
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import inventory_loader

    _init_plugin_loader()
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)], parse=False)
    plugin = inventory_loader.get("ansible.builtin.yaml")
    data = manager._inventory  # noqa: SLF001 - the one documented-by-use handle on InventoryData
    data.current_source = str(path)  # sets inventory_file/inventory_dir on hosts, as parse_source does
    try:
        # Ansible's warnings here (e.g. about group names) repeat what deepops
        # reports itself, with advice ("use -vvvv") that does not apply.
        with contextlib.redirect_stderr(io.StringIO()):
            plugin.parse(_trusting_wrapper(data, plugin, path), loader, str(path), cache=False)
            data.reconcile_inventory()
    except Exception as error:  # noqa: BLE001 - any plugin failure is bad input, never a traceback
        message = error.message if isinstance(error, AnsibleError) else str(error)
        return manager, _bad_host_pattern(plugin, path, host_patterns) or Problem(
            str(path), "", "", f"Ansible cannot parse it: {_first_line(message) or type(error).__name__}"
        )
    finally:
        data.current_source = None
    data.processed_sources.append(str(path))
    return manager, None


def _bad_host_pattern(plugin: Any, path: Path, host_patterns: list[str]) -> Problem | None:
    """Name the host pattern Ansible choked on; its own message does not."""
    for pattern in host_patterns:
        try:
            plugin._expand_hostpattern(pattern)  # noqa: SLF001 - what the YAML plugin itself calls
        except Exception as error:  # noqa: BLE001
            reason = _first_line(getattr(error, "message", None) or str(error))
            return Problem(
                str(path), f"host {pattern}", "",
                f"invalid host pattern ({reason}); ranges look like gpu[01:16], a port like ctl01:2222",
            )
    return None


def _init_plugin_loader() -> None:
    """Configure Ansible's plugin and collection loaders once per process.

    ansible-playbook does this itself (the action plugin runs there), so only
    a process that has not done it yet (the deepops command line, tests) does
    it here.
    """
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()
        _adopt_imported_collection_packages()


def _adopt_imported_collection_packages() -> None:
    """Let Ansible's collection finder own the collection's packages from now on.

    A process that imported this collection's code before Ansible's finder
    existed holds package modules without the collection metadata the finder
    expects, and the finder then refuses to load the collection's plugins.
    Forgetting those package modules makes the finder import them again, with
    their metadata; the code modules already imported stay as they are.
    """
    prefix = __name__.split(".plugins.", 1)[0]  # ansible_collections.<namespace>.<name>
    stale = [
        name
        for name, module in list(sys.modules.items())
        if (name == prefix or name.startswith(prefix + ".") or prefix.startswith(name + "."))
        and hasattr(module, "__path__")
        and getattr(module, "__loader__", None).__class__.__module__.split(".")[0] != "ansible"
    ]
    for name in stale:
        del sys.modules[name]


def _trusting_wrapper(data: Any, plugin: Any, path: Path) -> Any:
    """Wrap InventoryData the way InventoryManager.parse_source does (ansible-core 2.19+)."""
    try:
        from ansible._internal._datatag._tags import Origin
        from ansible.inventory.manager import _InventoryDataWrapper
    except ImportError:
        return data
    origin = Origin(description=f"<inventory plugin 'yaml' with source {str(path)!r}>")
    return _InventoryDataWrapper(data, target_plugin=plugin, origin=origin)


def _first_line(message: str) -> str:
    return str(message).strip().splitlines()[0] if str(message).strip() else ""


def _group_hosts(manager: Any, name: str) -> list[str]:
    group = manager.groups.get(name)
    return [host.name for host in group.get_hosts()] if group is not None else []


def _check_groups(path: Path, manager: Any) -> list[Problem]:
    file = str(path)
    problems = []
    for name, group in sorted(manager.groups.items()):
        if name in KNOWN_GROUPS or name in IMPLICIT_GROUPS:
            continue
        scope = f"group {name}"
        if not name.isidentifier():
            match = suggest.closest(name, KNOWN_GROUPS)
            fixed = match or re.sub(r"\W", "_", name)
            problems.append(Problem(file, scope, "", f"invalid group name '{name}': group names use underscores: did you mean {fixed}?"))
        elif not any(ancestor.name in KNOWN_GROUPS for ancestor in group.get_ancestors()):
            hint = suggest.did_you_mean(name, KNOWN_GROUPS) or (
                f" (deepops groups are {', '.join(KNOWN_GROUPS)}; put site groups under one of them, "
                f"e.g. as children of {COMPUTE})"
            )
            problems.append(Problem(file, scope, "", f"unknown group '{name}'{hint}"))

    controllers = _group_hosts(manager, CONTROLLER)
    if not controllers:
        problems.append(Problem(file, f"group {CONTROLLER}", "", f"no controller: put one host (two for a backup controller) in {CONTROLLER}"))
    elif len(controllers) > 2:
        problems.append(
            Problem(file, f"group {CONTROLLER}", "", f"{len(controllers)} controllers ({', '.join(controllers)}): expected 1, or 2 for a backup controller")
        )
    if COMPUTE not in manager.groups:
        problems.append(Problem(file, f"group {COMPUTE}", "", f"missing group {COMPUTE}: list the GPU nodes under it"))
    elif not _group_hosts(manager, COMPUTE):
        problems.append(Problem(file, f"group {COMPUTE}", "", f"{COMPUTE} has no hosts: list the GPU nodes under it"))
    dbd_hosts = _group_hosts(manager, DBD)
    if len(dbd_hosts) > 2:
        problems.append(Problem(file, f"group {DBD}", "", f"{len(dbd_hosts)} hosts ({', '.join(dbd_hosts)}): expected at most 2"))

    for first, second in EXCLUSIVE_GROUPS:
        in_both = set(_group_hosts(manager, first)) & set(_group_hosts(manager, second))
        for host in sorted(in_both):
            problems.append(Problem(file, f"host {host}", "", f"is in both {first} and {second}; a host can be only one of them"))

    for host in manager.hosts.values():
        if {group.name for group in host.get_groups()} <= set(IMPLICIT_GROUPS):
            problems.append(Problem(file, f"host {host.name}", "", f"is in no deepops group ({', '.join(KNOWN_GROUPS)})"))
    return problems


def _check_hostnames(path: Path, manager: Any) -> list[Problem]:
    problems = []
    for name in manager.hosts:
        if not is_valid_hostname(name):
            problems.append(
                Problem(str(path), f"host {name}", "", "invalid host name: use letters, digits and hyphens, in dot-separated labels of at most 63 characters")
            )
    # DNS, /etc/hosts and Slurm's NodeName do not tell GPU01 from gpu01.
    first_of: dict[str, str] = {}
    for name in sorted(manager.hosts):
        other = first_of.setdefault(name.lower(), name)
        if other != name:
            problems.append(Problem(str(path), f"host {name}", "", f"differs from host {other} only in case; host names are not case-sensitive"))
    return problems


# RFC 1123 host name: Slurm NodeNames and /etc/hosts entries need one.
is_valid_hostname = value_rules.is_host_name


def _check_vars_file_targets(read: inventory_files.InventoryFiles, manager: Any) -> list[Problem]:
    """group_vars/host_vars files for names the inventory lacks are silently unused by Ansible."""
    problems = []
    for name, entry in read.group_vars.items():
        if name in manager.groups or name in KNOWN_GROUPS:
            continue
        hint = suggest.did_you_mean(name, [*manager.groups, *KNOWN_GROUPS])
        for file in entry.files or [read.path.parent / "group_vars" / name]:
            problems.append(Problem(str(file), f"group {name}", "", f"no group '{name}' in the inventory, so Ansible ignores this file{hint}"))
    for name, entry in read.host_vars.items():
        if name in manager.hosts:
            continue
        hint = suggest.did_you_mean(name, manager.hosts)
        for file in entry.files or [read.path.parent / "host_vars" / name]:
            problems.append(Problem(str(file), f"host {name}", "", f"no host '{name}' in the inventory, so Ansible ignores this file{hint}"))
    return problems


def _check_definitions(definitions: list[inventory_files.Definition], known: Mapping[str, schema.VarSpec]) -> list[Problem]:
    problems = []
    for definition in definitions:
        try:
            found = schema.check_variables(definition.variables, known)
        except RecursionError:
            found = [("", "values nest too deeply (a recursive YAML alias?)")]
        problems.extend(Problem(definition.file, definition.scope, key, message) for key, message in found)
    return problems


# --------------------------------------------------------------------------
# the model


def _build_cluster(path: Path, manager: Any, read: inventory_files.InventoryFiles) -> Cluster:
    from ansible.inventory.helpers import sort_groups

    all_group = manager.groups["all"]
    group_file_vars = {name: entry.merged for name, entry in read.group_vars.items()}
    inline_group_vars = {name: group.get_vars() for name, group in manager.groups.items()}
    hosts = {}
    for name, ansible_host in manager.hosts.items():
        groups = sort_groups([group for group in ansible_host.get_groups() if group.name != "all"])
        # VariableManager.get_vars' inventory precedence, without its per-host cost:
        # all (inline, file), groups by depth (inline, then files), host (inline, file).
        merged: dict[str, Any] = {}
        merged.update(inline_group_vars["all"])
        merged.update(group_file_vars.get(all_group.name, {}))
        for group in groups:
            merged.update(inline_group_vars[group.name])
        for group in groups:
            merged.update(group_file_vars.get(group.name, {}))
        merged.update(ansible_host.get_vars())
        host_file = read.host_vars.get(name)
        if host_file is not None:
            merged.update(host_file.merged)
        hosts[name] = _host(name, tuple(group.name for group in groups if group.name != "ungrouped"), merged)
    return Cluster(inventory=path, hosts=hosts, groups=_effective_groups(manager))


def _host(name: str, groups: tuple[str, ...], merged: dict[str, Any]) -> Host:
    def text(*keys: str) -> str | None:
        for key in keys:
            value = merged.get(key)
            if value is None or isinstance(value, (dict, list)):
                continue
            try:
                return str(value)
            except Exception:  # noqa: BLE001 - e.g. a vaulted value without the vault password
                continue
        return None

    port = text("ansible_port", "ansible_ssh_port")
    become = merged.get("ansible_become", False)
    return Host(
        name=name,
        groups=groups,
        address=text("ansible_host", "ansible_ssh_host") or name,
        port=int(port) if port and port.isdigit() else 22,
        user=text("ansible_user", "ansible_ssh_user"),
        private_key=text("ansible_ssh_private_key_file", "ansible_private_key_file"),
        become=become is True or str(become).lower() in ("yes", "true", "1", "on"),
        ssh_common_args=text("ansible_ssh_common_args"),
        vars=merged,
    )


def _effective_groups(manager: Any) -> dict[str, list[str]]:
    groups = {}
    for name in sorted(manager.groups):
        if name in IMPLICIT_GROUPS:
            continue
        members = _group_hosts(manager, name)
        if members:
            groups[name] = members
    return cluster_groups.with_defaults(groups)


# --------------------------------------------------------------------------
# the NVIDIA compatibility table, per host, from the inventory alone (no facts yet)

# Variables these checks read, with the role that defines each default.
CHECKED_VARIABLES = (
    "nvidia_driver_enabled", "nvidia_driver_branch", "nvidia_driver_version",
    "cuda_enabled", "cuda_versions", "nvidia_fabricmanager_enabled", "nvidia_fabricmanager_version",
)


def _check_host_nvidia_vars(variables: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) pairs for one host's merged variables (role defaults filled in)."""
    branch = variables.get("nvidia_driver_branch")
    if not variables.get("nvidia_driver_enabled", True) or branch is None:
        return []  # driver left alone, or no nvidia_driver role to read a branch from
    version = variables.get("nvidia_driver_version") or ""
    found = [("nvidia_driver_version", message) for message in compat.driver_version_problems(branch, version)]
    if variables.get("cuda_enabled", True):
        cuda_versions = variables.get("cuda_versions") or []
        if isinstance(cuda_versions, list):
            found += [("cuda_versions", message) for message in compat.cuda_problems(branch, cuda_versions)]
    if variables.get("nvidia_fabricmanager_enabled", True):
        found += [
            ("nvidia_fabricmanager_version", message)
            for message in compat.fabricmanager_problems(branch, version, variables.get("nvidia_fabricmanager_version"))
        ]
    return found


def _check_host_rules(cluster: Cluster, known: Mapping[str, Any]) -> list[Problem]:
    """value_rules.host_rules on every host's variables over the roles' defaults; a
    group-wide problem is reported once, at its first host."""
    defaults = {name: spec.default for name, spec in known.items() if spec.default is not None}
    return _once_per_problem(cluster, (
        (name, found) for name, host in sorted(cluster.hosts.items())
        for found in value_rules.host_rules({**defaults, **host.vars})
    ))


def _once_per_problem(cluster: Cluster, found: Iterable[tuple[str, tuple[str, str]]]) -> list[Problem]:
    """Problems from (host, (key, message)) pairs in host order: a problem that a
    group's variables cause on many hosts is reported once, at its first host."""
    problems = []
    seen: set[tuple[str, str]] = set()
    for name, (key, message) in found:
        if (key, message) not in seen:
            seen.add((key, message))
            problems.append(Problem(str(cluster.inventory), f"host {name}", key, message))
    return problems


def _check_shared_mounts(cluster: Cluster) -> list[Problem]:
    """shared_mounts as an inventory sets it, against the groups: a managed entry needs a server
    (its own, or a host in nfs_server), and a server that is an inventory host must be in
    nfs_server. The role default is not checked: without an nfs_server host it declares nothing."""
    servers = cluster.groups.get(NFS_SERVER, [])
    return _once_per_problem(cluster, (
        (name, ("shared_mounts", message)) for name, host in sorted(cluster.hosts.items())
        if "shared_mounts" in host.vars and not yaml_files.is_opaque(host.vars["shared_mounts"])
        for message in shared_mounts.inventory_problems(host.vars["shared_mounts"], servers, cluster.hosts)
    ))


def _check_nvidia_compat(cluster: Cluster, known: Mapping[str, Any]) -> list[Problem]:
    """Problems for every host of a loaded cluster; ``known`` is schema.known_variables() (for defaults)."""
    defaults = {name: getattr(known.get(name), "default", None) for name in CHECKED_VARIABLES if name in known}
    # The NVIDIA roles run on the GPU nodes only (playbooks/components/nvidia.yml).
    computes = [(name, host) for name, host in sorted(cluster.hosts.items()) if COMPUTE in host.groups]
    return _once_per_problem(cluster, (
        (name, found) for name, host in computes
        for found in _check_host_nvidia_vars({**defaults, **{key: host.vars[key] for key in CHECKED_VARIABLES if key in host.vars}})
    ))
