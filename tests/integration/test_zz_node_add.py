"""deepops node add on the virtual cluster: grow it by one node while a job runs.

Runs near the end (the file name sorts after the other modules but
test_zz_node_remove.py): it leaves the session's cluster with one more compute node.
"""

from __future__ import annotations

import time


NEW = "gpu03"


def _wait_for_state(cluster, job: str, wanted: str, seconds: int = 120) -> str:
    state = ""
    for _ in range(seconds):
        state = cluster.ssh("ctl01", f"squeue --noheader --jobs={job} --format=%T").stdout.strip()
        if state == wanted:
            break
        time.sleep(1)
    return state


def test_node_add_brings_up_a_new_node_and_keeps_jobs_running(cluster):
    cluster.ensure_deployed()
    submitted = cluster.ssh(
        "ctl01",
        "sbatch --parsable --job-name=deepops-it-long --nodelist=gpu01 --gpus=1 --time=30 "
        "--output=/dev/null --wrap 'sleep 600'",
    ).stdout.strip()
    job = submitted.split(";")[0]
    try:
        assert _wait_for_state(cluster, job, "RUNNING") == "RUNNING"

        cluster.deepops("virtual", "up", "--compute", "3", timeout=1800, check=True)
        assert NEW in cluster.hostvars()
        nodes = cluster.deepops("virtual", "status", "--json", check=True).json()["nodes"]
        model, count = next(node["gpus"] for node in nodes if node["name"] == NEW).split(":")

        result = cluster.deepops("node", "add", NEW, "--json", timeout=3600)
        assert result.rc == 0, result.stdout[-4000:] + result.stderr[-4000:]
        data = result.json()
        assert data["ok"] and data["playbook"].endswith("add_node.yml")
        # the new node goes in as a variable (recorded by name only), with no --limit
        assert data["request"]["limit"] is None and "deepops_new_nodes" in data["request"]["extra_vars"]
        # the new node and the servers (ctl01 also the slurmdbd and monitoring host; ctl02, the
        # backup test_zz_controller_failover.py adds, gets the new slurm.conf too) ran the stack;
        # the other compute nodes changed their /etc/hosts and nothing else
        assert set(data["hosts"]) == set(cluster.hostvars()), sorted(data["hosts"])
        assert data["hosts"][NEW]["changed"] > 0
        others = {name: data["hosts"][name]["changed"] for name in cluster.group("slurm_compute") if name != NEW}
        assert others and all(changed == 1 for changed in others.values()), others
        for name in others:
            # the file itself: Docker's DNS answers for the container's hostname as well
            assert cluster.ssh(name, f"grep -qw {NEW} /etc/hosts", check=False).returncode == 0, name

        # the running job survived the reconfigure
        assert cluster.ssh("ctl01", f"squeue --noheader --jobs={job} --format=%T").stdout.strip() == "RUNNING"
        # the new node is idle with its GPUs as GRES
        line = cluster.ssh("ctl01", f"sinfo --noheader --Node --nodes={NEW} --format='%T %G'").stdout.split("\n")[0]
        state, gres = line.split()
        assert state == "idle", line
        assert gres.split("(")[0] == f"gpu:{model}:{count}", line
        ran = cluster.ssh("ctl01", f"srun --nodelist={NEW} --gpus={count} --time=1 printenv CUDA_VISIBLE_DEVICES")
        assert len(ran.stdout.strip().split(",")) == int(count)
    finally:
        cluster.ssh("ctl01", f"scancel {job}", check=False)
        _wait_for_state(cluster, job, "", seconds=60)  # gone, so gpu01 is idle again

    # the node add left nothing for a deploy to do, on any host
    plan = cluster.deepops("plan", "--json", timeout=1200)
    assert plan.rc == 0, plan.stdout[-4000:] + plan.stderr[-4000:]
    planned = {name: host["changed"] for name, host in plan.json()["hosts"].items()}
    assert set(planned) == set(cluster.hostvars()) and not any(planned.values()), planned

    # and the grown cluster validates (preemption is covered in test_validate.py)
    validated = cluster.deepops("validate", "--skip", "preemption", "--json", timeout=1200)
    checks = validated.json()["checks"]
    assert validated.rc == 0, [check for check in checks if not check["passed"]]
    assert NEW in {check["node"] for check in checks if check["check"] == "gpus"}
