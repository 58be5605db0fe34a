"""deepops node remove on the virtual cluster: take gpu03 out again while jobs run on it.

Runs after test_zz_node_add.py (the file name sorts after it), which leaves
gpu03 added; run on its own, it adds gpu03 first. Leaves the session's
cluster with gpu01 and gpu02 only (gpu03's container stays, outside Slurm).
"""

from __future__ import annotations

import json
import re

import yaml
from polling import wait_for

NODE = "gpu03"
AUTH_DIR = "/etc/deepops/monitoring"
AUTH = f'--cacert {AUTH_DIR}/ca.crt -u "deepops:$(cat {AUTH_DIR}/password)"'
PROMETHEUS = "https://ctl01:9090"


def _state(cluster, job: str) -> str:
    return cluster.ssh("ctl01", f"squeue --noheader --jobs={job} --format=%T", check=False).stdout.strip()


def _node_state(cluster) -> str:
    """gpu03's state, once (sinfo prints a line per partition)."""
    return cluster.ssh("ctl01", f"sinfo --noheader --Node --nodes={NODE} --format=%T").stdout.split("\n")[0].strip()


def _in_slurm(cluster) -> bool:
    return NODE in cluster.ssh("ctl01", "sinfo --noheader --Node --format=%N").stdout.split()


def _node_targets(cluster) -> set[str]:
    out = cluster.ssh("ctl01", f"curl -sf {AUTH} {PROMETHEUS}/api/v1/targets").stdout
    return {target["labels"].get("node", "") for target in json.loads(out)["data"]["activeTargets"]}


def _ensure_node_added(cluster) -> None:
    """Standalone run: grow the cluster by gpu03 the way test_zz_node_add.py does."""
    if NODE in cluster.hostvars() and _in_slurm(cluster):
        return
    cluster.ensure_deployed()
    cluster.deepops("virtual", "up", "--compute", "3", timeout=1800, check=True)
    cluster.deepops("node", "add", NODE, timeout=3600, check=True)


