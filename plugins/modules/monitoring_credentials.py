"""Documentation of the action plugin deepops.cluster.monitoring_credentials (plugins/action/monitoring_credentials.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: monitoring_credentials
short_description: The monitoring endpoints' account and TLS material, kept beside the inventory
description:
  - Runs on the controller. Makes, where missing, in O(directory) (mode 0700) the account password
    C(monitoring_password) (unless O(password) is given), a certificate authority
    (C(monitoring-ca.crt), C(monitoring-ca.key)) and a server certificate for every name in O(names)
    (C(monitoring-server.crt), C(monitoring-server.key)), made again when a name is missing from it or
    it expires within 30 days. Keys and the password are mode 0600.
  - Returns them, with the password's bcrypt hash for web configuration files; the hash's salt is
    derived from the password, so a re-run renders the same files.
  - The result holds secrets; use it with C(no_log).
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  directory:
    description: Where the files are kept (the inventory's C(secrets/)).
    type: path
    required: true
  names:
    description: Host names and addresses the server certificate must name.
    type: list
    elements: str
    required: true
  password:
    description: The account's password, when the inventory gives it; empty makes one into O(directory).
    type: str
    default: ""
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - deepops.cluster.controller_action
"""

EXAMPLES = r"""
- name: Monitoring | The endpoints' account and TLS material
  deepops.cluster.monitoring_credentials:
    directory: "{{ inventory_dir }}/secrets"
    names: [ctl01, localhost, 127.0.0.1]
  register: __monitoring_credentials
  no_log: true
"""

RETURN = r"""
created:
  description: The files this run made.
  type: list
  elements: str
  returned: success
password:
  description: The account's password.
  type: str
  returned: success
password_bcrypt:
  description: Its bcrypt hash, for C(basic_auth_users) of a web configuration file.
  type: str
  returned: success
ca_cert:
  description: The authority's certificate (PEM), which clients trust.
  type: str
  returned: success
server_cert:
  description: The server certificate (PEM).
  type: str
  returned: success
server_key:
  description: The server certificate's private key (PEM).
  type: str
  returned: success
"""
