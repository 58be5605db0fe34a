"""Slurm on the virtual cluster: configless slurmd with typed GPU GRES,
accounting, QOS preemption and MUNGE, checked through Slurm's own commands.

Self-sufficient: deploys first (whatever earlier modules did) and checks that a
deploy of the converged cluster changes nothing (test_foundation checks that
plan then agrees). Tests run in file order on one cluster.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import slurm_rest

CONTROLLER = "ctl01"


def _simulated_gpus(cluster) -> dict[str, dict[str, int]]:
    """{node: {type: count}} as the virtual cluster simulates them."""
    nodes = cluster.deepops("virtual", "status", "--json", check=True).json()["nodes"]
    found = {}
    for node in nodes:
        gpus = node.get("gpus") or node.get("simulated_gpus") or ""
        if isinstance(gpus, str):
            found[node["name"]] = {kind: int(count) for kind, count in (part.split(":") for part in gpus.split(",") if ":" in part)}
        elif isinstance(gpus, dict):
            found[node["name"]] = {kind: int(count) for kind, count in gpus.items()}
        else:
            found[node["name"]] = {}
    return found


def _ctl(cluster, command: str, check: bool = True) -> str:
    return cluster.ssh(CONTROLLER, command, check=check).stdout


def test_deploy_then_second_run_changes_nothing(cluster):
    first = cluster.deepops("deploy", "--json", timeout=2400)
    assert first.rc == 0, first.stdout[-4000:] + first.stderr[-4000:]
    # After test_foundation the cluster is converged and this first run is
    # itself the second one; run alone, it is a fresh deploy and needs another.
    if any(row["changed"] for row in first.json()["hosts"].values()):
        second = cluster.deepops("deploy", "--json", timeout=2400)
        assert second.rc == 0, second.stderr[-4000:]
        rows = second.json()["hosts"]
    else:
        rows = first.json()["hosts"]
    assert {host: row["changed"] for host, row in rows.items()} == {host: 0 for host in cluster.hosts}


def test_every_compute_idle_with_typed_gres(cluster):
    rows = {}
    for line in _ctl(cluster, "sinfo --noheader --Node --format='%N %t %G'").splitlines():
        node, state, gres = line.split()
        rows[node] = (state, gres)
    simulated = _simulated_gpus(cluster)
    for node in cluster.computes:
        state, gres = rows[node]
        assert state == "idle", (node, state)
        wanted = simulated.get(node) or {}
        if wanted:
            assert sorted(gres.split(",")) == sorted(f"gpu:{kind}:{count}" for kind, count in wanted.items())
        else:
            assert gres == "(null)"


def test_configless_nodes_have_no_local_config(cluster):
    for node in cluster.computes:
        assert cluster.ssh(node, "test -e /etc/slurm/slurm.conf", check=False).returncode != 0
        assert "--conf-server" in cluster.ssh(node, "cat /etc/default/slurmd").stdout
    assert "enable_configless" in _ctl(cluster, "scontrol show config")


def test_a_crashed_controller_starts_again(cluster):
    """Slurm 22.05's slurmctld can crash on a reconfigure (handlers/main.yml);
    systemd starts it again, and the deploy's retried reconfigure gets through."""
    before = _ctl(cluster, "systemctl show slurmctld --property=MainPID --value").strip()
    cluster.ssh("ctl01", "systemctl kill --signal=SIGSEGV slurmctld")
    for _ in range(30):
        if "UP" in cluster.ssh("ctl01", "scontrol ping", check=False).stdout:
            break
        time.sleep(1)
    assert "UP" in _ctl(cluster, "scontrol ping")
    assert _ctl(cluster, "systemctl show slurmctld --property=MainPID --value").strip() != before


def test_gpu_jobs_get_their_devices(cluster):
    for node, gpus in _simulated_gpus(cluster).items():
        for kind, count in gpus.items():
            take = min(3, count)
            out = _ctl(cluster, f"srun --nodelist={node} --gpus={kind}:{take} --time=1 env")
            visible = re.search(r"^CUDA_VISIBLE_DEVICES=(.*)$", out, re.M)
            assert visible and visible.group(1) == ",".join(str(i) for i in range(take)), out
    # Asking for more GPUs than a node has is refused, not silently shrunk.
    assert cluster.ssh(CONTROLLER, "srun --nodelist=gpu01 --gpus=99 --immediate=5 true", check=False).returncode != 0


