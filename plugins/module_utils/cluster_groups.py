"""Groups that default to others: the one place the rule is written down.

``slurm_dbd`` and ``monitoring`` default to the FIRST host of
``slurm_controller`` when the inventory leaves them empty (a backup
controller never gets MariaDB, slurmdbd or Prometheus by default).
``slurm_login`` defaults to nothing.

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

# Groups that fall back to the first controller when empty or missing.
DEFAULTS_TO_FIRST_CONTROLLER = (DBD, MONITORING)
# The resolved group every play and role uses, per inventory group.
RESOLVED = {DBD: "deepops_slurm_dbd", MONITORING: "deepops_monitoring"}


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


def resolved_groups(groups: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """The groups ``playbooks/groups.yml`` creates: resolved name -> host names.

    >>> resolved_groups({"slurm_controller": ["ctl01", "ctl02"]})
    {'deepops_slurm_dbd': ['ctl01'], 'deepops_monitoring': ['ctl01']}
    """
    filled = with_defaults(groups)
    return {resolved: filled[name] for name, resolved in RESOLVED.items()}
