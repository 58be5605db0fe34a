"""The jobs' environment on the compute nodes of the virtual cluster (Debian 12, Slurm 22.05):

- per-job /tmp (job_container/tmpfs) is off on the virtual cluster (deepops_py/virtual/
  inventory.py says why) and not tested here; PrologFlags=Contain stays, for pam_slurm_adopt;
- pam_slurm_adopt on the compute nodes: alice (the virtual cluster's ordinary user,
  cluster_users) cannot ssh to gpu01 without a job there, can while one runs (her
  session joins the job: it sees the job's /tmp), and cannot again once it ended;
  root (Ansible's way in) always can; the controller and the login node are untouched.

In these containers Slurm tracks processes with proctrack/linuxproc (no cgroup
delegation), so an adopted ssh session is let in and joins the job's namespace, but
is not confined to the job's cgroup nor killed when the job ends; that part holds
on real hosts (proctrack/cgroup) only and is not tested here (README, "Per-job /tmp
and pam_slurm_adopt").

Self-sufficient: run alone it deploys, and a second deploy must change nothing; in the
suite an earlier module has deployed (test_slurm checks the second deploy there).
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
from polling import wait_for

CONTROLLER = "ctl01"
LOGIN = "login01"
NODE = "gpu01"
OTHER = "gpu02"
USER = "alice"
JOB_NAME = "deepops-jobenv-test"
BASE_PATH = "/var/lib/slurm/job_containers"  # slurm_job_container_base_path's default
# Small jobs that fit a node together: without --mem a job takes all of its memory (CR_Core_Memory).
SMALL = f"--job-name={JOB_NAME} --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=64M --time=3"


@pytest.fixture(scope="module")
def deployed(cluster):
    """The session cluster deployed and converged, with alice holding a Slurm association
    (AccountingStorageEnforce=associations); one made here goes again after."""
    assert LOGIN in cluster.hostvars(), "the session cluster starts with 'virtual up --login'"
    # Run alone, the module deploys, and a second deploy must change nothing; in the
    # suite an earlier deploy converged the cluster (test_slurm checks the second run).
    if not cluster.converged:
        rows = cluster.deepops("deploy", "--json", timeout=3600, check=True).json()["hosts"]
        if any(row["changed"] for row in rows.values()):
            rows = cluster.deepops("deploy", "--json", timeout=3600, check=True).json()["hosts"]
        changed = {host: row["changed_tasks"] for host, row in rows.items() if row["changed"]}
        assert changed == {}, changed
    show = f"sacctmgr --noheader --parsable2 show association where user={USER} format=account"
    added = not _ctl(cluster, show).strip()
    if added:
        _ctl(cluster, f"sacctmgr --immediate add user {USER} account=users")
    yield cluster
    _ctl(cluster, f"scancel --name={JOB_NAME}", check=False)
    cluster.ssh(NODE, "rm -f /tmp/deepops-jobenv-node-file", check=False)
    if added:
        _ctl(cluster, f"sacctmgr --immediate delete user {USER}", check=False)


def _ctl(cluster, command: str, check: bool = True) -> str:
    return cluster.ssh(CONTROLLER, command, check=check).stdout


def _alice_ssh(cluster, host: str, command: str) -> subprocess.CompletedProcess:
    """COMMAND on HOST as alice, logged in over SSH with her key (the cluster's key, cluster_users)."""
    return cluster.ssh(host, command, check=False, user=USER)


def _logged_in(cluster, host: str, command: str) -> subprocess.CompletedProcess | None:
    """COMMAND on HOST as alice when she could log in there, else None."""
    proc = _alice_ssh(cluster, host, command)
    return proc if proc.returncode == 0 else None


def _alice(cluster, command: str) -> str:
    """COMMAND as alice on the login node, where she submits her jobs."""
    proc = _alice_ssh(cluster, LOGIN, command)
    assert proc.returncode == 0, f"{USER}@{LOGIN} {command!r}: rc={proc.returncode} {proc.stdout}{proc.stderr}"
    return proc.stdout


def _state(cluster, job: str) -> str:
    return _ctl(cluster, f"squeue --noheader --jobs={job} --format=%T", check=False).strip()


def _start(cluster, script: str) -> str:
    """An sbatch job of alice's on NODE running SCRIPT; returns its id once it runs."""
    job = _alice(cluster, f"sbatch --parsable {SMALL} --nodelist={NODE} --output=/dev/null --wrap {shlex.quote(script)}")
    job = job.strip().split(";")[0]
    assert wait_for(lambda: _state(cluster, job) == "RUNNING", 60, step=1), (job, _state(cluster, job))
    return job


def _config(cluster) -> dict[str, str]:
    return {key.strip(): value.strip() for key, _sep, value in
            (line.partition("=") for line in _ctl(cluster, "scontrol show config").splitlines())}


def test_pam_slurm_adopt_is_only_on_the_compute_nodes(deployed):
    for host in (NODE, OTHER):
        pam = deployed.ssh(host, "cat /etc/pam.d/sshd").stdout
        assert re.search(r"^-account\s+required\s+pam_slurm_adopt\.so .*action_no_jobs=deny", pam, re.M), pam
        assert deployed.ssh(host, "systemctl is-enabled systemd-logind", check=False).stdout.strip() == "masked"
        assert deployed.ssh(host, "grep -l pam_systemd /etc/pam.d/common-session", check=False).returncode == 1
    for host in (CONTROLLER, LOGIN):
        assert "pam_slurm_adopt" not in deployed.ssh(host, "cat /etc/pam.d/sshd").stdout, host
        assert _alice_ssh(deployed, host, "whoami").stdout.strip() == USER, host


def test_alice_reaches_a_compute_node_only_while_her_job_runs_there(deployed):
    refused = _alice_ssh(deployed, NODE, "true")
    assert refused.returncode != 0 and "Access denied by pam_slurm_adopt" in refused.stderr, refused.stderr
    assert deployed.ssh(NODE, "id -un").stdout.strip() == "root"  # root passes, job or not

    job = _start(deployed, "echo mine > /tmp/job-file; sleep 120")
    try:
        # RUNNING in squeue may come a moment before the node's step daemons answer pam_slurm_adopt
        inside = wait_for(lambda: _logged_in(deployed, NODE, "whoami; cat /tmp/job-file"), 20, step=1)
        assert inside is not None, _alice_ssh(deployed, NODE, "true").stderr
        assert inside.stdout.split() == [USER, "mine"], inside.stdout  # adopted: the job's own /tmp
        adopted = deployed.ssh(NODE, f"journalctl --no-pager -o cat -t pam_slurm_adopt | grep -c 'adopted into job {job}'",
                               check=False).stdout.strip()
        assert adopted not in ("", "0"), adopted
        # her job is on gpu01 only: gpu02 still refuses her
        other = _alice_ssh(deployed, OTHER, "true")
        assert other.returncode != 0 and "Access denied by pam_slurm_adopt" in other.stderr, other.stderr
    finally:
        _ctl(deployed, f"scancel {job}", check=False)
    assert wait_for(lambda: not _state(deployed, job), 60, step=1)
    again = wait_for(lambda: _logged_in(deployed, NODE, "true") is None, 30, step=1)
    assert again, "alice could still log in to gpu01 after her job ended"
    assert deployed.ssh(NODE, "systemctl is-active slurmd ssh").stdout.split() == ["active", "active"]
