"""A login node of its own (login01, 'virtual up --login') and the cluster's
ordinary user (alice, from cluster_users in the virtual inventory): alice logs
in to login01 with her SSH key and uses Slurm from there (sinfo, squeue,
sbatch, srun, salloc), on Debian 12 (a copy of the controller's slurm.conf)
as on Debian 13 (sackd, configless; molecule/cluster runs that one).

The user part checks that removing a user from the inventory deletes nothing
and is reported, and that a uid taken by another local user on one node stops
the run before any node changes; both as runs of the cluster_users tag only.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

LOGIN = "login01"
CONTROLLER = "ctl01"
USER = "alice"


def _alice(cluster, command: str, check: bool = True) -> subprocess.CompletedProcess:
    """COMMAND on the login node as alice, logged in over SSH with her key (the cluster's key)."""
    return cluster.ssh(LOGIN, command, check, user=USER, timeout=300)


@pytest.fixture(scope="module")
def deployed(cluster):
    """The session cluster, deployed (the modules before this one normally did it), where alice
    has a Slurm association (AccountingStorageEnforce=associations); one made here goes again after."""
    assert LOGIN in cluster.hostvars(), "the session cluster starts with 'virtual up --login'"
    cluster.ensure_deployed()
    show = f"sacctmgr --noheader --parsable2 show association where user={USER} format=account"
    added = not cluster.ssh(CONTROLLER, show).stdout.strip()
    if added:
        cluster.ssh(CONTROLLER, f"sacctmgr --immediate add user {USER} account=users")
    yield cluster
    if added:
        cluster.ssh(CONTROLLER, f"sacctmgr --immediate delete user {USER}", check=False)


def test_login_node_is_only_a_client(deployed):
    data = yaml.safe_load(deployed.inventory_path.read_text())["all"]["children"]
    assert list(data["slurm_login"]["hosts"]) == [LOGIN]
    assert LOGIN not in data["slurm_compute"]["hosts"] and LOGIN not in data["slurm_controller"]["hosts"]
    units = deployed.ssh(LOGIN, "systemctl is-active slurmctld slurmd munge", check=False).stdout.split()
    assert units == ["inactive", "inactive", "active"], units


def test_login_node_config_comes_from_the_controller(deployed):
    version = deployed.ssh(LOGIN, "sinfo --version").stdout.split()[-1]
    controller = deployed.ssh(CONTROLLER, "sha256sum < /etc/slurm/slurm.conf").stdout
    if tuple(int(part) for part in version.split(".")[:2]) >= (23, 11):
        assert deployed.ssh(LOGIN, "systemctl is-active sackd").stdout.strip() == "active"
        assert deployed.ssh(LOGIN, "test -e /etc/slurm/slurm.conf", check=False).returncode != 0
        assert deployed.ssh(LOGIN, "sha256sum < /run/slurm/conf/slurm.conf").stdout == controller
    else:
        assert deployed.ssh(LOGIN, "sha256sum < /etc/slurm/slurm.conf").stdout == controller


def test_alice_is_the_same_user_everywhere(deployed):
    ids = {host: deployed.ssh(host, f"id -u {USER}; id -g {USER}; getent group {USER} | cut -d: -f3").stdout.split()
           for host in deployed.hosts}
    assert set(map(tuple, ids.values())) == {("2001", "2001", "2001")}, ids
    mode = deployed.ssh(LOGIN, f"stat -c '%a %U' /home/{USER}/.ssh/authorized_keys").stdout.strip()
    assert mode == f"600 {USER}"


def test_alice_submits_from_the_login_node(deployed):
    computes = deployed.computes
    assert _alice(deployed, "whoami").stdout.strip() == USER
    listed = _alice(deployed, "sinfo --noheader --Node --format=%N").stdout.split()
    assert sorted(set(listed)) == computes
    # sbatch: the batch job runs as alice on a compute node
    ran = _alice(deployed, "sbatch --wait --parsable --time=2 --output=/dev/null --wrap 'test $(id -u) = 2001'")
    job = ran.stdout.strip().split(";")[0]
    state = deployed.ssh(CONTROLLER, f"sacct --noheader --parsable2 -X --jobs={job} --format=State,User").stdout.split()
    assert state == [f"COMPLETED|{USER}"], state
    # srun and salloc: the compute node calls back to srun on the login node
    host = _alice(deployed, "srun --nodes=1 --time=2 hostname").stdout.strip()
    assert host in computes
    inside = _alice(deployed, "salloc --nodes=1 --time=2 srun printenv SLURM_JOB_USER")
    assert inside.stdout.strip() == USER
    # squeue: alice sees her running job, and cancels it
    held = _alice(deployed, "sbatch --parsable --time=5 --output=/dev/null --wrap 'sleep 120'").stdout.strip()
    try:
        queued = _alice(deployed, f"squeue --noheader --me --jobs={held} --format=%u").stdout.split()
        assert queued == [USER]
    finally:
        _alice(deployed, f"scancel {held}", check=False)


def _run_users_only(cluster, tmp_path, users: list[dict]) -> dict:
    extra = tmp_path / "users.yml"
    extra.write_text(yaml.safe_dump({"cluster_users": users}))
    result = cluster.deepops("deploy", "--tags", "cluster_users", "-e", f"@{extra}", "--json", timeout=1200)
    data = json.loads(result.stdout) if result.stdout.strip() else {}
    # Ansible's own output of the run (the warnings and failure messages), as deepops keeps it.
    log = (cluster.state_dir / "runs" / data["run_id"] / "stdout").read_text() if data.get("run_id") else ""
    return {"rc": result.rc, "data": data, "stderr": result.stderr, "log": log}


def test_removed_user_is_kept_and_reported(deployed, tmp_path):
    run = _run_users_only(deployed, tmp_path, [])
    assert run["rc"] == 0, run["stderr"][-3000:]
    assert all(row["changed"] == 0 for row in run["data"]["hosts"].values()), run["data"]["hosts"]
    assert f"deepops created {USER}, no longer in cluster_users" in run["log"]
    for host in deployed.hosts:
        assert deployed.ssh(host, f"id -u {USER}").stdout.strip() == "2001"
    record = json.loads(deployed.ssh(LOGIN, "cat /var/lib/deepops/cluster_users.json").stdout)
    assert record == {"users": [USER]}


def test_uid_clash_on_one_node_changes_no_node(deployed, tmp_path):
    victim = deployed.computes[0]
    deployed.ssh(victim, "useradd --uid 2002 --user-group --no-create-home localbob")
    try:
        run = _run_users_only(deployed, tmp_path, [{"name": USER, "uid": 2001, "gid": 2001}, {"name": "bob", "uid": 2002}])
        assert run["rc"] != 0
        assert f"{victim}: uid 2002 of bob belongs to the local user localbob" in run["log"]
        for host in deployed.hosts:
            assert deployed.ssh(host, "getent passwd bob", check=False).returncode != 0, host
    finally:
        deployed.ssh(victim, "userdel localbob", check=False)
