"""Rules for values that argument specs cannot express (a pattern, a minimum),
checked by the inventory check with the types: one table, read for the
inventory, its vars files and every -e value.

Each rule is a function of the value returning messages; a rule for a list
of dicts checks each item. Cross-field rules (a default that must be one of a
list) need a host's merged variables and live in ``host_rules``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import (
    cluster_users,
    mig_profiles,
    pam_slurm_adopt,
    shared_mounts,
    slurm_accounting,
)
from ansible_collections.deepops.cluster.plugins.plugin_utils import yaml_files

# Slurm object names (QOS, accounts, partitions): letters, digits, _ . -,
# and nothing a shell, sacctmgr or slurm.conf would read as syntax.
SLURM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# RFC 1123 labels, as the inventory's host names.
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
# Credentials, if any, percent-encoded: the URL goes into apt.conf between quotes.
_PROXY_URL = re.compile(r"https?://([A-Za-z0-9._~%-]+(:[A-Za-z0-9._~%-]*)?@)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?")

Rule = Callable[[Any], list[str]]

# A release pinned by its archive's checksum, and the GPU architectures a build targets.
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_RELEASE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")
_CUDA_ARCH = re.compile(r"[1-9][0-9]{1,2}[af]?")
# A download URL (a mirror's too); {version} stands for the release.
# An exports(5) client: a host name, address, network or wildcard, without the options' parentheses.
_EXPORT_CLIENT = re.compile(r"[A-Za-z0-9*?.:/@_\[\]-]+")
_ABSOLUTE_PATH = re.compile(r"/[^\s]*")
_DOWNLOAD_URL = re.compile(r"(https?|file)://[A-Za-z0-9._~%!$&'()*+,;=:@/{}?-]+")


def _slurm_name(value: Any, what: str = "name") -> list[str]:
    if isinstance(value, str) and not yaml_files.is_opaque(value) and not SLURM_NAME.fullmatch(value):
        return [f"{what} {value!r} is not a Slurm name: letters, digits, _ . and - only, at most 64"]
    return []


def _at_least(minimum: int) -> Rule:
    def rule(value: Any) -> list[str]:
        if isinstance(value, int) and not isinstance(value, bool) and value < minimum:
            return [f"must be at least {minimum}, found {value}"]
        return []

    return rule


def _each(rule: Rule) -> Rule:
    """A rule for a list: RULE on each item, messages numbered from 1."""
    def check(value: Any) -> list[str]:
        if not isinstance(value, list):
            return []
        return [f"item {index}: {message}" for index, item in enumerate(value, 1) for message in rule(item)]

    return check


def _items(rule: Callable[[Mapping[str, Any]], list[str]]) -> Rule:
    """A rule for a list of dicts: RULE on each dict item."""
    return _each(lambda item: rule(item) if isinstance(item, Mapping) else [])


def _qos(item: Mapping[str, Any]) -> list[str]:
    problems = [] if "name" in item else ["needs a name"]
    problems += _slurm_name(item.get("name"))
    preempt = item.get("preempt") or []
    for name in preempt if isinstance(preempt, list) else [preempt]:
        problems += _slurm_name(name, "preempt")
    priority = item.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool) or priority < 0):
        problems.append(f"priority must be a whole number of at least 0, found {priority!r}")
    return problems


def _names_in(item: Mapping[str, Any], key: str, what: str) -> list[str]:
    value = item.get(key) or []
    return [message for name in (value if isinstance(value, list) else [value]) for message in _slurm_name(name, what)]


def _fairshare(item: Mapping[str, Any]) -> list[str]:
    value = item.get("fairshare")
    if value is None or yaml_files.is_opaque(value) or value == "parent":
        return []
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return []
    return [f"fairshare must be a whole number of at least 0 or 'parent', found {value!r}"]


def _account(item: Mapping[str, Any]) -> list[str]:
    problems = [] if "name" in item else ["needs a name"]
    problems += _slurm_name(item.get("name")) + _names_in(item, "parent", "parent")
    problems += _names_in(item, "qos", "qos") + _names_in(item, "default_qos", "default_qos")
    return problems + _fairshare(item)


def _account_user(item: Mapping[str, Any]) -> list[str]:
    problems = [] if "name" in item else ["needs a name"]
    problems += _slurm_name(item.get("name")) + _names_in(item, "accounts", "account")
    problems += _names_in(item, "default_account", "default_account")
    problems += _names_in(item, "qos", "qos") + _names_in(item, "default_qos", "default_qos")
    return problems + _fairshare(item)


def _pam_adopt(render: Callable[[Any], Any]) -> Rule:
    """A rule from one of pam_slurm_adopt's renderers: what it refuses, the deploy would refuse too."""
    def rule(value: Any) -> list[str]:
        try:
            render(_concrete(value))
        except (pam_slurm_adopt.PamAdoptError, TypeError, AttributeError) as error:
            return [str(error)]
        return []

    return rule


