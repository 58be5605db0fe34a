"""``deepops node add``: configure new compute nodes, then update the controller.

The hosts must already be in ``slurm_compute`` in the inventory. The entry
playbook ``add_node.yml`` gets them as ``deepops_new_nodes`` and runs the
whole stack on them, the controller(s), the slurmdbd host(s), the NFS
server(s), the monitoring host(s) and the login nodes: the controller
renders slurm.conf/gres.conf with them and reconfigures, an NFS server
exports to them, Prometheus scrapes them, a login node's slurm.conf names
them. The other members only get the new nodes in
their /etc/hosts, so that a deploy afterwards changes nothing. The playbook
picks those hosts itself; this module checks the names first (exit 2,
nothing run) and says where it will run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups
from ansible_collections.deepops.cluster.plugins.plugin_utils import suggest
from deepops_py.errors import InputError, Problem
from deepops_py.inventory import COMPUTE, CONTROLLER, DBD, LOGIN, MONITORING, Cluster

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
    """The hosts the run changes, each once: the new hosts, the controller(s), the slurmdbd host(s),
    the NFS server(s) (their exports name every member), the monitoring host(s) (Prometheus'
    targets) and the login nodes (slurm.conf), which are the playbook's group
    deepops_add_node_targets, by the same rule (plugins/module_utils/cluster_groups.py); then the
    other members, for their /etc/hosts.
    """
    resolved = cluster_groups.resolved_groups(_with_all(cluster))
    scope = [*hosts, *cluster.groups.get(CONTROLLER, []), *resolved[cluster_groups.RESOLVED[DBD]],
             *cluster.groups.get(cluster_groups.NFS_SERVER, []), *resolved[cluster_groups.RESOLVED[MONITORING]],
             *cluster.groups.get(LOGIN, [])]
    return list(dict.fromkeys([*scope, *resolved[cluster_groups.MEMBERS]]))


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


# ---------------------------------------------------------------------------
# deepops node remove

REMOVE_PLAYBOOK = "remove_node.yml"
# The playbook's variable naming the hosts to remove (the rule: plugins/module_utils/cluster_groups.py).
REMOVED_NODES_VAR = cluster_groups.REMOVED_VAR
# The slurm role's variables for the drain (roles/slurm/defaults/main.yml).
TIMEOUT_VAR = "slurm_remove_timeout"
FORCE_VAR = "slurm_remove_force"
# set_stats key of what the run did (playbooks/remove_node.yml's last play).
SUMMARY_KEY = "deepops_node_remove"


def _with_all(cluster: Cluster) -> dict[str, list[str]]:
    """The inventory's groups plus ``all``, as Ansible's ``groups`` has it."""
    return {**cluster.groups, "all": list(cluster.hosts)}


def check_removable_hosts(cluster: Cluster, hosts: tuple[str, ...] | list[str]) -> list[str]:
    """HOSTS, each once, in the order given, when each is a compute node that serves nothing else
    and at least one compute node stays; else InputError naming every problem (nothing runs)."""
    wanted = list(dict.fromkeys(hosts))
    if not wanted:
        raise InputError("Name at least one host to remove")
    inventory = cluster.inventory
    compute = list(cluster.groups.get(COMPUTE, []))
    filled = cluster_groups.with_defaults(cluster.groups)
    serving = {  # the other functions a host may have, by inventory group
        CONTROLLER: "the controller",
        DBD: "the slurmdbd host",
        MONITORING: "the monitoring host",
        LOGIN: "a login node",
        cluster_groups.NFS_SERVER: "an NFS server",
    }
    messages = []
    for host in wanted:
        if host not in cluster.hosts:
            hint = suggest.did_you_mean(host, cluster.hosts)
            messages.append(f"{host} is not in {inventory}{hint}")
            continue
        roles = [what for group, what in serving.items() if host in filled.get(group, [])]
        if roles:
            messages.append(f"{host} is {' and '.join(roles)}: deepops node remove takes out compute nodes only")
        elif host not in compute:
            groups = ", ".join(cluster.hosts[host].groups) or "no group"
            messages.append(f"{host} is not in {COMPUTE} in {inventory} (it is in {groups})")
    remaining = cluster_groups.members(_with_all(cluster), wanted)[cluster_groups.COMPUTE_MEMBERS]
    if not messages and compute and not remaining:
        messages.append(
            f"{', '.join(wanted)} would leave no compute node in {COMPUTE}: a cluster needs at least one"
        )
    if len(messages) == 1:
        raise InputError(messages[0] + "; nothing was changed")
    if messages:
        raise InputError(
            f"Cannot remove {len(messages)} of the hosts; nothing was changed",
            problems=[Problem("", "", "", message) for message in messages],
        )
    return wanted


def remove_target_hosts(cluster: Cluster, hosts: list[str]) -> list[str]:
    """The hosts the removal runs on: the nodes, the controller(s), the monitoring host(s) and
    the remaining members (their /etc/hosts), each once; the playbook's deepops_remove_node_targets."""
    resolved = cluster_groups.resolved_groups(_with_all(cluster), hosts)
    monitoring = resolved[cluster_groups.RESOLVED[MONITORING]]
    return list(dict.fromkeys([
        *hosts, *cluster.groups.get(CONTROLLER, []), *monitoring, *resolved[cluster_groups.MEMBERS]
    ]))


