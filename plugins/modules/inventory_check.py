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
  - Then checks the values only the run knows, in the same task (the file shortcut
    above does not skip it) - every variable of any inventory host whose value is a
    Jinja template or vaulted (anywhere inside it), resolved for that host, once per
    host and variable; and the run's extra variables (C(-e)), a literal value once, a
    templated one per host. Only variables a role's argument spec declares are checked,
    with Ansible's C(ArgumentSpecValidator) against each declaring entry point's option
    (the coercions of Ansible's per-role check apply, so C("5") passes for an int), then
    with deepops' rules (one line without control characters, patterns and minimums).
    Problems name the file (or C(-e)), the host and the variable; a vaulted value, an
    option with C(no_log), or a variable named like a password, secret, key or token is
    never shown.
  - A template that names what is only known later (facts, variables a play sets)
    raises Ansible's undefined-variable error here and is left to the role that reads
    it; any other templating error is a problem.
  - deepops' playbooks import their roles with O(ansible.builtin.import_role#module:rolespec_validate=false)
    and rely on this check, made once at the start of the run, instead of Ansible's
    per-role check (a task per role and host). Playbooks of your own that use the roles
    keep the per-role check.
  - Runs on the controller and contacts no host; every deepops entry playbook starts
    with it, once (C(run_once)) under any C(--limit).
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
resolved:
  description: Templated or vaulted host values and extra variables checked (per host for a templated one).
  type: int
  returned: always
"""