def test_node_remove_drains_requeues_and_leaves_a_consistent_cluster(cluster):
    _ensure_node_added(cluster)
    assert wait_for(lambda: _node_state(cluster) == "idle", 60, step=1), _node_state(cluster)

    # bad input first: exit 2, nothing runs (the node stays up and in Slurm)
    for args in (["gpu09"], ["ctl01"], ["gpu01", "gpu02", NODE]):
        bad = cluster.deepops("node", "remove", *args, "--yes")
        assert bad.rc == 2, (args, bad.stderr[-2000:])
        assert "Traceback" not in bad.stderr
    assert _node_state(cluster) == "idle"

    batch = cluster.ssh(
        "ctl01",
        "sbatch --parsable --requeue --exclude=gpu01,gpu02 --mem=64M --time=30 --output=/dev/null --wrap 'sleep 600'",
    ).stdout.strip().split(";")[0]
    # an allocation without a batch script cannot be requeued: --force cancels it
    granted = cluster.ssh("ctl01", "salloc --no-shell --exclude=gpu01,gpu02 --mem=64M --time=30 2>&1").stdout
    allocation = re.search(r"Granted job allocation (\d+)", granted).group(1)
    try:
        assert wait_for(lambda: _state(cluster, batch) == "RUNNING" and _state(cluster, allocation) == "RUNNING", 120, step=1)

        # check mode changes nothing: no drain
        planned = cluster.deepops("node", "remove", NODE, "--check", "--json", timeout=1200)
        assert planned.rc == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
        assert planned.json()["check"] is True
        assert "drain" not in _node_state(cluster)

        # without --force: drained, waits, gives up at the timeout; the jobs keep running
        waited = cluster.deepops("node", "remove", NODE, "--timeout", "5", "--yes", "--json", timeout=1200)
        assert waited.rc == 1, waited.stdout[-3000:] + waited.stderr[-3000:]
        failure = " ".join((waited.json()["hosts"]["ctl01"]["message"] or "").split())
        still = re.search(rf"Jobs ([0-9, ]+) still run on {NODE} after 5 s", failure)
        assert still and set(still.group(1).replace(",", " ").split()) == {batch, allocation}, failure
        assert waited.json()["removed"] == [] and any("not removed" in note for note in waited.json()["notes"])
        assert _state(cluster, batch) == "RUNNING" and _state(cluster, allocation) == "RUNNING"
        shown = cluster.ssh("ctl01", f"scontrol show node {NODE}").stdout
        assert "DRAIN" in shown and "Reason=deepops node remove" in shown, shown
        assert cluster.ssh(NODE, "systemctl is-active slurmd", check=False).stdout.strip() == "active"

        # --force: the batch job is requeued, the allocation cancelled, the node removed
        result = cluster.deepops("node", "remove", NODE, "--force", "--yes", "--json", timeout=1800)
        assert result.rc == 0, result.stdout[-4000:] + result.stderr[-4000:]
        data = result.json()
        assert data["ok"] and data["removed"] == [NODE] and data["playbook"].endswith("remove_node.yml")
        jobs = data["data"]["deepops_node_remove"]["jobs"]
        assert jobs["requeued"] == [batch] and jobs["cancelled"] == [allocation], jobs
        assert data["data"]["deepops_node_remove"]["unreachable"] == []
        assert any("delete it from slurm_compute" in note for note in data["notes"]), data["notes"]
        # the other compute nodes changed their /etc/hosts (gpu03 out) and nothing else
        assert all(data["hosts"][host]["changed"] == 1 for host in ("gpu01", "gpu02")), data["hosts"]
        for host in ("gpu01", "gpu02"):
            # the file itself: Docker's DNS answers for the container's hostname as well
            assert cluster.ssh(host, f"grep -qw {NODE} /etc/hosts", check=False).returncode == 1, host

        assert not _in_slurm(cluster)
        assert _state(cluster, allocation) == ""
        requeued = cluster.ssh("ctl01", f"scontrol show job {batch}").stdout
        # pending again (it excludes the other nodes): requeued, not killed
        assert "Restarts=1" in requeued and "JobState=PENDING" in requeued, requeued
        for unit in ("slurmd", "prometheus-node-exporter", "deepops-dcgm-exporter"):
            assert cluster.ssh(NODE, f"systemctl is-active {unit}", check=False).stdout.strip() != "active", unit
            assert cluster.ssh(NODE, f"systemctl is-enabled {unit}", check=False).stdout.strip() == "disabled", unit
        assert wait_for(lambda: NODE not in _node_targets(cluster), 90, step=1), "gpu03 is still a Prometheus target"
        assert {"gpu01", "gpu02", "ctl01"} <= _node_targets(cluster)
        # jobs still run on the others
        ran = cluster.ssh("ctl01", "srun --nodes=2 --gpus-per-node=1 --mem=64M --time=1 printenv SLURMD_NODENAME").stdout.split()
        assert sorted(ran) == ["gpu01", "gpu02"], ran
    finally:
        cluster.ssh("ctl01", f"scancel {batch} {allocation}", check=False)
        wait_for(lambda: _state(cluster, batch) == "" and _state(cluster, allocation) == "", 60, step=1)

    # the user deletes gpu03 from the inventory: a deploy then agrees (nothing changes)
    inventory = yaml.safe_load(cluster.inventory_path.read_text())

    def drop(group: dict) -> None:
        (group.get("hosts") or {}).pop(NODE, None)
        for child in (group.get("children") or {}).values():
            drop(child or {})

    drop(inventory["all"])
    without = cluster.inventory_path.with_name("inventory-without-gpu03.yml")  # beside it: same group_vars, secrets
    without.write_text(yaml.safe_dump(inventory, sort_keys=False))
    deployed = cluster.deepops("deploy", "-i", str(without), "--json", timeout=3600)
    assert deployed.rc == 0, deployed.stdout[-4000:] + deployed.stderr[-4000:]
    changed = {name: host["changed_tasks"] for name, host in deployed.json()["hosts"].items() if host["changed"]}
    assert changed == {}, changed
    assert NODE not in deployed.json()["hosts"]
