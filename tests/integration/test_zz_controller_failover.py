"""A backup controller on the virtual cluster: ctl02 joins as a second slurm_controller
(`deepops virtual up --controllers 2`, both controllers on one Docker volume at
StateSaveLocation), takes over when the primary's container stops while a job runs,
and hands control back when the primary returns, with no job lost.

Runs after the other modules but before test_zz_node_add.py (the file names sort
so); it leaves ctl02 in the cluster as its backup controller, both controllers up
and the primary in control.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from polling import wait_for

PRIMARY = "ctl01"
BACKUP = "ctl02"
TIMEOUT = 30  # slurm_controller_timeout (roles/slurm/defaults/main.yml): how long the backup waits


def _ping(cluster, host: str) -> dict[str, str]:
    """{controller: UP or DOWN} as `scontrol ping` on HOST sees them (22.05 and 24.11 print alike)."""
    out = cluster.ssh(host, "scontrol ping", check=False).stdout
    return dict(re.findall(r"Slurmctld\((?:primary|backup)\) at (\S+) is (UP|DOWN)", out))


def _job_state(cluster, host: str, job: str) -> str:
    shown = cluster.ssh(host, f"scontrol show job --oneliner {job}", check=False).stdout
    match = re.search(r"\bJobState=(\S+)", shown)
    return match.group(1) if match else ""


def _submit(cluster, host: str, name: str, command: str) -> str:
    """The job's id; "" when HOST's sbatch could not submit it (no controller answering)."""
    result = cluster.ssh(host, f"sbatch --parsable --job-name={name} --time=5 --output=/dev/null "
                               f"--wrap {command!r}", check=False)
    return result.stdout.strip().split(";")[0] if result.returncode == 0 else ""


LOG = "/var/log/slurm/slurmctld.log"
TAKES_CONTROL = "Running as primary controller"  # what slurmctld logs when it takes control


def _log_size(cluster, host: str) -> int:
    return int(cluster.ssh(host, f"stat -c %s {LOG}").stdout)


def _logged_since(cluster, host: str, offset: int) -> str:
    return cluster.ssh(host, f"tail -c +{offset + 1} {LOG}", check=False).stdout


@pytest.fixture(scope="module")
def ha(cluster):
    cluster.deepops("virtual", "up", "--login", "--controllers", "2", timeout=1800, check=True)
    first = cluster.deepops("deploy", "--json", timeout=2400)
    assert first.rc == 0, first.stdout[-4000:] + first.stderr[-4000:]
    return cluster


def test_the_backup_shares_the_state_and_a_second_deploy_changes_nothing(ha):
    assert _ping(ha, "gpu01") == {PRIMARY: "UP", BACKUP: "UP"}
    config = ha.ssh(PRIMARY, "scontrol show config").stdout
    assert re.search(rf"SlurmctldHost\[0\]\s+=\s+{PRIMARY}\b", config) and re.search(rf"SlurmctldHost\[1\]\s+=\s+{BACKUP}\b", config)
    assert re.search(rf"SlurmctldTimeout\s+=\s+{TIMEOUT} sec", config), config
    marker = "/var/lib/slurm/slurmctld/.deepops-shared-state"
    assert ha.ssh(PRIMARY, f"cat {marker}").stdout == ha.ssh(BACKUP, f"cat {marker}").stdout != ""
    # The accounting database stays on the first controller alone.
    assert ha.ssh(BACKUP, "systemctl is-active slurmdbd.service mariadb.service", check=False).stdout.split() != ["active"] * 2
    second = ha.deepops("deploy", "--json", timeout=2400)
    assert second.rc == 0, second.stderr[-4000:]
    assert {host: row["changed"] for host, row in second.json()["hosts"].items()} == {host: 0 for host in ha.hosts}


def test_the_backup_takes_over_and_the_primary_takes_back_with_no_job_lost(ha):
    running = _submit(ha, PRIMARY, "ha-running", "sleep 60")
    assert running and wait_for(lambda: _job_state(ha, PRIMARY, running) == "RUNNING", 60), _job_state(ha, PRIMARY, running)
    backup_log, primary_log = _log_size(ha, BACKUP), _log_size(ha, PRIMARY)  # the logs outlive the container's stop

    subprocess.run(["docker", "stop", "--time", "10", ha.container(PRIMARY)], check=True, capture_output=True)
    stopped = time.monotonic()
    try:
        # The backup takes control within its timeout, and a job submitted from the login node runs.
        assert wait_for(lambda: TAKES_CONTROL in _logged_since(ha, BACKUP, backup_log), TIMEOUT + 60), \
            _logged_since(ha, BACKUP, backup_log)[-3000:]
        took = time.monotonic() - stopped
        assert took < TIMEOUT + 60, f"the backup took {took:.0f} s to take over"
        new = wait_for(lambda: _submit(ha, "login01", "ha-new", "hostname"), 60)
        assert new, "the backup accepted no job"
        # deepops status reads Slurm from the backup while the first controller is away.
        shown = ha.deepops("status", "--json")
        data = shown.json()
        assert shown.rc == 1 and data["controller"] == BACKUP and data["nodes"], data
        assert [problem["host"] for problem in data["errors"]] == [PRIMARY], data["errors"]
        assert wait_for(lambda: _job_state(ha, BACKUP, new) == "COMPLETED", 90), _job_state(ha, BACKUP, new)
        # The job that ran through the failover completes too.
        assert wait_for(lambda: _job_state(ha, BACKUP, running) == "COMPLETED", 120), _job_state(ha, BACKUP, running)
    finally:
        # 'virtual up' starts the stopped container and refreshes its SSH port in the inventory.
        ha.deepops("virtual", "up", "--login", "--controllers", "2", timeout=1800, check=True)

    # The primary takes control back (the backup hands it over), and jobs it accepts run.
    assert wait_for(lambda: TAKES_CONTROL in _logged_since(ha, PRIMARY, primary_log), 120), \
        _logged_since(ha, PRIMARY, primary_log)[-3000:]
    assert wait_for(lambda: _ping(ha, "gpu01") == {PRIMARY: "UP", BACKUP: "UP"}, 120), _ping(ha, "gpu01")
    after = wait_for(lambda: _submit(ha, PRIMARY, "ha-after", "hostname"), 60)
    assert after and wait_for(lambda: _job_state(ha, PRIMARY, after) == "COMPLETED", 90), _job_state(ha, PRIMARY, after)
    # Accounting has all three once slurmctld has passed on what it kept while slurmdbd was away.
    jobs = ",".join((running, new, after))
    records = ""
    for _ in range(60):
        records = ha.ssh(PRIMARY, f"sacct --noheader --parsable2 -X -j {jobs} --format=JobID,JobName,State").stdout
        if records.count("COMPLETED") == 3:
            break
        time.sleep(2)
    assert sorted(records.split()) == sorted(f"{job}|{name}|COMPLETED" for job, name in
                                             ((running, "ha-running"), (new, "ha-new"), (after, "ha-after"))), records
