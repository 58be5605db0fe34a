"""Rolling maintenance (``deepops upgrade``): the order of the steps, and the checks a
compute node passes before it takes jobs again.

The steps: first every host that serves the cluster (the slurmdbd host, the
controllers, the login, monitoring and NFS hosts), in the one run whose plays
follow SchedMD's order for Slurm updates (slurmdbd, then slurmctld, then the
rest); then the compute nodes in batches of N, in inventory order. A compute
node that also serves goes with the servers. Each step is one playbook run
(playbooks/upgrade.yml); the first that fails stops the upgrade, and the later
steps' hosts are left untouched.

After its update a compute node is checked while still set aside: slurmd has
registered and answers (not down, not responding, invalid or failed: a node
whose GPUs fell short of its GRES is invalid), the GPU health check finds no
fault, and a test job asking for every GPU of its GRES runs on it, inside a
maintenance reservation that keeps other jobs off it meanwhile.

Standard library only: imported by the filter plugin
``plugins/filter/rolling_upgrade.py`` and by deepops_py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups

SERVERS = "servers"
# Node state flags (scontrol show node: State=IDLE+DRAIN+NOT_RESPONDING) a node must not have to be checked further.
BAD_STATE_FLAGS = ("DOWN", "NOT_RESPONDING", "INVALID", "INVALID_REG", "FAIL", "FAILING", "REBOOT_REQUESTED",
                   "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN", "UNKNOWN")
_GRES_GPU = re.compile(r"gpu:(?:[^:,()]+:)?([0-9]+)")
# Fields of `scontrol show node --oneliner` the checks read; Reason= runs to the end of its value's "[user@time]".
_FIELD = re.compile(r"(?:^|\s)(NodeName|State|Gres|Partitions|Reason)=(\S*)")
_REASON = re.compile(r"\sReason=(.*?)(?:\s\[[^\]]*\])?\s*(?:\s[A-Z][A-Za-z]*=|$)")


class UpgradeInputError(ValueError):
    """Input the upgrade cannot plan or judge."""


def upgrade_steps(groups: Mapping[str, Iterable[str]], batch: int) -> list[dict[str, Any]]:
    """The steps of a rolling upgrade: ``[{name, hosts, compute}]``, servers first.

    ``groups`` is the inventory's (name -> hosts, ``all`` included or not);
    ``compute`` lists the step's hosts that are compute nodes (drained,
    checked and resumed around their update).

    >>> upgrade_steps({"slurm_controller": ["ctl01"], "slurm_compute": ["gpu01", "gpu02", "gpu03"]}, 2)
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'name': 'servers', 'hosts': ['ctl01'], 'compute': []},
     {'name': 'batch 1 of 2', 'hosts': ['gpu01', 'gpu02'], 'compute': ['gpu01', 'gpu02']},
     {'name': 'batch 2 of 2', 'hosts': ['gpu03'], 'compute': ['gpu03']}]
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise UpgradeInputError(f"the batch size must be a whole number of 1 or more, not {batch!r}")
    filled = cluster_groups.with_defaults(groups)
    compute = list(dict.fromkeys(groups.get(cluster_groups.COMPUTE) or []))
    serving = [cluster_groups.DBD, cluster_groups.CONTROLLER, cluster_groups.LOGIN, cluster_groups.MONITORING,
               cluster_groups.NFS_SERVER]
    servers = list(dict.fromkeys(host for group in serving for host in filled.get(group, [])))
    steps = []
    if servers:
        steps.append({"name": SERVERS, "hosts": servers, "compute": [host for host in servers if host in compute]})
    rest = [host for host in compute if host not in servers]
    batches = [rest[start:start + batch] for start in range(0, len(rest), batch)]
    for number, hosts in enumerate(batches, start=1):
        steps.append({"name": f"batch {number} of {len(batches)}", "hosts": hosts, "compute": list(hosts)})
    return steps


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def node_records(scontrol: Any) -> dict[str, dict[str, Any]]:
    """``scontrol show node --oneliner`` output -> ``{node: {flags, reason, gpus, partitions}}``.

    ``flags``: the State= words (``IDLE+DRAIN`` -> ``["IDLE", "DRAIN"]``);
    ``gpus``: the GPU GRES it is configured with (a MIG device counts as one).
    """
    records: dict[str, dict[str, Any]] = {}
    for line in _text(scontrol).splitlines():
        fields = dict(match.groups() for match in _FIELD.finditer(line))
        name = fields.get("NodeName")
        if not name:
            continue
        reason = _REASON.search(line + " ")
        records[name] = {
            "flags": [flag for flag in fields.get("State", "").split("+") if flag],
            "reason": reason.group(1).strip() if reason else "",
            "gpus": sum(int(count) for count in _GRES_GPU.findall(fields.get("Gres", ""))),
            "partitions": [part for part in fields.get("Partitions", "").split(",") if part and part != "(null)"],
        }
    return records