def _partition(item: Mapping[str, Any]) -> list[str]:
    problems = [] if "name" in item else ["needs a name"]
    return problems + _slurm_name(item.get("name"))


def _proxy_url(value: Any) -> list[str]:
    if isinstance(value, str) and value and not _PROXY_URL.fullmatch(value):
        return [f"{value!r} is not a proxy URL such as http://host:3142"]
    return []


def _matching(pattern: re.Pattern[str], what: str) -> Rule:
    def rule(value: Any) -> list[str]:
        if isinstance(value, str) and not pattern.fullmatch(value):
            return [f"{value!r} is not {what}"]
        return []

    return rule


def is_host_name(value: str) -> bool:
    """An RFC 1123 host name (dot-separated labels of at most 63 characters)."""
    return 0 < len(value) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in value.split("."))


def is_host_address(value: str) -> bool:
    """A host name or an IP address: what ssh gets as its target."""
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return is_host_name(value)


def _host_address(value: Any) -> list[str]:
    if isinstance(value, str) and not is_host_address(value):
        return [f"{value!r} is not a host name or an IP address"]
    return []


def _port_range(value: Any) -> list[str]:
    match = re.fullmatch(r"([0-9]{1,5})-([0-9]{1,5})", value) if isinstance(value, str) else None
    if isinstance(value, str) and not (match and 1024 <= int(match[1]) <= int(match[2]) <= 65535):
        return [f"{value!r} is not a port range FIRST-LAST within 1024-65535"]
    return []


def _listen_address(value: Any) -> list[str]:
    """slurmrestd's listen forms: "unix:/absolute/path" or "host:port" (22.05 refuses ":port")."""
    if not isinstance(value, str) or yaml_files.is_opaque(value):
        return []
    if value.startswith("unix:"):
        path = value[len("unix:"):]
        if path.startswith("/") and not re.search(r"\s", path):
            return []
        return [f"{value!r}: a socket is unix:/absolute/path"]
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if sep and port.isdigit() and 1 <= int(port) <= 65535 and is_host_address(host):
        return []
    return [f"{value!r} is not host:port (port 1-65535; 0.0.0.0 for every interface) or unix:/path"]


def _mig_layout(value: Any) -> list[str]:
    """The layout's form (named layout, or GPU index/all -> profiles); the model is checked per host."""
    return mig_profiles.shape_problems(_concrete(value))


def _concrete(value: Any) -> Any:
    """VALUE with the parts only known at run time (templates, vaulted data) left out."""
    if isinstance(value, Mapping):
        return {key: _concrete(item) for key, item in value.items() if not yaml_files.is_opaque(item)}
    if isinstance(value, list):
        return [_concrete(item) for item in value if not yaml_files.is_opaque(item)]
    return value


def _shared_mounts(value: Any) -> list[str]:
    """The entries' paths, types and options (module_utils/shared_mounts.py), and each server's name."""
    value = _concrete(value)
    problems = shared_mounts.entry_problems(value)
    for index, entry in enumerate(value if isinstance(value, list) else [], 1):
        server = entry.get("server") if isinstance(entry, Mapping) else None
        if isinstance(server, str) and server and not is_host_address(server):
            problems.append(f"item {index} ({entry.get('path')}): server {server!r} is not a host name or an IP address")
    return problems


