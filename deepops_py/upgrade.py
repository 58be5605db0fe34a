"""``deepops upgrade``: rolling maintenance, one step after the other.

The steps (plugins/module_utils/rolling_upgrade.py): the hosts that serve the
cluster first, in one run whose plays keep SchedMD's order for Slurm updates
(slurmdbd, with the accounting database dumped first, then slurmctld, then
the rest); then the compute nodes in batches of ``--batch``. Each step is one
run of playbooks/upgrade.yml: the step's compute nodes are drained and their
jobs waited for, every component converges on the step's hosts with packages
moved to the newest version the repositories offer, nodes reboot where the
packages ask for it, and each compute node is checked (registered, GPU
health, a test job) before it is resumed. The first step that fails stops the
upgrade; the later steps' hosts are left untouched. ``deepops plan --upgrade``
shows the steps and runs the playbook in check mode over every host at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import rolling_upgrade
from deepops_py.errors import InputError
from deepops_py.inventory import Cluster

PLAYBOOK = "upgrade.yml"
# The playbook's variable naming the step's hosts (playbooks/components/upgrade_targets.yml).
HOSTS_VAR = "deepops_upgrade_hosts"
# The slurm role's variables for the drain (roles/slurm/defaults/main.yml).
TIMEOUT_VAR = "slurm_upgrade_timeout"
FORCE_VAR = "slurm_upgrade_force"
# set_stats key of what a step did (playbooks/components/upgrade_finish.yml's last play).
SUMMARY_KEY = "deepops_upgrade"


@dataclass
class StepRun:
    """One step and the run that carried it out."""

    step: dict[str, Any]
    result: Any  # run_results.RunResult

    def as_dict(self) -> dict[str, Any]:
        done = (self.result.data or {}).get(SUMMARY_KEY) or {}
        return {
            **self.step,
            "run_id": self.result.run_id,
            "status": self.result.status,
            "passed": (done.get("check") or {}).get("passed", []),
            "kept_drained": (done.get("check") or {}).get("kept", []),
            "jobs": done.get("jobs") or {},
            "dbd_backup": done.get("dbd_backup") or "",
            "reboot_pending": done.get("reboot_pending") or [],
        }


def plan_steps(cluster: Cluster, batch: int) -> list[dict[str, Any]]:
    """The upgrade's steps for CLUSTER (servers, then batches of BATCH compute nodes); InputError if none."""
    try:
        steps = rolling_upgrade.upgrade_steps({**cluster.groups, "all": list(cluster.hosts)}, batch)
    except rolling_upgrade.UpgradeInputError as error:
        raise InputError(str(error)) from None
    if not steps:
        raise InputError(f"{cluster.inventory} has no host to upgrade: no controller and no compute node")
    return steps


def step_lines(steps: list[dict[str, Any]]) -> list[str]:
    """One line per step, for the user before anything runs."""
    lines = []
    for number, step in enumerate(steps, start=1):
        drained = f"; drained, checked and resumed: {', '.join(step['compute'])}" if step["compute"] else ""
        first = " (Slurm: slurmdbd, after a database dump, then slurmctld, then the rest)" if step["name"] == rolling_upgrade.SERVERS else ""
        lines.append(f"step {number} of {len(steps)}, {step['name']}: {', '.join(step['hosts'])}{first}{drained}")
    return lines


def build_request(
    cluster: Cluster,
    hosts: list[str],
    *,
    timeout: int | None = None,
    force: bool = False,
    check: bool = False,
    extra_vars: dict[str, Any] | None = None,
    forks: int | None = None,
    wait: bool = False,
):
    from deepops_py import nodes, runner

    variables = nodes.drain_variables({**(extra_vars or {}), HOSTS_VAR: list(hosts)}, timeout=timeout, force=force,
                                      timeout_var=TIMEOUT_VAR, force_var=FORCE_VAR)
    return runner.RunRequest(
        command="plan-upgrade" if check else "upgrade",
        playbook=PLAYBOOK,
        inventory=Path(cluster.inventory),
        extra_vars=variables,
        forks=forks,
        check=check,
        diff=check,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def run_steps(cluster: Cluster, steps: list[dict[str, Any]], *, json_output: bool = False, announce=None,
              **options) -> list[StepRun]:
    """Run the steps in order, stopping after the first that does not succeed; returns the runs made.

    The inventory's lock is held from the first step to the last, so no other
    deepops command runs between two steps. ANNOUNCE, when given, is called
    with each step's line before its run.
    """
    from deepops_py import locks, runner

    done: list[StepRun] = []
    with locks.inventory_lock(Path(cluster.inventory), "upgrade", wait=options.get("wait", False)):
        for line, step in zip(step_lines(steps), steps):
            if announce is not None:
                announce(line)
            result = runner.run_playbook(build_request(cluster, step["hosts"], **options), json_output=json_output)
            done.append(StepRun(step, result))
            if not result.ok:
                break
    return done


def untouched(steps: list[dict[str, Any]], done: list[StepRun]) -> list[str]:
    """Hosts of the steps that never ran."""
    return [host for step in steps[len(done):] for host in step["hosts"]]


def report(steps: list[dict[str, Any]], done: list[StepRun]) -> dict[str, Any]:
    """The whole upgrade as JSON: each step run, and the hosts left untouched."""
    ok = len(done) == len(steps) and all(run.result.ok for run in done)
    return {"ok": ok, "steps": [run.as_dict() for run in done], "untouched": untouched(steps, done)}


def notes(steps: list[dict[str, Any]], done: list[StepRun]) -> list[str]:
    """What the user must know after the upgrade; never an empty line."""
    lines = []
    for run in done:
        summary = run.as_dict()
        if summary["dbd_backup"]:
            lines.append(f"Accounting database dumped to {summary['dbd_backup']} before slurmdbd was touched.")
        for host in summary["reboot_pending"]:
            lines.append(f"{host} asks for a reboot (/run/reboot-required); servers are not rebooted by deepops upgrade.")
        if summary["kept_drained"]:
            lines.append(f"Updated but left drained for their own reason (not tested): {', '.join(summary['kept_drained'])}.")
        jobs = summary["jobs"]
        if jobs.get("requeued"):
            lines.append(f"Requeued (--force): jobs {', '.join(jobs['requeued'])}.")
        if jobs.get("cancelled"):
            lines.append(f"Cancelled (--force; they could not be requeued): jobs {', '.join(jobs['cancelled'])}.")
    if done and not done[-1].result.ok:
        failed = done[-1]
        lines.append(f"Stopped at {failed.step['name']} (run {failed.result.run_id}): see the failure above.")
        rest = untouched(steps, done)
        if rest:
            lines.append(f"Not touched: {', '.join(rest)}.")
    elif done:
        lines.append(f"Upgraded {len(done)} step(s): {', '.join(host for run in done for host in run.step['hosts'])}.")
    return lines
