"""MIG on the virtual cluster: gpu02's simulated A100 40GB GPUs take a layout
through deepops mig apply, Slurm schedules the MIG devices by profile, a
second apply changes nothing, and a change while a job runs drains the node,
lets the job finish, changes the GPUs and resumes the node. The test ends
with MIG off again, as the later tests expect.

The layout is given with -e and reaches only gpu02, the one node mig apply
runs the mig role on; the other nodes keep the default (unmanaged).
"""

from __future__ import annotations

import re
import time

import pytest
from test_examples import check_mig_example
from test_monitoring import MIG_LABEL, dashboard_queries_without_data, promql, wait_for

from ansible_collections.deepops.cluster.plugins.module_utils.validation import SKIPPABLE_CHECKS

NODE = "gpu02"
CONTROLLER = "ctl01"
# GPU 0 cut in four, GPUs 1-3 stay whole A100s.
LAYOUT = "mig_layout={0: [3g.20gb, 2g.10gb, 1g.5gb, 1g.5gb]}"
MIG_GRES = {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2, "a100": 3}
MIG_OFF = "mig_layout={0: disabled}"


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    return cluster


def _ctl(cluster, command: str) -> str:
    return cluster.ssh(CONTROLLER, command).stdout


def _node_gres(cluster) -> dict[str, int]:
    line = _ctl(cluster, f"scontrol show node {NODE} --oneliner")
    gres = re.search(r"\bGres=(\S+)", line).group(1)
    found = {}
    for item in gres.split(","):
        _, kind, count = item.split("(")[0].split(":")
        found[kind] = int(count)
    return found


def _node_state(cluster) -> str:
    return _ctl(cluster, f"sinfo --noheader --Node --nodes={NODE} --format=%t").split()[0]


def _gpu0_state(cluster, extra: str) -> dict:
    # Only gpu02: the layout names A100 profiles, which gpu01's H100s do not have.
    shown = cluster.deepops("mig", "show", "--limit", NODE, "--json", "-e", extra, check=True).json()
    return next(row for row in shown["gpus"] if row["host"] == NODE and row["gpu"] == 0)


def test_show_reports_the_declared_layout_as_pending(deployed):
    row = _gpu0_state(deployed, LAYOUT)
    assert row["state"] == "differs" and row["current"] == [] and row["mig_mode"] == "Disabled"
    assert row["declared"] == "3g.20gb, 2g.10gb, 1g.5gb, 1g.5gb"


def test_apply_cuts_the_gpu_and_slurm_schedules_each_profile(deployed):
    applied = deployed.deepops("mig", "apply", NODE, "--json", "-e", LAYOUT, timeout=1800)
    assert applied.rc == 0, applied.stdout[-4000:] + applied.stderr[-4000:]
    assert _node_gres(deployed) == MIG_GRES
    assert _node_state(deployed) == "idle"  # resumed, and not drained for a GRES mismatch
    assert sorted(deployed.ssh(NODE, "ls /dev/nvidia-caps").stdout.split())  # the instances' capability nodes

    row = _gpu0_state(deployed, LAYOUT)
    assert row["state"] == "ok" and row["current"] == ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]

    for profile in ("3g.20gb", "1g.5gb"):
        job = _ctl(deployed, f"srun --nodelist={NODE} --gres=gpu:{profile}:1 bash -c 'echo ok $SLURM_JOB_ID'").split()
        assert job[0] == "ok", job
        tres = _ctl(deployed, f"sacct --noheader --allocations --jobs={job[1]} --format=AllocTRES%200 --parsable2")
        assert f"gres/gpu:{profile}=1" in tres, tres


def test_mig_instances_reach_prometheus_and_the_dashboards(deployed):
    def instances():
        rows = promql(deployed, f'DCGM_FI_DEV_FB_USED{{node="{NODE}", gpu="0", {MIG_LABEL}!=""}}')
        return sorted(row["metric"][MIG_LABEL] for row in rows) if len(rows) == 4 else None

    # the deploy's scrape interval (15 s), and the Slurm exporter's cache
    assert wait_for(instances, 90) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    gres = wait_for(lambda: promql(deployed, f'slurm_node_gres_gpu_total{{node="{NODE}", type="1g.5gb"}}'), 90)
    assert gres and float(gres[0]["value"][1]) == 2
    assert dashboard_queries_without_data(deployed, mig=True) == [], "MIG dashboard queries without data"


def test_the_mig_example_job_would_run_on_a_mig_instance(deployed):
    check_mig_example(deployed)  # examples/slurm's MIG script, with the layout applied


def test_validate_runs_a_job_per_mig_profile(deployed):
    skipped = [arg for name in SKIPPABLE_CHECKS if name != "mig" for arg in ("--skip", name)]
    result = deployed.deepops("validate", "--json", *skipped, timeout=900)
    data = result.json()
    assert result.rc == 0 and data["ok"], data["checks"]
    [mig] = [check for check in data["checks"] if check["check"] == "mig"]
    assert mig["node"] == NODE and mig["status"] == "pass"
    for profile in ("3g.20gb", "2g.10gb", "1g.5gb"):
        assert f"--gres=gpu:{profile}:1: CUDA_VISIBLE_DEVICES=" in mig["detail"], mig["detail"]
    # the nodes check holds Slurm's GRES to the layout, per profile
    [nodes] = [check for check in data["checks"] if check["check"] == "nodes" and check["node"] == NODE]
    assert nodes["status"] == "pass" and "1g.5gb:2" in nodes["detail"], nodes["detail"]


def test_second_apply_changes_nothing(deployed):
    again = deployed.deepops("mig", "apply", NODE, "--json", "-e", LAYOUT, timeout=1800)
    assert again.rc == 0, again.stderr[-4000:]
    assert {host: row["changed"] for host, row in again.json()["hosts"].items()} == {
        host: 0 for host in again.json()["hosts"]
    }


def test_a_change_waits_for_the_running_job_then_resumes_the_node(deployed):
    job = _ctl(deployed, f"sbatch --parsable --nodelist={NODE} --gres=gpu:1g.5gb:1 --wrap 'sleep 20'").strip()
    for _ in range(30):
        if _ctl(deployed, f"squeue --noheader --jobs={job} --format=%T").strip() == "RUNNING":
            break
        time.sleep(1)
    apply = deployed.popen("mig", "apply", NODE, "--json", "-e", MIG_OFF)
    seen = set()
    while apply.poll() is None:  # the node's states while the change runs
        seen.add(_node_state(deployed))
        time.sleep(2)
    stdout, stderr = apply.communicate()
    assert apply.returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert seen & {"drng", "drain"}, seen  # drained while the job ran, then changed

    accounting = _ctl(deployed, f"sacct --noheader --allocations --jobs={job} --format=State,End --parsable2").split("|")
    assert accounting[0] == "COMPLETED", accounting  # the job was left to finish, not killed
    assert _node_gres(deployed) == {"a100": 4}
    assert _node_state(deployed) == "idle"
    row = _gpu0_state(deployed, MIG_OFF)
    assert row["state"] == "ok" and row["mig_mode"] == "Disabled"


def test_no_node_is_drained_and_a_deploy_changes_nothing(deployed):
    states = _ctl(deployed, "sinfo --noheader --Node --format='%N %t %E'")
    assert all(line.split()[1] in ("idle", "mix", "alloc") for line in states.splitlines() if line.strip()), states
    rerun = deployed.deepops("deploy", "--json", timeout=2400)
    assert rerun.rc == 0, rerun.stderr[-4000:]
    assert {host: row["changed"] for host, row in rerun.json()["hosts"].items()} == {h: 0 for h in deployed.hosts}