def test_constraint_selects_nodes_by_their_features(cluster):
    # Each node's features are its GPU models (plus nvlink, CPU vendor...): a
    # job constrained to one model lands only on the nodes that have it.
    simulated = _simulated_gpus(cluster)
    features = {}
    for line in _ctl(cluster, "sinfo --noheader --Node --format='%N %f'").splitlines():
        node, listed = line.split()
        features[node] = set(listed.split(","))
    # Every node that simulates GPUs is a compute node; the controller and the
    # login node appear in `virtual status` but not in sinfo.
    for node in cluster.computes:
        assert set(simulated.get(node) or {}) <= features[node], (node, features[node])
    for model in {kind for gpus in simulated.values() for kind in gpus}:
        having = sorted(node for node, gpus in simulated.items() if model in gpus)
        ran = _ctl(cluster, f"srun --constraint={model} --nodes={len(having)} --time=1 hostname -s")
        assert sorted(ran.split()) == having, (model, ran)
    # An unknown feature is refused at submission, not left pending.
    refused = cluster.ssh(CONTROLLER, "sbatch --constraint=no-such-feature --wrap true", check=False)
    assert refused.returncode != 0 and "feature" in refused.stderr.lower(), refused.stderr


def test_production_job_limits_are_set(cluster):
    config = dict(
        (key.strip(), value.strip())
        for key, _sep, value in (line.partition("=") for line in _ctl(cluster, "scontrol show config").splitlines())
    )
    assert config["EnforcePartLimits"] == "ALL"
    assert config["KillOnBadExit"] == "1"
    assert config["OverTimeLimit"] == "1 min"
    assert config["MinJobAge"] == "300 sec"


def test_rest_api_answers_with_a_token_and_refuses_without(cluster):
    # slurmrestd on the controller, JWT only, reached from the login node.
    slurm_rest.exercise(lambda command: cluster.ssh("login01", command).stdout,
                        lambda command: _ctl(cluster, command), CONTROLLER, cluster.computes)
    # The signing key: on the controller for slurmctld only.
    assert _ctl(cluster, "stat -c '%a %U' /etc/slurm/jwt_hs256.key").strip() == "600 slurm"


def test_sacct_records_gpu_tres(cluster):
    job = _ctl(cluster, "sbatch --parsable --nodelist=gpu01 --gpus=2 --wrap='sleep 1'").strip()
    tres = ""
    for _ in range(30):
        tres = _ctl(cluster, f"sacct --noheader --parsable2 -X -j {job} --format=State,AllocTRES")
        if tres.startswith("COMPLETED"):
            break
        time.sleep(2)
    assert tres.startswith("COMPLETED"), tres
    assert "gres/gpu=2" in tres, tres


def test_high_qos_preempts_low(cluster):
    count = _simulated_gpus(cluster)["gpu01"]
    gpus = sum(count.values())
    low = _ctl(cluster, f"sbatch --parsable --qos=low --nodelist=gpu01 --gpus={gpus} --wrap='sleep 600'").strip()
    try:
        for _ in range(30):
            if _ctl(cluster, f"squeue --noheader -j {low} -o %T").strip() == "RUNNING":
                break
            time.sleep(1)
        else:
            raise AssertionError("the low job never started")
        started = time.monotonic()
        high = _ctl(cluster, f"sbatch --parsable --qos=high --nodelist=gpu01 --gpus={gpus} --wrap='sleep 2'").strip()
        state = ""
        for _ in range(40):
            state = _ctl(cluster, f"sacct --noheader --parsable2 -X -j {high} --format=State").strip()
            if state in ("RUNNING", "COMPLETED"):
                break
            time.sleep(1)
        assert state in ("RUNNING", "COMPLETED"), state
        assert time.monotonic() - started < 40
        info = _ctl(cluster, f"scontrol show job {low}")
        assert re.search(r"Restarts=[1-9]", info), info  # requeued, not killed
        assert "JobState=PENDING" in info or "JobState=REQUEUED" in info or "JobState=RUNNING" in info
    finally:
        _ctl(cluster, f"scancel {low}", check=False)


def test_munge_key_private_and_identical(cluster):
    sums = set()
    for host in cluster.hosts:
        out = cluster.ssh(host, "stat -c '%a %U' /etc/munge/munge.key && sha256sum /etc/munge/munge.key").stdout.split("\n")
        assert out[0] == "400 munge", (host, out[0])
        sums.add(out[1].split()[0])
    assert len(sums) == 1
    secrets = cluster.inventory_path.parent / "secrets"
    assert (secrets / "munge.key").stat().st_mode & 0o777 == 0o600
    assert secrets.stat().st_mode & 0o777 == 0o700
    assert len((secrets / "munge.key").read_bytes()) == 1024


