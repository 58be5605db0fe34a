"""Shared storage on the virtual cluster: /home and the software tree /sw are the
same on every node, so a job submitted from the login node finds its files on
the compute node and writes its output where the user looks.

The virtual cluster's shared mounts are Docker volumes mounted in every node
('virtual up'), its stand-in for NFS: the test machines' kernel has no NFS
(see deepops_py/virtual/inventory.py, SHARED_VOLUMES). Its inventory declares
them as the site's own mounts (shared_mounts, managed: false), so what runs
here for real is the deploy's side of a site's storage: the check that every
node has them mounted before Slurm starts, slurmd ordered after them, homes
made once on the shared /home, Lmod's module path. The NFS server and mount
units are covered by the unit tests (tests/unit/test_shared_mounts.py).

Self-sufficient: deploys first when no earlier module did (then checks a full
second deploy changes nothing); on a cluster earlier modules converged (whose
full-deploy idempotence test_foundation and test_slurm check) it re-runs only
the storage and users parts and checks they change nothing.
"""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
import yaml

LOGIN = "login01"
CONTROLLER = "ctl01"
USER = "alice"
MOUNTS = ("/home", "/sw")
# Whether this module's fixture deployed the cluster (then the second run is a full deploy).
_DEPLOYED_HERE: list[bool] = []


def _alice(cluster, command: str, check: bool = True) -> subprocess.CompletedProcess:
    """COMMAND in a login shell of alice's on the login node (SSH with her key), as she would type it."""
    return cluster.ssh(LOGIN, command, check, user=USER, login_shell=True, timeout=300)


@pytest.fixture(scope="module")
def deployed(cluster):
    """The session cluster, deployed (by an earlier module, else here), where alice has a Slurm
    association (AccountingStorageEnforce=associations); one made here goes again after."""
    assert LOGIN in cluster.hostvars(), "the session cluster starts with 'virtual up --login'"
    _DEPLOYED_HERE.append(not cluster.converged)
    cluster.ensure_deployed()
    show = f"sacctmgr --noheader --parsable2 show association where user={USER} format=account"
    added = not cluster.ssh(CONTROLLER, show).stdout.strip()
    if added:
        cluster.ssh(CONTROLLER, f"sacctmgr --immediate add user {USER} account=users")
    _alice(cluster, "rm -rf ~/job && mkdir ~/job")
    yield cluster
    _alice(cluster, "rm -rf ~/job", check=False)
    if added:
        cluster.ssh(CONTROLLER, f"sacctmgr --immediate delete user {USER}", check=False)


def test_every_node_mounts_the_shared_trees_and_slurm_waits_for_them(deployed):
    for host in deployed.hosts:
        for path in MOUNTS:
            assert deployed.ssh(host, f"findmnt --noheadings --mountpoint {path}", check=False).stdout.strip(), (host, path)
    for node in deployed.computes:
        needs = deployed.ssh(node, "systemctl show --property=RequiresMountsFor --value slurmd").stdout.split()
        assert set(MOUNTS) <= set(needs), (node, needs)
    # One home, made once: what alice writes on the login node is there on every node, hers.
    _alice(deployed, "echo from-login > ~/job/marker")
    for host in deployed.hosts:
        assert deployed.ssh(host, f"cat /home/{USER}/job/marker").stdout.strip() == "from-login", host
        assert deployed.ssh(host, f"stat -c %U /home/{USER}").stdout.strip() == USER, host


def test_job_output_lands_in_the_users_home_from_every_compute_node(deployed):
    _alice(deployed, "echo from-login > ~/job/marker")  # a file the job reads where it runs
    for node in deployed.computes:
        job = _alice(deployed, f"sbatch --wait --parsable --time=2 --nodelist={node} --job-name=on-{node} "
                               "--chdir=$HOME/job --output=%x-%j.out --wrap 'hostname; pwd; cat marker'").stdout
        job = job.strip().split(";")[0]
        output = _alice(deployed, f"cat ~/job/on-{node}-{job}.out").stdout.split()
        assert output == [node, f"/home/{USER}/job", "from-login"], (node, output)


def test_job_array_writes_one_file_per_task(deployed):
    job = _alice(deployed, "sbatch --wait --parsable --time=2 --array=0-3 --job-name=array --chdir=$HOME/job "
                           "--output=%x-%A_%a.out --wrap 'echo task $SLURM_ARRAY_TASK_ID'").stdout.strip().split(";")[0]
    listed = sorted(_alice(deployed, f"cd ~/job && ls array-{job}_*.out").stdout.split())
    assert listed == [f"array-{job}_{task}.out" for task in range(4)], listed
    for task in range(4):
        assert _alice(deployed, f"cat ~/job/array-{job}_{task}.out").stdout.strip() == f"task {task}"


def test_a_module_installed_once_is_seen_on_every_node(deployed):
    # An admin installs a module once, into the shared software tree.
    deployed.ssh(LOGIN, "mkdir -p /sw/modulefiles/hello && printf '%s\\n' "
                        "'setenv(\"HELLO_SHARED\", \"1.0\")' > /sw/modulefiles/hello/1.0.lua")
    try:
        assert "hello/1.0" in _alice(deployed, "module --terse avail 2>&1").stdout
        script = "#!/bin/bash\nmodule load hello/1.0\necho \"$(hostname) $HELLO_SHARED\"\n"
        _alice(deployed, f"printf %s {shlex.quote(script)} > ~/job/hello.sh")
        for node in deployed.computes:
            job = _alice(deployed, f"sbatch --wait --parsable --time=2 --nodelist={node} --chdir=$HOME/job "
                                   "--output=hello-%j.out hello.sh").stdout.strip().split(";")[0]
            assert _alice(deployed, f"cat ~/job/hello-{job}.out").stdout.split() == [node, "1.0"], node
    finally:
        deployed.ssh(LOGIN, "rm -rf /sw/modulefiles/hello", check=False)


def test_a_site_mount_missing_on_the_nodes_stops_the_deploy(deployed, tmp_path):
    declared = yaml.safe_load(deployed.inventory_path.read_text())["all"]["vars"]["shared_mounts"]
    extra = tmp_path / "mounts.yml"
    extra.write_text(yaml.safe_dump({"shared_mounts": [*declared, {"path": "/scratch", "managed": False, "fstype": "lustre"}]}))
    result = deployed.deepops("deploy", "--tags", "nfs_client", "-e", f"@{extra}", "--json", timeout=1200)
    assert result.rc != 0
    data = json.loads(result.stdout) if result.stdout.strip() else {}
    log = (deployed.state_dir / "runs" / data["run_id"] / "stdout").read_text() if data.get("run_id") else result.stderr
    for host in deployed.hosts:
        assert f"{host}: /scratch is not mounted (site-managed" in log, host
    # Slurm itself was left running: the check stops a deploy, it does not undo one.
    assert _alice(deployed, "sinfo --noheader --format=%t").stdout.split()


def test_second_run_changes_nothing(deployed):
    if any(_DEPLOYED_HERE):
        result = deployed.deepops("deploy", "--json", timeout=2400)
    else:
        result = deployed.deepops("deploy", "--tags", "storage,cluster_users", "--json", timeout=1200)
    assert result.rc == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = result.json()["hosts"]
    assert {host: row["changed"] for host, row in rows.items()} == {host: 0 for host in deployed.hosts}