def node_problems(records: Mapping[str, Mapping[str, Any]], nodes: Iterable[str]) -> dict[str, str]:
    """``{node: problem}`` for each of NODES that is unknown to Slurm, in no partition, or in a bad state."""
    problems = {}
    for node in nodes:
        record = records.get(node)
        if record is None:
            problems[node] = "slurmctld does not know the node"
            continue
        bad = [flag for flag in record["flags"] if flag.rstrip("*") in BAD_STATE_FLAGS]
        if bad:
            reason = f" ({record['reason']})" if record.get("reason") else ""
            problems[node] = f"node state {'+'.join(record['flags'])}{reason}"
        elif not record["partitions"]:
            problems[node] = "the node is in no partition: no test job can run on it"
    return problems


def check_jobs(records: Mapping[str, Mapping[str, Any]], nodes: Iterable[str], reservation: str,
               time_limit: int, job_name: str) -> list[dict[str, Any]]:
    """One test job per node: ``[{node, gpus, argv}]``, an ``srun`` that asks for every GPU the
    node's GRES has and lists them (``hostname`` on a node without GPUs)."""
    jobs = []
    for node in nodes:
        record = records[node]
        argv = ["srun", f"--reservation={reservation}", f"--partition={record['partitions'][0]}",
                f"--nodelist={node}", "--nodes=1", "--ntasks=1", f"--time={int(time_limit)}",
                f"--job-name={job_name}", "--quiet"]
        argv += [f"--gres=gpu:{record['gpus']}", "nvidia-smi", "-L"] if record["gpus"] else ["hostname"]
        jobs.append({"node": node, "gpus": record["gpus"], "argv": argv})
    return jobs


def _tail(text: Any, limit: int = 200) -> str:
    lines = [line.strip() for line in _text(text).splitlines() if line.strip()]
    joined = " / ".join(lines)
    return joined if len(joined) <= limit else "..." + joined[-limit:]


def job_problems(results: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``{node: problem}`` from the test jobs' registered loop results (item: a ``check_jobs`` entry).

    A job fails the node when it did not exit 0, or when the node has GPUs and
    the job saw none (``nvidia-smi -L`` lists ``GPU n: ...`` lines).
    """
    problems = {}
    for result in results:
        job = result.get("item") or {}
        node = job.get("node", "?")
        if result.get("rc") != 0:
            detail = _tail(result.get("stderr")) or _tail(result.get("stdout")) or result.get("msg") or "no output"
            problems[node] = f"test job failed (rc={result.get('rc')}): {detail}"
        elif job.get("gpus") and not any(line.lstrip().startswith("GPU ") for line in _text(result.get("stdout")).splitlines()):
            problems[node] = f"test job asked for {job['gpus']} GPU(s) and nvidia-smi listed none"
    return problems


def health_problem(stdout: Any, rc: Any) -> str:
    """One node's GPU health check (``deepops-gpu-health --check --json``) -> its problem, or ``""``."""
    try:
        found = json.loads(_text(stdout))
    except ValueError:
        return f"GPU health check gave no result (rc={rc}): {_tail(stdout) or 'no output'}"
    faults = found.get("faults") if isinstance(found, dict) else None
    if not isinstance(faults, list):
        return f"GPU health check gave no result (rc={rc})"
    described = [": ".join(part for part in (_text(fault.get("gpu")), _text(fault.get("text"))) if part)
                 for fault in faults if isinstance(fault, dict)]
    return f"GPU health check: {'; '.join(described)}" if described else ""
