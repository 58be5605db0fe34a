"""The GPU health check on the virtual cluster: a requeueable job runs on gpu01, a critical
XID is injected on gpu01's simulated GPU 0 (deepops virtual fault), and within the health
check's interval (10 s on the virtual cluster) gpu01 is drained with a reason naming the GPU
and the XID, and the job is requeued and completes on gpu02; clearing the fault resumes
gpu01. A node drained for another reason is never resumed by the check.

The module leaves the cluster as it found it: no fault, no job, every node idle.
"""

from __future__ import annotations

import re
import time

import pytest
from polling import wait_for

CONTROLLER = "ctl01"
NODE = "gpu01"
OTHER = "gpu02"
INTERVAL = 10  # slurm_health_check_interval of the virtual cluster (deepops_py/virtual/inventory.py)
# A requeued job waits out Slurm's credential lifetime before it may start again
# (AuthInfo=cred_expire=30 on the virtual cluster: deepops_py/virtual/inventory.py).
REQUEUE_DELAY = 30
JOB = ("#!/bin/sh\n"
       "echo \"run ${SLURM_RESTART_COUNT:-0} on $(hostname)\"\n"
       "if [ \"${SLURM_RESTART_COUNT:-0}\" -eq 0 ]; then sleep 300; fi\n")


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    yield cluster
    # Whatever happened above: no fault, no test job, nodes back in service.
    cluster.deepops("virtual", "fault", NODE, "clear")
    _ctl(cluster, "scancel --name=deepops-health-test", check=False)
    for host in (NODE, OTHER):
        reason = _node(cluster, host)[1]
        if reason.startswith(("deepops-health:", "health-test:")):
            _ctl(cluster, f"scontrol update nodename={host} state=resume", check=False)


def _ctl(cluster, command: str, check: bool = True) -> str:
    return cluster.ssh(CONTROLLER, command, check=check).stdout


def _node(cluster, host: str) -> tuple[str, str]:
    """(sinfo's short state, the reason) of HOST."""
    # One line per partition the node is in: the same state and reason on each.
    line = _ctl(cluster, f"sinfo --noheader --Node --nodes={host} --format='%t|%E'").strip().splitlines()[0]
    state, _, reason = line.partition("|")
    return state, "" if reason == "none" else reason


def _job(cluster, job: str) -> dict[str, str]:
    shown = _ctl(cluster, f"scontrol show job --oneliner {job}", check=False)
    return dict(re.findall(r"\b(JobState|NodeList|Restarts|BatchHost)=(\S+)", shown))


def test_health_check_is_configured(deployed):
    config = _ctl(deployed, "scontrol show config")
    assert re.search(r"HealthCheckProgram\s+=\s+/usr/local/sbin/deepops-gpu-health", config), config
    assert re.search(rf"HealthCheckInterval\s+=\s+{INTERVAL} sec", config)
    assert re.search(r"HealthCheckNodeState\s+=\s+ANY", config)
    for host in (NODE, OTHER):
        result = deployed.ssh(host, "deepops-gpu-health --check", check=False)
        assert result.returncode == 0, result.stdout + result.stderr  # healthy, and it could ask Slurm
        # No driver package in a container: the daemon check says so rather than passing or failing.
        assert "persistence daemon: not applicable" in result.stdout
        assert _node(deployed, host)[0] == "idle"


def test_critical_xid_drains_requeues_and_clearing_resumes(deployed):
    # gpu02 out of the way while the job starts, so it starts on gpu01.
    _ctl(deployed, f"scontrol update nodename={OTHER} state=drain reason='health-test: keep the first run on {NODE}'")
    try:
        job = _ctl(deployed, "sbatch --parsable --requeue --gpus=1 --time=10 --job-name=deepops-health-test "
                             f"--output=/tmp/deepops-health-test-%j.out <<'EOF'\n{JOB}EOF").strip()
        started = wait_for(lambda: _job(deployed, job).get("JobState") == "RUNNING", 60)
        assert started and _job(deployed, job)["NodeList"] == NODE, _job(deployed, job)
    finally:
        _ctl(deployed, f"scontrol update nodename={OTHER} state=resume")

    injected = deployed.deepops("virtual", "fault", NODE, "xid:79", "--gpu", "0", check=True)
    assert "NVRM: Xid (PCI:" in injected.stdout
    drained = wait_for(lambda: _node(deployed, NODE)[1].startswith("deepops-health:"), 3 * INTERVAL)
    state, reason = _node(deployed, NODE)
    assert drained, (state, reason)
    assert re.match(r"deepops-health: GPU 0 \(0000:[0-9a-f]{2}:00\.0\): Xid 79 ", reason), reason
    assert state in ("drain", "drng")

    requeued = wait_for(lambda: int(_job(deployed, job).get("Restarts", "0")) >= 1, 3 * INTERVAL)
    assert requeued, _job(deployed, job)
    done = wait_for(lambda: _job(deployed, job).get("JobState") == "COMPLETED", REQUEUE_DELAY + 60, step=3)
    assert done, _job(deployed, job)
    assert _job(deployed, job)["NodeList"] == OTHER
    assert deployed.ssh(OTHER, f"cat /tmp/deepops-health-test-{job}.out").stdout.strip() == f"run 1 on {OTHER}"

    assert _node(deployed, NODE)[1].startswith("deepops-health:")  # the XID stays a fault until the GPU is reset
    cleared = deployed.deepops("virtual", "fault", NODE, "clear", check=True)
    assert "forgot 1 XID" in cleared.stdout
    resumed = wait_for(lambda: _node(deployed, NODE) == ("idle", ""), 3 * INTERVAL)
    assert resumed, _node(deployed, NODE)


def test_a_node_drained_for_another_reason_stays_drained(deployed):
    _ctl(deployed, f"scontrol update nodename={NODE} state=drain reason='health-test: an admin drained it'")
    try:
        deployed.ssh(NODE, "deepops-gpu-health")  # a check now, then let slurmd run two more
        time.sleep(2 * INTERVAL + 2)
        assert _node(deployed, NODE) == ("drain", "health-test: an admin drained it")
    finally:
        _ctl(deployed, f"scontrol update nodename={NODE} state=resume")
    assert wait_for(lambda: _node(deployed, NODE) == ("idle", ""), 30)
