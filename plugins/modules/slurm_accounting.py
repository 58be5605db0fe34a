#!/usr/bin/python
"""Ansible module: the Slurm accounting tree (QOS, accounts, users), changing only what differs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_accounting
short_description: Keep Slurm's QOS, accounts and users' associations as declared, with sacctmgr
description:
  - Reads the tree once (C(sacctmgr --noheader --parsable2 show qos), C(show association) for
    O(cluster), C(show user)), works out what differs from O(qos), O(accounts) and O(users), and runs
    C(sacctmgr --immediate) only for that.
  - QOS are compared on priority, preempt and preempt mode; accounts on parent, fair-share and, where
    declared, allowed QOS and default QOS; users on their accounts, default account and, per
    association, fair-share and (where declared) QOS and default QOS. An undeclared QOS list is
    inherited in Slurm and left alone.
  - O(default_account) is kept under root, allowed every QOS, unless O(accounts) declares it; users
    that name no account belong to it. Root's user association is allowed every QOS, with
    O(default_qos) its default.
  - What slurmdbd holds for O(cluster) and the input does not declare (accounts, users' associations)
    is kept and named in a warning and in RV(undeclared), unless O(prune) is set. Partition
    associations are never touched.
  - The input is checked as a whole (parents declared or root, no cycles, default accounts among a
    user's accounts, known QOS) before anything is read or changed.
  - Check mode runs only the reading commands and returns what would be done in RV(changes).
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  cluster:
    description: The cluster's name in accounting (ClusterName).
    type: str
    required: true
  qos:
    description: QOS with C(name), C(priority), C(preempt) (QOS names it preempts) and C(preempt_mode).
    type: list
    elements: dict
    default: []
  default_qos:
    description: Default QOS of root's association and of O(default_account) when it is not declared.
    type: str
    required: true
  default_account:
    description: Account of users that name none.
    type: str
    required: true
  accounts:
    description:
      - Accounts with C(name), C(parent) (default root), C(fairshare) (a number or C(parent); default 1),
        C(qos) (allowed QOS; unset inherits the parent's) and C(default_qos).
    type: list
    elements: dict
    default: []
  users:
    description:
      - Users with C(name), C(accounts) (default O(default_account)), C(default_account) (default the
        first of C(accounts)), C(fairshare) (default 1), C(qos) and C(default_qos), applied to each of
        the user's associations.
    type: list
    elements: dict
    default: []
  prune:
    description: Remove users' associations and accounts of O(cluster) that are not declared.
    type: bool
    default: false
  sacctmgr_path:
    description: The sacctmgr command; default the one on the PATH.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Slurm | Accounting tree
  deepops.cluster.slurm_accounting:
    cluster: deepops
    qos: [{name: normal, priority: 100}, {name: low, priority: 10}]
    default_qos: normal
    default_account: users
    accounts:
      - {name: physics, fairshare: 40, qos: [normal, low], default_qos: normal}
      - {name: theory, parent: physics, fairshare: 10}
    users:
      - {name: alice, accounts: [theory, physics], default_account: theory}
"""

RETURN = r"""
changes:
  description: What was done (in check mode, what would be), one line each, in order.
  type: list
  elements: str
  returned: always
  sample: ["add account theory under physics", "set account physics: fairshare 1 -> 40"]
commands:
  description: The sacctmgr commands behind RV(changes).
  type: list
  elements: list
  returned: always
  sample: [["sacctmgr", "--immediate", "add", "account", "theory", "cluster=deepops", "parent=physics", "fairshare=10"]]
undeclared:
  description: What slurmdbd has for the cluster and the input does not declare (removed with O(prune)).
  type: dict
  returned: always
  contains:
    accounts:
      description: Account names, children first.
      type: list
      elements: str
    users:
      description: Users' associations as C(user@account).
      type: list
      elements: str
  sample: {"accounts": ["oldproject"], "users": ["bob@oldproject"]}
"""

# Ansible modules import after their documentation strings.
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.deepops.cluster.plugins.module_utils.slurm_accounting import AccountingError, apply, wanted_tree


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "str", "required": True},
            "qos": {"type": "list", "elements": "dict", "default": []},
            "default_qos": {"type": "str", "required": True},
            "default_account": {"type": "str", "required": True},
            "accounts": {"type": "list", "elements": "dict", "default": []},
            "users": {"type": "list", "elements": "dict", "default": []},
            "prune": {"type": "bool", "default": False},
            "sacctmgr_path": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    sacctmgr = params["sacctmgr_path"] or module.get_bin_path("sacctmgr", required=True)

    def run(argv):
        return module.run_command(list(argv))

    result, failure, applied = None, None, []
    try:
        wanted = wanted_tree(params["qos"], params["accounts"], params["users"], params["default_account"],
                             params["default_qos"])
        result = apply(run, sacctmgr, params["cluster"], wanted, prune=params["prune"], check_mode=module.check_mode)
    except (AccountingError, KeyError) as error:
        failure = str(error) if isinstance(error, AccountingError) else f"every entry needs a name ({error})"
        applied = getattr(error, "applied", [])
    if failure is not None:
        # Failing outside the except block keeps Ansible from attaching a traceback.
        module.fail_json(msg=f"slurm accounting: {failure}", changed=bool(applied), changes=applied)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
