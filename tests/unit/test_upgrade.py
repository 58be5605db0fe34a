"""deepops upgrade: the steps (servers, then batches), the verdicts of the check after a node's
update (plugins/module_utils/rolling_upgrade.py), the runs made (stopping at the first that
fails), the notes, and the CLI with the runner replaced.

What playbooks/upgrade.yml does on hosts is run for real in tests/integration/test_upgrade.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.deepops.cluster.plugins.module_utils import rolling_upgrade
from click.testing import CliRunner

from deepops_py import inventory as inv
from deepops_py import locks, runner, upgrade
from deepops_py.cli import main
from deepops_py.errors import InputError
from deepops_py.run_results import HostResult, RunResult
from test_locks import taken_elsewhere

pytestmark = pytest.mark.usefixtures("test_specs")
REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
all:
  children:
    slurm_controller:
      hosts:
        ctl01:
        ctl02:
    slurm_dbd:
      hosts:
        db01:
    slurm_login:
      hosts:
        login01:
    monitoring:
      hosts:
        mon01:
    slurm_compute:
      hosts:
        gpu01:
        gpu02:
        gpu03:
        mon01:
"""

SCONTROL = (
    "NodeName=gpu01 Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 Gres=gpu:h100:8(S:0-1) NodeAddr=gpu01 "
    "Partitions=h100,all State=IDLE+DRAIN ThreadsPerCore=1 Reason=deepops upgrade [root@2026-12-04T05:31:02]\n"
    "NodeName=gpu02 Arch=x86_64 Gres=gpu:a100:4,gpu:1g.10gb:7 Partitions=a100,all State=IDLE+DRAIN+NOT_RESPONDING "
    "Reason=Not responding [slurm@2026-12-04T05:31:02] Comment=(null)\n"
    "NodeName=cpu01 Arch=x86_64 Gres=(null) Partitions=all State=MIXED\n"
    "NodeName=lost01 Gres=(null) Partitions=(null) State=IDLE\n"
)


# ---------------------------------------------------------------------------
# the steps

def test_servers_go_first_then_the_compute_nodes_in_batches_in_inventory_order():
    groups = {"slurm_controller": ["ctl01", "ctl02"], "slurm_dbd": ["db01"], "slurm_login": ["login01"],
              "monitoring": ["mon01"], "slurm_compute": ["gpu01", "gpu02", "gpu03", "mon01"]}
    steps = rolling_upgrade.upgrade_steps(groups, 2)
    assert [(step["name"], step["hosts"], step["compute"]) for step in steps] == [
        # slurmdbd's host first; a compute node that serves goes with the servers, drained there
        ("servers", ["db01", "ctl01", "ctl02", "login01", "mon01"], ["mon01"]),
        ("batch 1 of 2", ["gpu01", "gpu02"], ["gpu01", "gpu02"]),
        ("batch 2 of 2", ["gpu03"], ["gpu03"]),
    ]


def test_the_default_groups_put_slurmdbd_and_monitoring_on_the_first_controller():
    steps = rolling_upgrade.upgrade_steps({"slurm_controller": ["ctl01"], "slurm_compute": ["gpu01"]}, 5)
    assert [step["hosts"] for step in steps] == [["ctl01"], ["gpu01"]]


@pytest.mark.parametrize("batch", [0, -1, True, "2", 1.5])
def test_a_batch_must_be_a_whole_number_of_one_or_more(batch):
    with pytest.raises(rolling_upgrade.UpgradeInputError):
        rolling_upgrade.upgrade_steps({"slurm_compute": ["gpu01"]}, batch)


def test_steps_lines_say_what_happens(write_inventory):
    cluster = inv.load_cluster(write_inventory(INVENTORY))
    lines = upgrade.step_lines(upgrade.plan_steps(cluster, 3))
    assert lines[0].startswith("step 1 of 2, servers: db01, ctl01, ctl02, login01, mon01 (Slurm: slurmdbd, after a database dump")
    assert lines[0].endswith("drained, checked and resumed: mon01")
    assert lines[1] == "step 2 of 2, batch 1 of 1: gpu01, gpu02, gpu03; drained, checked and resumed: gpu01, gpu02, gpu03"


# ---------------------------------------------------------------------------
# the check after a node's update

def test_node_records_read_state_reason_gpus_and_partitions():
    records = rolling_upgrade.node_records(SCONTROL)
    assert records["gpu01"] == {"flags": ["IDLE", "DRAIN"], "reason": "deepops upgrade", "gpus": 8,
                                "partitions": ["h100", "all"]}
    assert records["gpu02"]["gpus"] == 11 and records["gpu02"]["reason"] == "Not responding"
    assert records["cpu01"]["gpus"] == 0 and records["lost01"]["partitions"] == []


