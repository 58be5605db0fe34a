"""Action plugin deepops.cluster.inventory_check: validate the inventory before any host is touched.

Runs on the controller (localhost) in the validation play that starts every
deepops playbook, so ``ansible-playbook`` used directly gets the same checks
as ``deepops check``: it loads each inventory file Ansible was given with the
collection's validator (``plugins/plugin_utils/inventory.py``) and fails with
every problem found. ``deepops`` itself validates before it starts a run and
names the file it checked in ``DEEPOPS_INVENTORY_CHECKED``; that file is not
loaded a second time.

The same task then checks what only the run knows (plugin_utils/run_values.py):
every host's templated or vaulted variable, resolved, and the run's extra
variables, against the roles' argument specs. deepops' playbooks import their
roles with ``rolespec_validate: false`` and rely on this one check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import run_values, schema
from ansible_collections.deepops.cluster.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.deepops.cluster.plugins.plugin_utils.inventory import load_cluster
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import BrokenContent, InvalidInventory

# Set by deepops for the inventory it validated just before starting the run.
CHECKED_ENV = "DEEPOPS_INVENTORY_CHECKED"


class ActionModule(ControllerAction):
    """Fail the task with the rendered problems, or succeed unchanged with counts (it only
    reads, so check mode is the same run)."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result["changed"] = False
        if self._task.args:
            result.update(failed=True, msg=f"inventory_check takes no arguments, got: {', '.join(sorted(self._task.args))}")
            return result
        already_checked = os.environ.get(CHECKED_ENV, "")

        sources = (task_vars or {}).get("ansible_inventory_sources") or []
        if isinstance(sources, str):
            sources = [sources]
        checked: list[dict[str, Any]] = []
        failures: list[str] = []
        for source in sources:
            path = Path(str(source))
            if not path.is_file():
                continue  # 'host1,host2' lists and plugin configs are not deepops inventories
            if already_checked and path.resolve() == Path(already_checked).resolve():
                checked.append({"inventory": str(path), "checked_by": "deepops"})
                continue
            try:
                cluster = load_cluster(path)
            except InvalidInventory as error:
                failures.append(error.render())
                continue
            except BrokenContent as error:
                failures.append(str(error))
                continue
            checked.append({"inventory": str(path), "hosts": len(cluster.hosts), "groups": len(cluster.groups)})

        resolved = 0
        if not failures:
            try:
                resolved, problem = self._check_run_values(task_vars or {})
            except BrokenContent as error:
                resolved, problem = 0, str(error)
            if problem:
                failures.append(problem)

        result["inventories"] = checked
        result["hosts"] = sum(entry.get("hosts", 0) for entry in checked)
        result["groups"] = sum(entry.get("groups", 0) for entry in checked)
        result["resolved"] = resolved
        if failures:
            result.update(failed=True, msg="\n".join(failures))
        elif not checked and not resolved:
            result.update(skipped=True, msg="no inventory file among the inventory sources; nothing to check")
        else:
            described = [_describe(entry) for entry in checked]
            if resolved:
                described.append(f"{resolved} templated, vaulted or extra value{'s' if resolved != 1 else ''} resolved and checked")
            result["msg"] = "; ".join(described)
        return result

    def _check_run_values(self, task_vars: dict[str, Any]) -> tuple[int, str]:
        """(values checked, rendered problems or "") for the values only the run knows."""
        hostvars = task_vars.get("hostvars")
        if hostvars is None or self._templar is None:
            return 0, ""  # not inside a playbook run
        # The run's -e, as Ansible parsed it; the variable manager is the one handle on it.
        manager = getattr(hostvars, "_variable_manager", None)  # noqa: SLF001
        extra_vars = manager.extra_vars if manager is not None else {}
        problems, resolved = run_values.check(hostvars, self._templar, extra_vars, schema.option_specs())
        if not problems:
            return resolved, ""
        count = len(problems)
        error = InvalidInventory(f"Values resolved at the start of the run are invalid ({count} problem{'s' if count != 1 else ''})", problems)
        return resolved, error.render()


def _describe(entry: dict[str, Any]) -> str:
    if "checked_by" in entry:
        return f"{entry['inventory']}: validated by deepops before this run"
    return f"{entry['inventory']}: {entry['hosts']} hosts in {entry['groups']} groups"
