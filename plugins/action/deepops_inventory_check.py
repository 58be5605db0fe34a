"""Action plugin deepops_inventory_check: validate the inventory before any host is touched.

Runs on the controller (localhost) in the validation play that starts every
deepops playbook, so ``ansible-playbook`` used directly gets the same checks
as ``deepops check``: it loads each inventory file Ansible was given with
``deepops_py.inventory.load_cluster`` and fails with every problem found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: deepops_inventory_check
short_description: Validate the deepops inventory (groups, hosts, variables)
description:
  - Loads every inventory file in C(ansible_inventory_sources) with deepops' own
    validator and fails with all problems found (file, group or host, key, message).
  - Sources that are not files (for example C(host1,host2) lists) are skipped.
  - Needs the deepops Python package, so run ansible-playbook from the deepops virtualenv.
options: {}
author: deepops
"""

RETURN = r"""
inventories:
  description: Per checked inventory file, its host and group counts.
  type: list
  elements: dict
  returned: always
hosts:
  description: Hosts in all checked inventories together.
  type: int
  returned: always
groups:
  description: Non-empty groups in all checked inventories together.
  type: int
  returned: always
"""


class ActionModule(ActionBase):
    """Fail the task with the rendered problems, or succeed unchanged with counts."""

    TRANSFERS_FILES = False
    _requires_connection = False  # pure controller-side work
    _supports_check_mode = True  # reads only, so check mode is the same run

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result["changed"] = False
        if self._task.args:
            result.update(failed=True, msg=f"deepops_inventory_check takes no arguments, got: {', '.join(sorted(self._task.args))}")
            return result
        try:
            from deepops_py import inventory
            from deepops_py.errors import DeepopsError
        except ImportError as error:
            result.update(
                failed=True,
                msg=f"cannot import deepops_py ({error}): run ansible-playbook from the deepops virtualenv",
            )
            return result

        sources = (task_vars or {}).get("ansible_inventory_sources") or []
        if isinstance(sources, str):
            sources = [sources]
        checked: list[dict[str, Any]] = []
        failures: list[str] = []
        for source in sources:
            path = Path(str(source))
            if not path.is_file():
                continue  # 'host1,host2' lists and plugin configs are not deepops inventories
            try:
                cluster = inventory.load_cluster(path)
            except DeepopsError as error:
                failures.append(error.render())
                continue
            checked.append({"inventory": str(path), "hosts": len(cluster.hosts), "groups": len(cluster.groups)})

        result["inventories"] = checked
        result["hosts"] = sum(entry["hosts"] for entry in checked)
        result["groups"] = sum(entry["groups"] for entry in checked)
        if failures:
            result.update(failed=True, msg="\n".join(failures))
        elif not checked:
            result.update(skipped=True, msg="no inventory file among the inventory sources; nothing to check")
        else:
            result["msg"] = "; ".join(f"{entry['inventory']}: {entry['hosts']} hosts in {entry['groups']} groups" for entry in checked)
        return result