def test_node_problems_name_bad_states_unknown_nodes_and_no_partition():
    problems = rolling_upgrade.node_problems(rolling_upgrade.node_records(SCONTROL), ["gpu01", "gpu02", "cpu01", "lost01", "gpu09"])
    assert set(problems) == {"gpu02", "lost01", "gpu09"}  # a drained node is fine: the upgrade drained it
    assert problems["gpu02"] == "node state IDLE+DRAIN+NOT_RESPONDING (Not responding)"
    assert "no partition" in problems["lost01"] and "does not know" in problems["gpu09"]


def test_check_jobs_ask_for_every_gpu_of_the_gres_inside_the_reservation():
    jobs = rolling_upgrade.check_jobs(rolling_upgrade.node_records(SCONTROL), ["gpu02", "cpu01"], "deepops_upgrade", 10, "chk")
    assert jobs[0]["node"] == "gpu02" and jobs[0]["gpus"] == 11
    assert jobs[0]["argv"][:3] == ["srun", "--reservation=deepops_upgrade", "--partition=a100"]
    assert "--nodelist=gpu02" in jobs[0]["argv"] and jobs[0]["argv"][-3:] == ["--gres=gpu:11", "nvidia-smi", "-L"]
    assert jobs[1]["argv"][-1] == "hostname" and not any(arg.startswith("--gres") for arg in jobs[1]["argv"])


def test_job_problems_fail_a_node_whose_job_failed_or_saw_no_gpu():
    results = [
        {"item": {"node": "gpu01", "gpus": 8}, "rc": 0, "stdout": "GPU 0: NVIDIA H100 (UUID: GPU-1)\n", "stderr": ""},
        {"item": {"node": "gpu02", "gpus": 4}, "rc": 0, "stdout": "", "stderr": ""},
        {"item": {"node": "gpu03", "gpus": 4}, "rc": 124, "stdout": "", "stderr": "srun: job 7 queued and waiting\n"},
        {"item": {"node": "cpu01", "gpus": 0}, "rc": 0, "stdout": "cpu01\n", "stderr": ""},
    ]
    assert rolling_upgrade.job_problems(results) == {
        "gpu02": "test job asked for 4 GPU(s) and nvidia-smi listed none",
        "gpu03": "test job failed (rc=124): srun: job 7 queued and waiting",
    }


def test_the_health_verdict_names_each_fault_and_a_missing_result():
    found = {"node": "gpu01", "faults": [{"gpu": "GPU 0 (0000:18:00.0)", "text": "2 uncorrectable ECC error(s)", "critical": True},
                                         {"gpu": "", "text": "nvidia-persistenced inactive", "critical": False}]}
    assert rolling_upgrade.health_problem(json.dumps(found), 1) == (
        "GPU health check: GPU 0 (0000:18:00.0): 2 uncorrectable ECC error(s); nvidia-persistenced inactive")
    assert rolling_upgrade.health_problem(json.dumps({"faults": []}), 0) == ""
    assert rolling_upgrade.health_problem("Traceback...", 1).startswith("GPU health check gave no result (rc=1)")


# ---------------------------------------------------------------------------
# the runs

class FakeRunner:
    """Each step's run: ok, unless its hosts include FAIL_ON."""

    def __init__(self, fail_on: str | None = None):
        self.fail_on, self.requests = fail_on, []

    def __call__(self, request, json_output=False, **kwargs):
        self.requests.append(request)
        hosts = request.extra_vars[upgrade.HOSTS_VAR]
        status = "failed" if self.fail_on in hosts else "ok"
        compute = [host for host in hosts if host.startswith("gpu")]
        return RunResult(
            run_id=f"r{len(self.requests)}", command=request.command, playbook=request.playbook,
            inventory=str(request.inventory), start="s", artifacts="/tmp/a", status=status, check=request.check,
            hosts={host: HostResult(host, ok=5, changed=1) for host in hosts},
            data={upgrade.SUMMARY_KEY: {"hosts": hosts, "jobs": {"waited_for": ["7"]} if "gpu02" in hosts else {},
                                        "check": {"passed": [] if status != "ok" else compute, "kept": []},
                                        "dbd_backup": "/var/backups/x.sql.gz" if "db01" in hosts else "",
                                        "reboot_pending": []}},
        )


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))  # the inventory's lock

    def install(fail_on=None):
        runs = FakeRunner(fail_on)
        monkeypatch.setattr(runner, "run_playbook", runs)
        return runs

    return install


