"""Filters of rolling maintenance (``deepops upgrade``, playbooks/upgrade.yml): thin wrappers.

- ``scontrol_stdout | deepops.cluster.upgrade_node_records`` -> {node: {flags, reason, gpus, partitions}}
- ``records | deepops.cluster.upgrade_node_problems(nodes)`` -> {node: problem}
- ``records | deepops.cluster.upgrade_check_jobs(nodes, reservation, time_limit, job_name)`` -> [{node, gpus, argv}]
- ``loop_results | deepops.cluster.upgrade_job_problems`` -> {node: problem}
- ``stdout | deepops.cluster.upgrade_health_problem(rc)`` -> one node's problem, or ""

The logic lives in ``plugins/module_utils/rolling_upgrade.py`` (pure Python, unit tested).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.deepops.cluster.plugins.module_utils import rolling_upgrade

_FILTERS = {
    "upgrade_node_records": rolling_upgrade.node_records,
    "upgrade_node_problems": rolling_upgrade.node_problems,
    "upgrade_check_jobs": rolling_upgrade.check_jobs,
    "upgrade_job_problems": rolling_upgrade.job_problems,
    "upgrade_health_problem": rolling_upgrade.health_problem,
}


def _wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise AnsibleFilterError(f"{name}: {error}") from error

    return wrapper


class FilterModule:
    """Rolling maintenance's parsers and verdicts."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        """Map filter names to functions."""
        return {name: _wrap(name, function) for name, function in _FILTERS.items()}