def drain_variables(variables: dict[str, Any], *, timeout: int | None, force: bool, timeout_var: str,
                    force_var: str) -> dict[str, Any]:
    """VARIABLES plus the drain's options where given (--timeout, --force), under the role's names."""
    extra = dict(variables)
    if force:
        extra[force_var] = True
    if timeout is not None:
        extra[timeout_var] = int(timeout)
    return extra


def build_remove_request(
    cluster: Cluster,
    hosts,
    *,
    timeout: int | None = None,
    force: bool = False,
    check: bool = False,
    extra_vars: dict[str, Any] | None = None,
    forks: int | None = None,
    wait: bool = False,
):
    from deepops_py import runner

    removed = check_removable_hosts(cluster, hosts)
    variables = drain_variables({**(extra_vars or {}), REMOVED_NODES_VAR: removed}, timeout=timeout, force=force,
                                timeout_var=TIMEOUT_VAR, force_var=FORCE_VAR)
    return runner.RunRequest(
        command="node-remove",
        playbook=REMOVE_PLAYBOOK,
        inventory=Path(cluster.inventory),
        extra_vars=variables,
        forks=forks,
        check=check,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def remove_nodes(cluster: Cluster, hosts, *, json_output: bool = False, **options):
    """Validate the hosts, then run remove_node.yml for them; returns the RunResult."""
    from deepops_py import runner

    request = build_remove_request(cluster, hosts, **options)
    return runner.run_playbook(request, json_output=json_output)


def removal_notes(result, hosts: list[str]) -> list[str]:
    """What the user must know after a removal: unreachable nodes, requeued or cancelled jobs,
    and the inventory edit left to do. Empty lines are never returned."""
    summary = (result.data or {}).get(SUMMARY_KEY) or {}
    jobs = summary.get("jobs") or {}
    notes = []
    if result.check:
        notes.append(f"Check mode: nothing was changed; {', '.join(hosts)} would be drained and removed.")
        return notes
    if not result.ok:
        notes.append(f"{', '.join(hosts)} not removed (see the failure above); the inventory still lists them.")
        return notes
    for host in summary.get("unreachable") or []:
        notes.append(f"{host} was unreachable: removed from the cluster, but its slurmd and exporters were not stopped.")
    if jobs.get("requeued"):
        notes.append(f"Requeued (--force): jobs {', '.join(jobs['requeued'])}.")
    if jobs.get("cancelled"):
        notes.append(f"Cancelled (--force; they could not be requeued): jobs {', '.join(jobs['cancelled'])}.")
    if jobs.get("waited_for"):
        notes.append(f"Waited for jobs {', '.join(jobs['waited_for'])} to end.")
    notes.append(
        f"Removed {', '.join(hosts)} from Slurm and Prometheus. Now delete "
        f"{'them' if len(hosts) > 1 else 'it'} from {COMPUTE} in {result.inventory}: a later deploy then changes nothing."
    )
    return notes
