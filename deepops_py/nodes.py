"""``deepops node add``: configure new compute nodes, then update the controller.

The hosts must already be in ``slurm_compute`` in the inventory. The site
playbook then runs limited to the new hosts, the controller(s) and the
slurmdbd host(s): the new nodes get the whole stack, the controller renders
slurm.conf/gres.conf with them and reconfigures; no other host is touched
(the controller only reads facts of the other compute nodes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepops_py import suggest
from deepops_py.errors import InputError, Problem
from deepops_py.inventory import COMPUTE, CONTROLLER, DBD, Cluster

PLAYBOOK = "site.yml"
# site.yml starts with an inventory check on localhost; a --limit without it would skip that play.
IMPLICIT_LOCALHOST = "localhost"


def check_new_hosts(cluster: Cluster, hosts: tuple[str, ...] | list[str]) -> list[str]:
    """The hosts, each once, in the order given; InputError naming every host that is not a compute node."""
    wanted = list(dict.fromkeys(hosts))
    if not wanted:
        raise InputError("Name at least one host to add (deepops node add HOST...)")
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
            f"Cannot add {len(messages)} of the hosts", problems=[Problem("", "", "", message) for message in messages]
        )
    return wanted


def target_hosts(cluster: Cluster, hosts: list[str]) -> list[str]:
    """The hosts the run changes: the new hosts, the controller(s), the slurmdbd host(s), each once."""
    ordered = [*hosts, *cluster.groups.get(CONTROLLER, []), *cluster.groups.get(DBD, [])]
    return list(dict.fromkeys(ordered))


def limit_for(cluster: Cluster, hosts: list[str]) -> str:
    """--limit for the site playbook: the target hosts, plus the implicit localhost of its inventory check."""
    return ",".join([*target_hosts(cluster, hosts), IMPLICIT_LOCALHOST])


def build_request(cluster: Cluster, hosts, *, extra_vars: dict[str, Any] | None = None, forks: int | None = None):
    from deepops_py import runner

    new_hosts = check_new_hosts(cluster, hosts)
    return runner.RunRequest(
        command="node-add",
        playbook=PLAYBOOK,
        inventory=Path(cluster.inventory),
        limit=limit_for(cluster, new_hosts),
        extra_vars=dict(extra_vars or {}),
        forks=forks,
        inventory_hosts=tuple(cluster.hosts),
    )


def add_nodes(cluster: Cluster, hosts, *, extra_vars=None, forks=None, json_output: bool = False):
    """Validate the hosts, then run the site playbook for them; returns the RunResult."""
    from deepops_py import runner

    request = build_request(cluster, hosts, extra_vars=extra_vars, forks=forks)
    return runner.run_playbook(request, json_output=json_output)
