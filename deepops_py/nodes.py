"""``deepops node add``: configure new compute nodes, then update the controller.

The hosts must already be in ``slurm_compute`` in the inventory. The entry
playbook ``add_node.yml`` gets them as ``deepops_new_nodes`` and runs on them,
the controller(s) and the slurmdbd host(s) only: the new nodes get the whole
stack, the controller renders slurm.conf/gres.conf with them and
reconfigures; no other host is touched (the controller only reads facts of
the other compute nodes). The playbook picks those hosts itself; this module
checks the names first (exit 2, nothing run) and says where it will run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups
from ansible_collections.deepops.cluster.plugins.plugin_utils import suggest
from deepops_py.errors import InputError, Problem
from deepops_py.inventory import COMPUTE, CONTROLLER, DBD, Cluster

PLAYBOOK = "add_node.yml"
# The playbook's variable naming the hosts to add (playbooks/components/add_node_targets.yml).
NEW_NODES_VAR = "deepops_new_nodes"


def check_new_hosts(cluster: Cluster, hosts: tuple[str, ...] | list[str]) -> list[str]:
    """The hosts, each once, in the order given; InputError naming every host that is not a compute node."""
    return check_compute_hosts(cluster, hosts, action="add")


def check_compute_hosts(cluster: Cluster, hosts: tuple[str, ...] | list[str], *, action: str) -> list[str]:
    """HOSTS, each once, in the order given, when every one is in slurm_compute;
    else InputError naming each that is not (ACTION: what the command does to them)."""
    wanted = list(dict.fromkeys(hosts))
    if not wanted:
        raise InputError(f"Name at least one host to {action}")
    compute = set(cluster.groups.get(COMPUTE, []))
    inventory = cluster.inventory
    messages = []
    for host in wanted:
        if host not in cluster.hosts:
            hint = suggest.did_you_mean(host, cluster.hosts)
            messages.append(f"{host} is not in {inventory}{hint}: add it to {COMPUTE} there first")
        elif host not in compute:
            groups = ", ".join(cluster.hosts[host].groups) or "no group"
            messages.append(f"{host} is not in {COMPUTE} in {inventory} (it is in {groups}): add it there first")
    if len(messages) == 1:
        raise InputError(messages[0])
    if messages:
        raise InputError(
            f"Cannot {action} {len(messages)} of the hosts", problems=[Problem("", "", "", message) for message in messages]
        )
    return wanted


def target_hosts(cluster: Cluster, hosts: list[str]) -> list[str]:
    """The hosts the run changes: the new hosts, the controller(s), the slurmdbd host(s), each once.

    The same hosts as the playbook's group deepops_add_node_targets, by the
    same rule (plugins/module_utils/cluster_groups.py).
    """
    dbd = cluster_groups.resolved_groups(cluster.groups)[cluster_groups.RESOLVED[DBD]]
    return list(dict.fromkeys([*hosts, *cluster.groups.get(CONTROLLER, []), *dbd]))


def build_request(
    cluster: Cluster, hosts, *, extra_vars: dict[str, Any] | None = None, forks: int | None = None, wait: bool = False
):
    from deepops_py import runner

    new_hosts = check_new_hosts(cluster, hosts)
    return runner.RunRequest(
        command="node-add",
        playbook=PLAYBOOK,
        inventory=Path(cluster.inventory),
        extra_vars={**(extra_vars or {}), NEW_NODES_VAR: new_hosts},
        forks=forks,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def add_nodes(cluster: Cluster, hosts, *, extra_vars=None, forks=None, wait: bool = False, json_output: bool = False):
    """Validate the hosts, then run add_node.yml for them; returns the RunResult."""
    from deepops_py import runner

    request = build_request(cluster, hosts, extra_vars=extra_vars, forks=forks, wait=wait)
    return runner.run_playbook(request, json_output=json_output)