def test_a_deploy_leaves_a_drained_node_drained_without_waiting_for_it(cluster):
    """A node an admin drained has a slurmd that answers: the deploy's readiness
    wait takes it as up (it used to wait a minute for it, then fail the run)."""
    node = cluster.computes[0]
    reason = "it-test: an admin drained it"
    _ctl(cluster, f"scontrol update nodename={node} state=drain reason='{reason}'")
    try:
        result = cluster.deepops("deploy", "--json")
        assert result.rc == 0, result.stderr[-4000:]
        row = _ctl(cluster, f"sinfo --noheader --Node --nodes={node} --format='%t|%E'").splitlines()[0]
        state, _sep, kept = row.partition("|")
        assert state in ("drain", "drng") and kept == reason, row
    finally:
        _ctl(cluster, f"scontrol update nodename={node} state=resume")


def _drift_state(cluster, computes: list[str]) -> dict[str, str]:
    """What the drift test changes: slurm.conf, slurmd on the first compute node,
    the MUNGE key on the last."""
    return {
        "slurm.conf": _ctl(cluster, "sha256sum /etc/slurm/slurm.conf").split()[0],
        "slurmd": cluster.ssh(computes[0], "systemctl is-active slurmd.service", check=False).stdout.strip(),
        "munge.key": cluster.ssh(computes[-1], "sha256sum /etc/munge/munge.key").stdout.split()[0],
    }


def test_plan_reports_every_drift_and_changes_nothing_then_deploy_repairs_it(cluster):
    """Three drifts at once, in three plays: plan lists each (and its handlers
    do not fail it), changes nothing; deploy repairs all three. Done well
    inside SlurmdTimeout, so Slurm never marks the nodes down."""
    computes = cluster.computes
    first, last = computes[0], computes[-1]
    key = _ctl(cluster, "sha256sum /etc/munge/munge.key").split()[0]
    _ctl(cluster, "echo '# drift' >> /etc/slurm/slurm.conf")
    cluster.ssh(first, "systemctl stop slurmd.service")
    cluster.ssh(last, "head -c 1024 /dev/urandom > /etc/munge/munge.key")
    drifted = _drift_state(cluster, computes)
    assert drifted["slurmd"] != "active" and drifted["munge.key"] != key

    plan = cluster.deepops("plan", "--json", timeout=1200)
    assert plan.rc == 0, plan.stdout[-4000:] + plan.stderr[-4000:]
    rows = plan.json()["hosts"]
    assert "Slurm | Directories and configuration of slurmctld" in rows[CONTROLLER]["changed_tasks"], rows[CONTROLLER]
    assert "Slurm | Enable and start slurmd" in rows[first]["changed_tasks"], rows[first]
    assert "Munge | Install the cluster key" in rows[last]["changed_tasks"], rows[last]
    assert _drift_state(cluster, computes) == drifted

    deploy = cluster.deepops("deploy", "--json", timeout=1200)
    assert deploy.rc == 0, deploy.stdout[-4000:] + deploy.stderr[-4000:]
    repaired = _drift_state(cluster, computes)
    assert repaired["slurm.conf"] != drifted["slurm.conf"] and "# drift" not in _ctl(cluster, "cat /etc/slurm/slurm.conf")
    assert repaired["slurmd"] == "active" and repaired["munge.key"] == key
    states = _ctl(cluster, "sinfo --noheader --Node --format='%N %t'")
    assert all(line.split()[1] in ("idle", "mix", "alloc") for line in states.splitlines() if line.strip()), states


def test_secrets_never_reach_run_artifacts(cluster):
    secrets = cluster.inventory_path.parent / "secrets"
    key = (secrets / "munge.key").read_bytes()
    password = (secrets / "slurmdbd_db_password").read_text().split()[0].encode()
    assert len(password) >= 16
    jwt_key = (secrets / "slurm_jwt_hs256.key").read_bytes()
    assert len(jwt_key) == 32 and (secrets / "slurm_jwt_hs256.key").stat().st_mode & 0o777 == 0o600
    needles = [key, key[:64], password, jwt_key]
    import base64
    needles.extend([base64.b64encode(key)[:64], base64.b64encode(jwt_key)])
    runs = cluster.state_dir / "runs"
    files = [path for path in Path(runs).rglob("*") if path.is_file()]
    assert files, "no run artifacts to check"
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"a secret leaked into {path}"
