"""Documentation of the action plugin deepops.cluster.local_secret (plugins/action/local_secret.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: local_secret
short_description: A password or key made once on the controller, beside the inventory
description:
  - Runs on the controller, in the action plugin itself. Makes O(path) when it is missing, with
    mode 0600 in a directory of mode 0700 (made when missing), and puts either mode right where it
    differs; otherwise only reads the file.
  - For O(kind=password) returns the password; use the task with C(no_log). A key's bytes
    (O(kind=bytes)) are never returned.
  - Check mode makes the file too, so a plan renders what a deploy would.
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  path:
    description: Absolute path of the secret's file (the inventory's C(secrets/) directory and a name).
    type: path
    required: true
  kind:
    description:
      - V(password) makes O(size) letters and digits; V(bytes) makes O(size) random bytes (a key file
        such as munge's).
    type: str
    choices: [password, bytes]
    default: password
  size:
    description: Characters of a password or bytes of a key, 16 or more.
    type: int
    default: 32
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - deepops.cluster.controller_action
"""

EXAMPLES = r"""
- name: Slurm | The database password (made once)
  deepops.cluster.local_secret:
    path: "{{ inventory_dir }}/secrets/slurmdbd_db_password"
  register: __slurm_dbd_secret
  no_log: true

- name: Munge | The cluster key (made once)
  deepops.cluster.local_secret:
    path: "{{ inventory_dir }}/secrets/munge.key"
    kind: bytes
    size: 1024
  run_once: true
"""

RETURN = r"""
path:
  description: The secret's file.
  type: str
  returned: success
password:
  description: The password.
  type: str
  returned: success and O(kind=password)
"""
