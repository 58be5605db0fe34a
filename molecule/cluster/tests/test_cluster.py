"""The deployed virtual cluster, checked through Slurm's own commands and on
every node, over the same SSH inventory the converge used.

Expectations come from the scenario's input (DEEPOPS_MOLECULE_GPUS, the
--gpus given to deepops virtual up, one per compute in order), not from what
the cluster reports about itself.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

# The REST API client the integration suite uses too.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "support"))
import slurm_rest  # noqa: E402

INVENTORY = str(Path(os.environ["DEEPOPS_STATE_DIR"]) / "virtual" / "inventory.yml")
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
testinfra_hosts = RUNNER.get_hosts("all")
CONTROLLERS = RUNNER.get_hosts("slurm_controller")
COMPUTES = sorted(RUNNER.get_hosts("slurm_compute"))
LOGINS = RUNNER.get_hosts("slurm_login")
# "h100:4 l40s:2" -> {"gpu01": ("h100", 4), "gpu02": ("l40s", 2)}
GPUS = {
    f"gpu{index:02d}": (model, int(count))
    for index, (model, count) in enumerate(
        (spec.split(":") for spec in os.environ["DEEPOPS_MOLECULE_GPUS"].split()), start=1)
}
# Debian's Slurm per node image: this scenario is the Debian 13 run.
SLURM_SERIES = {"debian12": "22.05.", "debian13": "24.11."}[os.environ["DEEPOPS_MOLECULE_IMAGE"]]


@cache
def _node(name: str):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def _controller():
    return _node(CONTROLLERS[0])


def test_inventory_is_the_cluster_the_scenario_asked_for():
    assert CONTROLLERS == ["ctl01"]
    assert COMPUTES == sorted(GPUS)
    assert LOGINS == ["login01"]  # create.yml: virtual up --login


def test_slurm_from_the_images_debian_release(host):
    # Debian's build names itself "slurm-wlm 24.11.5"; upstream's "slurm 24.11.5".
    version = host.check_output("sinfo --version")
    assert re.match(rf"slurm(-wlm)? {re.escape(SLURM_SERIES)}", version), version


def test_every_compute_idle_with_its_typed_gres():
    rows = {}
    for line in _controller().check_output("sinfo -N -h -o '%N %t %G'").splitlines():
        node, state, gres = line.split()
        rows[node] = (state, gres)
    assert rows == {node: ("idle", f"gpu:{model}:{count}") for node, (model, count) in GPUS.items()}


@cache
def _gpu_job() -> dict[str, str]:
    node, (_, count) = next(iter(GPUS.items()))
    assert count >= 2, "the first compute needs at least 2 GPUs for the job"
    output = _controller().check_output(f"timeout 120 srun -w {node} --gpus=2 env")
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def test_gpu_job_gets_two_gpus():
    env = _gpu_job()
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["SLURMD_NODENAME"] == next(iter(GPUS))


def test_sacct_records_the_gpu_job_with_its_gres():
    job = _gpu_job()["SLURM_JOB_ID"]
    # slurmdbd stores the record shortly after the job ends.
    host = _controller()
    for _ in range(30):
        rows = host.check_output(f"sacct -X -n -P -j {job} -o JobID,State,AllocTRES").splitlines()
        if rows and "COMPLETED" in rows[0]:
            break
        host.run("sleep 2")
    assert rows, f"sacct has no record of job {job}"
    job_id, state, tres = rows[0].split("|")
    assert (job_id, state) == (job, "COMPLETED")
    assert re.search(r"(^|,)gres/gpu=2(,|$)", tres), tres


def test_munge_key_private_to_munge(host):
    key = host.file("/etc/munge/munge.key")
    assert key.is_file
    assert key.mode == 0o400
    assert key.user == "munge"
    assert key.group == "munge"
    assert host.service("munge").is_running


def test_munge_key_identical_on_every_node():
    digests = {name: _node(name).check_output("sha256sum /etc/munge/munge.key").split()[0] for name in testinfra_hosts}
    assert len(digests) == 1 + len(COMPUTES) + len(LOGINS)
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("name", COMPUTES)
def test_munge_credential_from_controller_decodes_on(name):
    credential = _controller().check_output("munge -n")
    assert _node(name).run(f"echo {credential} | unmunge").rc == 0


def test_login_node_is_configless_through_sackd():
    login = _node(LOGINS[0])
    assert login.service("sackd").is_running
    assert not login.service("slurmd").is_running
    assert not login.file("/etc/slurm/slurm.conf").exists
    fetched = login.check_output("sha256sum < /run/slurm/conf/slurm.conf")
    assert fetched == _controller().check_output("sha256sum < /etc/slurm/slurm.conf")


def test_ordinary_user_runs_jobs_from_the_login_node():
    login = _node(LOGINS[0])
    assert login.check_output("id -u alice") == "2001"
    # AccountingStorageEnforce=associations: alice needs one (in the default account) to submit.
    _controller().run("sacctmgr --immediate add user alice account=users")
    assert _controller().check_output("sacctmgr --noheader --parsable2 show association where user=alice format=account")

    def as_alice(command: str) -> str:
        return login.check_output(f"su - alice -c {command!r}")

    assert sorted(set(as_alice("sinfo --noheader --Node --format=%N").split())) == COMPUTES
    assert as_alice("timeout 120 srun --nodes=1 --time=2 hostname") in COMPUTES
    assert as_alice("timeout 120 salloc --nodes=1 --time=2 srun printenv SLURM_JOB_USER") == "alice"
    job = as_alice("timeout 120 sbatch --wait --parsable --time=2 --output=/dev/null --wrap true").split(";")[0]
    assert as_alice("squeue --noheader --me --format=%i") == ""  # the job is done, nothing of alice's left
    for _ in range(30):  # slurmdbd stores the record shortly after the job ends
        record = as_alice(f"sacct -X -n -P -j {job} -o State,User")
        if record:
            break
        login.run("sleep 2")
    assert record == "COMPLETED|alice"


def test_rest_api_answers_with_a_token_and_refuses_without():
    # 24.11's API (v0.0.42 and older), from the login node as in the integration suite.
    slurm_rest.exercise(_node(LOGINS[0]).check_output, _controller().check_output, CONTROLLERS[0], COMPUTES)
