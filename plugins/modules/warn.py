"""Documentation of the action plugin deepops.cluster.warn (plugins/action/warn.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: warn
short_description: Give the user a warning from a role
description:
  - Runs on the controller, in the action plugin itself, and changes nothing.
  - Returns O(msg) as the task's warning, which C(ansible-playbook) prints as C([WARNING]) and
    deepops shows below the run's summary and in each host's C(warnings) with C(--json).
    M(ansible.builtin.debug) prints a message only in C(ansible-playbook)'s own output.
  - Runs of white space in O(msg) (a folded YAML scalar's line breaks) become one space.
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  msg:
    description: The warning.
    type: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - deepops.cluster.controller_action
"""

EXAMPLES = r"""
- name: Cluster users | Warn about users no longer declared
  deepops.cluster.warn:
    msg: "{{ inventory_hostname }}: {{ undeclared | join(', ') }} no longer in cluster_users: left in place."
  when: undeclared | length > 0
"""

RETURN = r"""
msg:
  description: The warning, its white space runs made single spaces.
  type: str
  returned: success
"""
