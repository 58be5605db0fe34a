"""deepops upgrade on the virtual cluster: rolling maintenance, one compute node at a time.

1. ``deepops plan --upgrade --batch 1`` lists the steps (the servers, then gpu01, then gpu02)
   and changes nothing.
2. A batch that fails its check stops the upgrade: while the upgrade runs, once gpu01 is
   drained for it, gpu01's simulated GPU reports uncorrectable ECC errors; the check after
   gpu01's update finds them, gpu01 stays drained with the reason, the run exits 1 and gpu02
   is never touched.
3. With the fault cleared, the upgrade goes through: a package the inventory asks for moves
   from version 1 to the version 2 its (local) repository offers on every host, the
   accounting database is dumped first,
   a job running on gpu02 is waited for (gpu02 drained, the upgrade waiting, until the test
   lets the job end), each node is checked and resumed.

The module leaves the cluster as it found it: no fault, no job, every node idle.
"""

from __future__ import annotations

import json
import time

import pytest
from polling import wait_for

CONTROLLER = "ctl01"
FAILING = "gpu01"
OTHER = "gpu02"
REASON = "deepops upgrade"  # slurm_upgrade_reason's default (roles/slurm/defaults/main.yml)
BACKUPS = "/var/backups/deepops/slurmdbd"  # slurm_dbd_backup_dir's default
RELEASE = "/home/.deepops-upgrade-test-release"  # on the shared /home: the test job ends once it exists


# A package the inventory asks for (common_extra_packages), at version 1 on every host, with
# version 2 in a local apt repository there: deploy leaves 1, upgrade moves every host to 2.
PROBE = "deepops-upgrade-probe"
PROBE_SOURCES = f"/etc/apt/sources.list.d/{PROBE}.list"
PROBE_SETUP = f"""set -e
rm -rf /srv/{PROBE} && mkdir -p /srv/{PROBE} && cd /srv/{PROBE}
for v in 1 2; do
  mkdir -p p$v/DEBIAN
  printf 'Package: {PROBE}\\nVersion: %s\\nArchitecture: all\\nMaintainer: deepops tests <root@localhost>\\nDescription: deepops upgrade test\\n' $v > p$v/DEBIAN/control
  dpkg-deb --build p$v {PROBE}_$v.deb >/dev/null
done
dpkg -i {PROBE}_1.deb >/dev/null
f={PROBE}_2.deb
{{ dpkg-deb -f $f; echo "Filename: ./$f"; echo "Size: $(stat -c %s $f)"; echo "SHA256: $(sha256sum $f | cut -d' ' -f1)"; echo; }} > Packages
echo 'deb [trusted=yes] file:/srv/{PROBE} ./' > {PROBE_SOURCES}
"""
PROBE_TEARDOWN = f"apt-get purge -y -qq {PROBE} >/dev/null 2>&1; rm -rf /srv/{PROBE} {PROBE_SOURCES}"


def _probe_version(cluster, host: str) -> str:
    return cluster.ssh(host, f"dpkg-query --show --showformat='${{Version}}' {PROBE}", check=False).stdout.strip()


def _job_state(cluster, job: str) -> str:
    return cluster.ssh(CONTROLLER, f"squeue --noheader --jobs={job} --format=%T", check=False).stdout.strip()


def _node(cluster, host: str) -> tuple[str, str]:
    """(state flags, reason) of HOST in slurmctld."""
    shown = cluster.ssh(CONTROLLER, f"scontrol show node {host} --oneliner").stdout
    state = shown.split("State=", 1)[1].split()[0] if "State=" in shown else ""
    reason = shown.split("Reason=", 1)[1].rsplit(" [", 1)[0].strip() if "Reason=" in shown else ""
    return state, reason


def _steps(data: dict) -> list[tuple[str, list[str]]]:
    return [(step["name"], step["hosts"]) for step in data]


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    yield cluster
    cluster.deepops("virtual", "fault", FAILING, "clear")
    cluster.ssh(CONTROLLER, "scancel --name=upgrade-test", check=False)
    for host in cluster.hosts:
        cluster.ssh(host, PROBE_TEARDOWN, check=False)
    for host in (FAILING, OTHER):
        if _node(cluster, host)[1].startswith(REASON):
            cluster.ssh(CONTROLLER, f"scontrol update nodename={host} state=resume", check=False)


def test_bad_input_changes_nothing(deployed):
    for args in (["upgrade", "--batch", "0", "--yes"], ["upgrade"], ["plan", "--upgrade", "--limit", "gpu01"]):
        bad = deployed.deepops(*args)
        assert bad.rc == 2, (args, bad.stdout[-2000:], bad.stderr[-2000:])
        assert "Traceback" not in bad.stderr
    assert all("DRAIN" not in _node(deployed, host)[0] for host in (FAILING, OTHER))


def test_plan_shows_the_steps_and_changes_nothing(deployed):
    planned = deployed.deepops("plan", "--upgrade", "--batch", "1", "--json", timeout=1800)
    assert planned.rc == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    data = planned.json()
    assert data["check"] is True and data["playbook"].endswith("upgrade.yml")
    servers = [CONTROLLER, *deployed.group("slurm_login")]  # login01, where test_login added it
    assert _steps(data["upgrade_steps"]) == [
        ("servers", servers), ("batch 1 of 2", [FAILING]), ("batch 2 of 2", [OTHER])]
    assert all("DRAIN" not in _node(deployed, host)[0] for host in (FAILING, OTHER))


