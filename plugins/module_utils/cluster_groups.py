"""Groups that default to others: the one place the rule is written down.

``slurm_dbd`` and ``monitoring`` default to the FIRST host of
``slurm_controller`` when the inventory leaves them empty (a backup
controller never gets MariaDB, slurmdbd or Prometheus by default).
``slurm_login`` and ``nfs_server`` default to nothing.

Nodes being removed (``deepops node remove``, the playbook variable
``deepops_removed_nodes``) stay in the inventory for the run, so they can be
reached, but are no longer members of the cluster: ``deepops_slurm_compute``
(the compute nodes Slurm, gres.conf, partitions and Prometheus list) and
``deepops_members`` (every host /etc/hosts and the node targets list) leave
them out. Every role reads those two groups, never ``slurm_compute`` or
``all``, for what it renders about the cluster's members.

The plays never read ``slurm_dbd`` or ``monitoring`` directly: the play in
``playbooks/groups.yml``, imported by every entry playbook right after the
inventory check, creates the resolved groups ``deepops_slurm_dbd`` and
``deepops_monitoring`` from this module (through the filter
``deepops.cluster.resolved_groups``), and every later play and role uses
those. deepops_py uses the same functions for what it shows and targets.

Standard library only: imported by the filter plugin as
``ansible_collections.deepops.cluster.plugins.module_utils.cluster_groups``
and by deepops_py, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CONTROLLER = "slurm_controller"
COMPUTE = "slurm_compute"
LOGIN = "slurm_login"
DBD = "slurm_dbd"
MONITORING = "monitoring"
# Optional, defaults to nothing: the hosts exporting shared_mounts (module_utils/shared_mounts.py).
NFS_SERVER = "nfs_server"

# Groups that fall back to the first controller when empty or missing.
DEFAULTS_TO_FIRST_CONTROLLER = (DBD, MONITORING)
# The resolved group every play and role uses, per inventory group.
RESOLVED = {DBD: "deepops_slurm_dbd", MONITORING: "deepops_monitoring"}
# The members of the cluster, less the nodes being removed.
MEMBERS = "deepops_members"
COMPUTE_MEMBERS = "deepops_slurm_compute"
# The playbook variable naming the nodes being removed (playbooks/remove_node.yml).
REMOVED_VAR = "deepops_removed_nodes"
# The compute members any role of the NVIDIA stack is switched on for: the
# NVIDIA plays (playbooks/components/nvidia.yml) run on these only, so a site
# whose drivers are preinstalled (or the virtual cluster) runs none of their
# tasks. Each switch defaults to on in its role (a unit test checks).
NVIDIA_STACK = "deepops_nvidia_stack"
NVIDIA_STACK_SWITCHES = (
    "nvidia_driver_enabled",
    "nvidia_fabricmanager_enabled",
    "cuda_enabled",
    "nvidia_dcgm_enabled",
    "gpu_settings_enabled",
    "nccl_tests_enabled",
)
# The compute members whose mig_layout manages MIG (anything but "unmanaged",
# the mig role's default, or null): the MIG play (playbooks/components/mig.yml)
# runs on these only.
MIG_MANAGED = "deepops_mig_managed"
MIG_UNMANAGED = "unmanaged"


def _hosts(groups: Mapping[str, Iterable[str]], name: str) -> list[str]:
    return list(dict.fromkeys(groups.get(name) or []))


def with_defaults(groups: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """A copy of ``groups`` (name -> host names) with the defaulting groups filled in.

    Each of ``DEFAULTS_TO_FIRST_CONTROLLER`` keeps its own hosts; when it has
    none it gets the first controller (nothing when there is no controller).
    """
    result = {name: _hosts(groups, name) for name in groups}
    first_controller = _hosts(groups, CONTROLLER)[:1]
    for name in DEFAULTS_TO_FIRST_CONTROLLER:
        result[name] = _hosts(groups, name) or list(first_controller)
    return result


def removed_names(removed: str | Iterable[str] | None) -> list[str]:
    """The names in ``deepops_removed_nodes``: a list, or one string of comma-separated names."""
    if removed is None:
        return []
    items = removed.split(",") if isinstance(removed, str) else removed
    return list(dict.fromkeys(name for name in (str(item).strip() for item in items) if name))


def members(groups: Mapping[str, Iterable[str]], removed: str | Iterable[str] | None = None) -> dict[str, list[str]]:
    """The cluster's members less the REMOVED nodes: ``deepops_members`` (every host) and
    ``deepops_slurm_compute`` (the compute nodes).

    >>> members({"all": ["ctl01", "gpu01", "gpu02"], "slurm_compute": ["gpu01", "gpu02"]}, "gpu02")
    {'deepops_members': ['ctl01', 'gpu01'], 'deepops_slurm_compute': ['gpu01']}
    """
    gone = set(removed_names(removed))
    every = _hosts(groups, "all") or list(dict.fromkeys(host for hosts in groups.values() for host in hosts))
    return {
        MEMBERS: [host for host in every if host not in gone],
        COMPUTE_MEMBERS: [host for host in _hosts(groups, COMPUTE) if host not in gone],
    }


def resolved_groups(
    groups: Mapping[str, Iterable[str]], removed: str | Iterable[str] | None = None
) -> dict[str, list[str]]:
    """The groups ``playbooks/groups.yml`` creates: resolved name -> host names.

    >>> resolved_groups({"slurm_controller": ["ctl01", "ctl02"]})["deepops_slurm_dbd"]
    ['ctl01']
    """
    filled = with_defaults(groups)
    return {**{resolved: filled[name] for name, resolved in RESOLVED.items()}, **members(groups, removed)}


def nvidia_stack(computes: Iterable[str], switches_on: Mapping[str, Mapping[str, bool]]) -> list[str]:
    """The compute members with any NVIDIA stack role switched on, in order.

    ``switches_on`` maps a host to its switches' values (True or False) as
    given for it; a switch not given is on, as in its role's defaults.

    >>> nvidia_stack(["gpu01", "gpu02"], {"gpu01": {name: False for name in NVIDIA_STACK_SWITCHES}})
    ['gpu02']
    """
    return [host for host in dict.fromkeys(computes)
            if any((switches_on.get(host) or {}).get(name, True) for name in NVIDIA_STACK_SWITCHES)]


def mig_managed(computes: Iterable[str], layouts: Mapping[str, object]) -> list[str]:
    """The compute members whose layout (as given for each host; not given is
    unmanaged, the mig role's default) manages MIG, in order.

    >>> mig_managed(["gpu01", "gpu02", "gpu03"], {"gpu01": "all-1g.10gb", "gpu02": "unmanaged", "gpu03": None})
    ['gpu01']
    """
    return [host for host in dict.fromkeys(computes) if layouts.get(host, MIG_UNMANAGED) not in (None, MIG_UNMANAGED)]