RULES: dict[str, Rule] = {
    "slurm_realmemory_reserve_mb": _at_least(0),
    "slurm_qos": _items(_qos),
    "slurm_partitions": _items(_partition),
    "slurm_node_features": _each(lambda value: _slurm_name(value, "feature")),
    "slurm_over_time_limit_minutes": _at_least(0),
    "slurm_min_job_age_seconds": _at_least(0),
    "slurm_default_qos": _slurm_name,
    "slurm_default_account": _slurm_name,
    "slurm_accounts": _items(_account),
    "slurm_account_users": _items(_account_user),
    "slurm_srun_port_range": _port_range,
    "slurm_restd_listen": _each(_listen_address),
    "slurm_pam_adopt_allowed_users": _each(_pam_adopt(lambda name: pam_slurm_adopt.access_lines([name]))),
    "slurm_pam_adopt_allowed_groups": _each(_pam_adopt(lambda name: pam_slurm_adopt.access_lines([], [name]))),
    "slurm_pam_adopt_options": _pam_adopt(lambda options: pam_slurm_adopt.module_options(options) if isinstance(options, Mapping) else None),
    "cluster_users": lambda value: cluster_users.entry_problems(_concrete(value)),
    "shared_mounts": _shared_mounts,
    "nfs_server_clients": _each(_matching(_EXPORT_CLIENT, "an exports(5) client (a host, network or wildcard)")),
    "nfs_server_threads": _at_least(1),
    "nfs_client_lmod_modulespath_file": _matching(_ABSOLUTE_PATH, "an absolute path"),
    "common_apt_proxy": _proxy_url,
    "ansible_host": _host_address,
    "mig_layout": _mig_layout,
    "mig_drain_timeout": _at_least(0),
    "nccl_tests_version": _matching(_RELEASE, "a release such as 2.13.6"),
    "nccl_tests_sha256": _matching(_SHA256, "a sha256 checksum (64 hexadecimal digits)"),
    "nccl_tests_url": _matching(_DOWNLOAD_URL, "an http(s) or file URL"),
    "nccl_tests_cuda_archs": _each(_matching(_CUDA_ARCH, "a compute capability without the dot, such as 90")),
}


def check(name: str, value: Any) -> list[str]:
    """Messages for VALUE of the variable NAME (empty when it passes, has no
    rule, or is known only at run time: a template, a vaulted value)."""
    rule = RULES.get(name)
    return rule(value) if rule and not yaml_files.is_opaque(value) else []


def host_rules(variables: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for rules between a host's merged variables."""
    problems = []
    qos = variables.get("slurm_qos")
    default = variables.get("slurm_default_qos")
    if isinstance(qos, list) and isinstance(default, str) and not yaml_files.is_opaque(default):
        names = [item.get("name") for item in qos if isinstance(item, Mapping)]
        if default not in names:
            problems.append(("slurm_default_qos", f"{default!r} is not one of slurm_qos ({', '.join(map(str, names)) or 'none'})"))
    problems.extend(_accounting_tree(variables))
    problems.extend(("mig_layout", message) for message in _mig_layout_for_host(variables))
    return problems


def _accounting_tree(variables: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The accounting tree as a whole (slurm_accounting's own consistency check):
    parents declared or root, no cycles, users' accounts declared and their
    default among them, QOS from slurm_qos. Left to run time when any part is
    a template; entries without a name were reported where they are defined."""
    names = ("slurm_qos", "slurm_accounts", "slurm_account_users", "slurm_default_account", "slurm_default_qos")
    values = [variables.get(name) for name in names]
    if any(value is None or yaml_files.is_opaque(value) or _concrete(value) != value for value in values):
        return []
    qos, accounts, users, default_account, default_qos = values
    if not all(isinstance(value, list) for value in (qos, accounts, users)):
        return []
    named = [[item for item in value if isinstance(item, Mapping) and "name" in item] for value in (qos, accounts, users)]
    try:
        slurm_accounting.wanted_tree(*named, str(default_account), str(default_qos))
    except slurm_accounting.AccountingError as error:
        return [("slurm_account_users" if problem.startswith("user ") else "slurm_accounts", problem)
                for problem in error.problems]
    return []


def _mig_layout_for_host(variables: Mapping[str, Any]) -> list[str]:
    """mig_layout against the MIG tables of the host's slurm_gpu_type (every table when it is empty).

    Only what the inventory shows: the GPU count is not known before the
    hosts are, so GPU indexes are not range-checked here, and a type that
    may be one of two models (a100: 40 or 80GB) passes a layout either
    fits. A layout that is (partly) a template is left to run time, and one
    of the wrong form was already reported where it is defined.
    """
    layout = variables.get("mig_layout")
    gpu_type = variables.get("slurm_gpu_type")
    if _concrete(layout) != layout or yaml_files.is_opaque(layout) or mig_profiles.shape_problems(layout):
        return []
    if not isinstance(gpu_type, str) or yaml_files.is_opaque(gpu_type):
        gpu_type = None
    return mig_profiles.offline_problems(layout, gpu_type or None)
