"""deepops status on the deployed virtual cluster: it agrees with Slurm, and it changes nothing."""

from __future__ import annotations

import collections
import json
import time

import pytest
import yaml

JOB_GPUS = 2
# What must be the same before and after `deepops status` on the controller:
# Slurm's configuration and the monitoring configuration files, and the
# controller's record of nodes (state, reason) and jobs.
FINGERPRINT = (
    "cat /etc/slurm/*.conf /etc/default/prometheus-alertmanager /etc/prometheus/*.yml | md5sum; "
    "sinfo --noheader --Node --format '%N %T %E'; squeue --noheader --format '%i %T %N'"
)


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    return cluster


@pytest.fixture
def gpu_job(deployed):
    """A batch job holding JOB_GPUS GPUs, running; cancelled (and gone) afterwards."""
    job_id = deployed.ssh(
        "ctl01", f"sbatch --parsable --job-name=deepops-status-test --gpus={JOB_GPUS} --wrap 'sleep 300'"
    ).stdout.strip().split(";")[0]
    try:
        for _ in range(60):
            state = deployed.ssh("ctl01", f"squeue --noheader --job {job_id} --format %T").stdout.strip()
            if state == "RUNNING":
                break
            time.sleep(1)
        else:
            pytest.fail(f"job {job_id} did not start: {state}")
        yield job_id
    finally:
        deployed.ssh("ctl01", f"scancel {job_id}", check=False)
        for _ in range(60):
            if not deployed.ssh("ctl01", f"squeue --noheader --job {job_id} --format %i", check=False).stdout.strip():
                break
            time.sleep(1)


def test_status_agrees_with_slurm_and_changes_nothing(deployed, gpu_job):
    before = deployed.ssh("ctl01", FINGERPRINT).stdout
    runs_before = deployed.deepops("runs", "--json", check=True).json()
    result = deployed.deepops("status", "--json", timeout=60)
    assert result.rc == 0, result.stdout + result.stderr
    data = result.json()
    assert data["complete"] and data["errors"] == [], data["errors"]
    assert deployed.ssh("ctl01", FINGERPRINT).stdout == before, "deepops status changed the controller's state"
    # it records no run of its own, and shows the newest deploy
    assert deployed.deepops("runs", "--json", check=True).json() == runs_before
    newest_deploy = next(run for run in runs_before if run["command"] == "deploy")
    assert data["runs"]["deploy"]["id"] == newest_deploy["id"] and data["runs"]["deploy"]["result"] == "ok"

    # node states as sinfo has them
    sinfo = deployed.ssh("ctl01", "sinfo --noheader --Node --format '%N %T'").stdout.split("\n")
    assert {node["name"]: node["state"] for node in data["nodes"]} == dict(
        line.split() for line in sinfo if line.strip())
    # the job's GPUs, allocated on the node squeue runs it on, nowhere else
    job_node = deployed.ssh("ctl01", f"squeue --noheader --job {gpu_job} --format %N").stdout.strip()
    allocated = {node["name"]: node["gpus"]["allocated"] for node in data["nodes"]}
    assert allocated == {name: (JOB_GPUS if name == job_node else 0) for name in allocated}
    assert data["gpus"]["allocated"] == JOB_GPUS
    # totals: the GRES Slurm has configured (scontrol), per node
    for node in data["nodes"]:
        gres = deployed.ssh("ctl01", f"scontrol --oneliner show node {node['name']}").stdout
        configured = next(field for field in gres.split() if field.startswith("Gres=")).split("=", 1)[1]
        for gres_entry in filter(lambda text: text.startswith("gpu:"), configured.split(",")):
            _gpu, gpu_type, count = gres_entry.split("(")[0].split(":")
            assert node["gpus"]["types"][gpu_type]["total"] == int(count), (node, configured)
    # running jobs per partition, as squeue counts them
    running = collections.Counter(
        deployed.ssh("ctl01", "squeue --noheader --states=RUNNING --format %P").stdout.split())
    assert {p["name"]: p["jobs"]["running"] for p in data["partitions"] if p["jobs"]["running"]} == dict(running)
    assert data["jobs"]["running"] == sum(running.values()) >= 1
    # Alertmanager was read (what fires depends on earlier modules; each alert names itself)
    assert data["alertmanager"].startswith("https://") and isinstance(data["alerts"], list)
    assert all(alert["name"] for alert in data["alerts"])
    # slurmrestd runs on the controller (roles/slurm, slurm_restd_enabled), and status says how to get a token.
    assert data["rest_api"] == {"url": "http://ctl01:6820", "active": True, "token": "scontrol token lifespan=3600"}

    screen = deployed.deepops("status", timeout=60)
    assert screen.rc == 0 and job_node in screen.stdout and "Last deploy: ok" in screen.stdout, screen.stdout


def test_status_with_the_controller_unreachable_is_a_partial_result(deployed, tmp_path):
    data = yaml.safe_load(deployed.inventory_path.read_text())
    hosts = [data["all"]]
    while hosts:  # point ctl01 at a port nobody listens on
        group = hosts.pop()
        if "ctl01" in (group.get("hosts") or {}):
            group["hosts"]["ctl01"]["ansible_port"] = 1
        hosts.extend((group.get("children") or {}).values())
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(data))
    result = deployed.deepops("status", "--json", "-i", str(inventory), timeout=60)
    assert result.rc == 1 and "Traceback" not in result.stderr, result.stderr
    status = json.loads(result.stdout)
    assert not status["complete"] and status["nodes"] is None and status["alerts"] is None
    assert {(error["source"], error["host"]) for error in status["errors"]} >= {("controller", "ctl01")}
    assert status["runs"]["deploy"] is not None  # what is known here is still shown
