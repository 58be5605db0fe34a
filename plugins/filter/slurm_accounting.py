"""Jinja filters that let the controller skip the accounting module where the
tree read at the start of the run is already as declared (a re-run).

The module (plugins/modules/slurm_accounting.py) reads the tree with three
sacctmgr commands and works out what differs; these filters use the same
commands and the same comparison (plugins/module_utils/slurm_accounting.py),
so the read can join the controller's first read (one module run) and the
module runs only where something is to be done or said:

- ``cluster | deepops.cluster.slurm_accounting_reads`` -> the three reads as
  ``deepops.cluster.host_reads`` commands (``accounting_qos``,
  ``accounting_associations``, ``accounting_users``; each may fail: no
  slurmdbd yet on a fresh cluster).
- ``commands | deepops.cluster.slurm_accounting_settled(cluster, qos,
  accounts, users, default_account, default_qos, prune)`` -> true only where
  all three reads answered and the module would change nothing and warn of
  nothing (no undeclared entries). Any doubt (a failed or missing read, a
  declaration the module would reject) is false, so the module runs and says
  why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils.slurm_accounting import (
    AccountingError,
    changes,
    read_commands,
    wanted_tree,
)

_READ_NAMES = ("accounting_qos", "accounting_associations", "accounting_users")


def slurm_accounting_reads(cluster: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "argv": ["sacctmgr", *argv], "may_fail": True}
        for name, argv in zip(_READ_NAMES, read_commands(str(cluster)))
    ]


def slurm_accounting_settled(
    commands: Any,
    cluster: str,
    qos: Any,
    accounts: Any,
    users: Any,
    default_account: str,
    default_qos: str,
    prune: bool = False,
) -> bool:
    if not isinstance(commands, Mapping):
        return False
    outputs = []
    for name in _READ_NAMES:
        result = commands.get(name)
        if not isinstance(result, Mapping) or result.get("rc") != 0 or not isinstance(result.get("stdout"), str):
            return False
        outputs.append(result["stdout"])
    try:
        wanted = wanted_tree(qos or [], accounts or [], users or [], str(default_account), str(default_qos))
        found = changes(wanted, str(cluster), *outputs, prune=bool(prune))
    except (AccountingError, KeyError, TypeError, ValueError):
        return False
    undeclared = found.get("undeclared") or {}
    return not found["actions"] and not any(undeclared.values())


class FilterModule:
    """deepops Slurm accounting filters."""

    def filters(self) -> dict[str, Any]:
        return {"slurm_accounting_reads": slurm_accounting_reads, "slurm_accounting_settled": slurm_accounting_settled}
