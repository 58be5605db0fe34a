"""Documentation of the action plugin deepops.cluster.inventory_check (plugins/action/inventory_check.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: inventory_check
short_description: Validate the deepops inventory (groups, hosts, variables) before any host is touched
description:
  - Loads every inventory file in C(ansible_inventory_sources) with deepops' own
    validator and fails with all problems found (file, group or host, key, message) -
    deepops groups and their sizes, host names, variables against the roles' argument
    specs (with "did you mean" for misspellings), and the NVIDIA compatibility table.
  - Sources that are not files (for example C(host1,host2) lists) are skipped.
  - A file named by the environment variable E(DEEPOPS_INVENTORY_CHECKED) was validated
    by the deepops command that started the run, and is not loaded again.
  - Runs on the controller; every deepops entry playbook starts with it.
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - deepops.cluster.controller_action
"""

EXAMPLES = r"""
- name: Validate | Check groups, hosts and variables against the schema
  deepops.cluster.inventory_check:
"""

RETURN = r"""
inventories:
  description: Per checked inventory file, its host and group counts (or C(checked_by=deepops)).
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