def test_a_batch_that_fails_its_check_stops_the_upgrade(deployed):
    running = deployed.popen("upgrade", "--batch", "1", "--yes", "--json")
    try:
        # gpu01 drained for the upgrade (after the servers' step): its GPU goes bad before its check
        assert wait_for(lambda: _node(deployed, FAILING)[1] == REASON or running.poll() is not None, 900, step=1)
        assert running.poll() is None, running.communicate()
        deployed.deepops("virtual", "fault", FAILING, "ecc:2", "--gpu", "0", check=True)
        stdout, stderr = running.communicate(timeout=1800)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 1, stdout[-3000:] + stderr[-3000:]
    data = json.loads(stdout)
    assert data["ok"] is False and data["untouched"] == [OTHER], data
    assert [step["name"] for step in data["steps"]] == ["servers", "batch 1 of 2"]
    assert data["steps"][0]["status"] == "ok" and data["steps"][1]["status"] != "ok"
    state, reason = _node(deployed, FAILING)
    assert "DRAIN" in state and reason.startswith(f"{REASON}: check failed: GPU health check"), (state, reason)
    assert "ECC" in reason, reason
    # the next batch was never drained, and takes jobs
    assert "DRAIN" not in _node(deployed, OTHER)[0]
    assert "deepops_upgrade" not in deployed.ssh(CONTROLLER, "scontrol show reservation").stdout


def test_the_upgrade_goes_through_batch_by_batch_once_the_fault_is_cleared(deployed):
    deployed.deepops("virtual", "fault", FAILING, "clear", check=True)
    dumps_before = deployed.ssh(CONTROLLER, f"ls {BACKUPS}", check=False).stdout.split()
    # a job on gpu02 the upgrade must wait for, not kill: it runs until the test releases it
    deployed.ssh(CONTROLLER, f"rm -f {RELEASE}")
    job = deployed.ssh(CONTROLLER, f"sbatch --parsable --job-name=upgrade-test --nodelist={OTHER} --mem=64M --time=30 "
                                   f"--output=/dev/null --wrap 'while [ ! -e {RELEASE} ]; do sleep 1; done'"
                       ).stdout.strip().split(";")[0]
    assert wait_for(lambda: _job_state(deployed, job) == "RUNNING", 60, step=1)
    for host in deployed.hosts:
        deployed.ssh(host, PROBE_SETUP)
        assert _probe_version(deployed, host) == "1"
    running = deployed.popen("upgrade", "--batch", "1", "--yes", "--json",
                             "-e", json.dumps({"common_extra_packages": [PROBE]}))
    try:
        # gpu02's batch: drained, and the upgrade waits while the job runs
        assert wait_for(lambda: _node(deployed, OTHER)[1] == REASON or running.poll() is not None, 1200, step=1)
        time.sleep(15)
        assert running.poll() is None and _job_state(deployed, job) == "RUNNING", running.poll()
        deployed.ssh(CONTROLLER, f"touch {RELEASE}")
        stdout, stderr = running.communicate(timeout=1800)
    finally:
        if running.poll() is None:
            running.kill()
        deployed.ssh(CONTROLLER, f"rm -f {RELEASE}", check=False)
    assert running.returncode == 0, stdout[-4000:] + stderr[-4000:]
    # the package the inventory asks for moved to the repository's newest version everywhere
    assert {host: _probe_version(deployed, host) for host in deployed.hosts} == {host: "2" for host in deployed.hosts}
    for host in deployed.hosts:
        deployed.ssh(host, PROBE_TEARDOWN)
    # every step ran every component on its hosts, as a deploy does (the probe is gone again)
    deployed.converged = True
    data = json.loads(stdout)
    assert data["ok"] is True and data["untouched"] == []
    assert [(step["name"], step["passed"]) for step in data["steps"]] == [
        ("servers", []), ("batch 1 of 2", [FAILING]), ("batch 2 of 2", [OTHER])]
    assert data["steps"][2]["jobs"]["waited_for"] == [job]
    # the job ran to its end on gpu02: completed, never requeued (--duplicates lists a requeue too)
    accounted = deployed.ssh(CONTROLLER, f"sacct --noheader --allocations --duplicates --jobs={job} --format=State --parsable2").stdout
    assert accounted.split() == ["COMPLETED"], accounted
    # the database was dumped before slurmdbd was touched, and the dump is whole
    dump = data["steps"][0]["dbd_backup"]
    assert dump.startswith(BACKUPS + "/") and dump.rsplit("/", 1)[1] not in dumps_before
    assert "CREATE DATABASE" in deployed.ssh(CONTROLLER, f"zcat {dump} | head -40").stdout
    # every node back in service, no reservation left
    for host in (FAILING, OTHER):
        state, reason = _node(deployed, host)
        assert "DRAIN" not in state and "RESERVED" not in state and "MAINT" not in state, (host, state, reason)
    assert "deepops_upgrade" not in deployed.ssh(CONTROLLER, "scontrol show reservation").stdout
    ran = deployed.ssh(CONTROLLER, "srun --nodes=2 --gpus-per-node=1 --mem=64M --time=1 printenv SLURMD_NODENAME").stdout
    assert sorted(ran.split()) == [FAILING, OTHER], ran