def test_the_first_failing_step_stops_the_upgrade_and_the_rest_is_untouched(write_inventory, fake):
    runs = fake(fail_on="gpu01")
    cluster = inv.load_cluster(write_inventory(INVENTORY))
    steps = upgrade.plan_steps(cluster, 1)
    done = upgrade.run_steps(cluster, steps, timeout=60, force=True)
    assert [request.extra_vars[upgrade.HOSTS_VAR] for request in runs.requests] == [
        ["db01", "ctl01", "ctl02", "login01", "mon01"], ["gpu01"]]
    assert runs.requests[1].extra_vars[upgrade.TIMEOUT_VAR] == 60 and runs.requests[1].extra_vars[upgrade.FORCE_VAR] is True
    report = upgrade.report(steps, done)
    assert report["ok"] is False and report["untouched"] == ["gpu02", "gpu03"]
    notes = upgrade.notes(steps, done)
    assert "Accounting database dumped to /var/backups/x.sql.gz before slurmdbd was touched." in notes
    assert "Stopped at batch 1 of 3 (run r2): see the failure above." in notes and "Not touched: gpu02, gpu03." in notes


def test_no_other_command_runs_between_two_steps(write_inventory, fake, monkeypatch):
    runs = fake()
    cluster = inv.load_cluster(write_inventory(INVENTORY))
    taken_at_start = []

    def step_run(request, json_output=False, **kwargs):
        taken_at_start.append(taken_elsewhere(request.inventory))
        with locks.inventory_lock(request.inventory, request.command):  # as runner.run_playbook takes it
            return runs(request, json_output)

    monkeypatch.setattr(runner, "run_playbook", step_run)
    done = upgrade.run_steps(cluster, upgrade.plan_steps(cluster, 1))
    assert len(done) == 4 and taken_at_start == [True] * 4
    assert not taken_elsewhere(Path(cluster.inventory))  # released after the last step


def test_the_step_hosts_cannot_be_overridden_with_extra_vars(write_inventory):
    cluster = inv.load_cluster(write_inventory(INVENTORY))
    request = upgrade.build_request(cluster, ["gpu01"], extra_vars={upgrade.HOSTS_VAR: ["ctl01"]})
    assert request.extra_vars[upgrade.HOSTS_VAR] == ["gpu01"] and request.playbook_path().is_file()
    assert upgrade.TIMEOUT_VAR not in request.extra_vars and upgrade.FORCE_VAR not in request.extra_vars


def test_the_option_names_are_the_slurm_role_defaults():
    defaults = yaml.safe_load((REPO / "roles/slurm/defaults/main.yml").read_text())
    assert {upgrade.TIMEOUT_VAR, upgrade.FORCE_VAR} <= set(defaults)


def test_cli_upgrades_every_step_and_reports_json(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(main, ["upgrade", "--batch", "2", "-i", str(write_inventory(INVENTORY)), "--json", "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["untouched"] == []
    assert [(step["name"], step["passed"]) for step in data["steps"]] == [
        ("servers", []), ("batch 1 of 2", ["gpu01", "gpu02"]), ("batch 2 of 2", ["gpu03"])]
    assert data["steps"][1]["jobs"] == {"waited_for": ["7"]}
    assert all(request.command == "upgrade" and not request.check for request in runs.requests)


def test_cli_exits_1_when_a_step_fails(write_inventory, fake):
    fake(fail_on="gpu03")
    result = CliRunner().invoke(main, ["upgrade", "-i", str(write_inventory(INVENTORY)), "--yes"])
    assert result.exit_code == 1, result.output
    assert "Stopped at batch 3 of 3" in result.stderr


@pytest.mark.parametrize("args, words", [
    (["upgrade", "--batch", "0", "--yes"], ["--batch"]),
    (["upgrade"], ["needs confirmation", "--yes"]),  # not a terminal: never a silent drain
    (["plan", "--upgrade", "--limit", "gpu01"], ["takes no --limit"]),
])
def test_cli_bad_input_exits_2_and_runs_nothing(write_inventory, fake, args, words):
    runs = fake()
    result = CliRunner().invoke(main, [*args, "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 2, result.output
    assert runs.requests == [] and "Traceback" not in result.output
    for word in words:
        assert word in result.output


def test_plan_upgrade_shows_the_steps_and_runs_check_mode_over_every_host(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(main, ["plan", "--upgrade", "--batch", "3", "-i", str(write_inventory(INVENTORY)), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [step["name"] for step in data["upgrade_steps"]] == ["servers", "batch 1 of 1"]
    [request] = runs.requests
    assert request.check and request.command == "plan-upgrade"
    assert request.extra_vars[upgrade.HOSTS_VAR] == ["db01", "ctl01", "ctl02", "login01", "mon01", "gpu01", "gpu02", "gpu03"]


def test_an_inventory_without_hosts_to_upgrade_is_refused(write_inventory):
    cluster = dataclasses.replace(inv.load_cluster(write_inventory(INVENTORY)), groups={})
    with pytest.raises(InputError, match="no host to upgrade"):
        upgrade.plan_steps(cluster, 1)
