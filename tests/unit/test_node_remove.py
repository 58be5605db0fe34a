"""deepops node remove: host checks (exit 2, nothing run), the hosts it targets, the request it
makes, the notes after the run, and the CLI (runner replaced).

What playbooks/remove_node.yml does with the request is run for real in test_cluster_groups.py;
the exclusion rule itself is tested there too.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_node_add import computes_read_by_the_controller

from deepops_py import inventory as inv
from deepops_py import nodes, runner
from deepops_py.cli import main
from deepops_py.errors import InputError
from deepops_py.run_results import HostResult, RunResult

pytestmark = pytest.mark.usefixtures("test_specs")

INVENTORY = """\
all:
  children:
    slurm_controller:
      hosts:
        ctl01:
    slurm_dbd:
      hosts:
        db01:
    monitoring:
      hosts:
        mon01:
    slurm_login:
      hosts:
        login01:
    slurm_compute:
      hosts:
        gpu01:
        gpu02:
        gpu03:
        mon01:
"""

SUMMARY = {"nodes": ["gpu03"], "unreachable": [], "jobs": {"requeued": ["41"], "cancelled": ["42"], "waited_for": []}}


@pytest.fixture
def cluster(write_inventory):
    return inv.load_cluster(write_inventory(INVENTORY))


class FakeRunner:
    def __init__(self, status="ok", data=None):
        self.status, self.data, self.requests = status, data, []

    def __call__(self, request, json_output=False, **kwargs):
        self.requests.append(request)
        return RunResult(
            run_id="r3", command=request.command, playbook=request.playbook, inventory=str(request.inventory),
            start="s", artifacts="/tmp/a", status=self.status, check=request.check,
            hosts={"gpu03": HostResult("gpu03", ok=5, changed=3), "ctl01": HostResult("ctl01", ok=30, changed=2)},
            data={nodes.SUMMARY_KEY: SUMMARY} if self.data is None else self.data,
        )


@pytest.fixture
def fake(monkeypatch):
    def install(status="ok", data=None):
        runs = FakeRunner(status, data)
        monkeypatch.setattr(runner, "run_playbook", runs)
        return runs

    return install


def test_hosts_are_deduplicated_in_order(cluster):
    assert nodes.check_removable_hosts(cluster, ["gpu03", "gpu02", "gpu03"]) == ["gpu03", "gpu02"]


@pytest.mark.parametrize(
    "hosts, words",
    [
        (["gpu3"], ["gpu3 is not in", "gpu03", "nothing was changed"]),
        (["ctl01"], ["ctl01 is the controller", "compute nodes only"]),
        (["db01"], ["db01 is the slurmdbd host"]),
        (["mon01"], ["mon01 is the monitoring host"]),  # also a compute node: still refused
        (["login01"], ["login01 is a login node"]),
        (["gpu01", "gpu02", "gpu03"], ["would leave no compute node"]),
    ],
)
def test_bad_hosts_are_refused(write_inventory, hosts, words):
    # mon01 is a compute node too; without it there, removing gpu01-03 leaves none
    text = INVENTORY.replace("        gpu03:\n        mon01:\n", "        gpu03:\n") if len(hosts) == 3 else INVENTORY
    cluster = inv.load_cluster(write_inventory(text))
    with pytest.raises(InputError) as error:
        nodes.check_removable_hosts(cluster, hosts)
    for word in words:
        assert word in error.value.render(), error.value.render()


def test_the_controller_with_the_default_groups_is_refused(write_inventory):
    cluster = inv.load_cluster(write_inventory())  # slurm_dbd and monitoring default to the controller
    with pytest.raises(InputError) as error:
        nodes.check_removable_hosts(cluster, ["ctl01"])
    assert "the controller and the slurmdbd host and the monitoring host" in error.value.message


def test_every_bad_host_is_named(cluster):
    with pytest.raises(InputError) as error:
        nodes.check_removable_hosts(cluster, ["gpu03", "nope", "ctl01"])
    text = error.value.render()
    assert "Cannot remove 2 of the hosts" in text and "nope" in text and "ctl01" in text


def test_targets_are_the_nodes_the_controller_monitoring_and_the_other_members(cluster):
    assert nodes.remove_target_hosts(cluster, ["gpu03"]) == ["gpu03", "ctl01", "mon01", "db01", "login01", "gpu01", "gpu02"]


def test_request_names_the_nodes_and_the_drain_options_only_when_given(cluster):
    request = nodes.build_remove_request(cluster, ["gpu03", "gpu03"], extra_vars={"a": 1}, forks=4)
    assert (request.command, request.playbook, request.limit, request.forks) == ("node-remove", "remove_node.yml", None, 4)
    assert request.extra_vars == {"a": 1, "deepops_removed_nodes": ["gpu03"]} and not request.check
    assert request.playbook_path().is_file()
    forced = nodes.build_remove_request(cluster, ["gpu03"], timeout=0, force=True, check=True)
    assert forced.extra_vars == {"deepops_removed_nodes": ["gpu03"], "slurm_remove_timeout": 0, "slurm_remove_force": True}
    assert forced.check


def test_the_nodes_cannot_be_overridden_with_extra_vars(cluster):
    request = nodes.build_remove_request(cluster, ["gpu03"], extra_vars={"deepops_removed_nodes": ["gpu01"]})
    assert request.extra_vars["deepops_removed_nodes"] == ["gpu03"]


def test_the_option_names_are_the_slurm_role_defaults():
    import yaml
    from pathlib import Path

    defaults = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles/slurm/defaults/main.yml").read_text())
    assert {nodes.TIMEOUT_VAR, nodes.FORCE_VAR} <= set(defaults)


def test_notes_name_unreachable_nodes_requeued_and_cancelled_jobs_and_the_inventory_edit():
    result = RunResult(run_id="r", command="node-remove", playbook="remove_node.yml", inventory="inv.yml", start="s",
                       artifacts="a", status="ok",
                       data={nodes.SUMMARY_KEY: {**SUMMARY, "unreachable": ["gpu03"]}})
    notes = "\n".join(nodes.removal_notes(result, ["gpu03"]))
    assert "gpu03 was unreachable: removed from the cluster" in notes
    assert "Requeued (--force): jobs 41" in notes and "Cancelled (--force; they could not be requeued): jobs 42" in notes
    assert "delete it from slurm_compute in inv.yml" in notes
    failed = RunResult(run_id="r", command="node-remove", playbook="p", inventory="inv.yml", start="s", artifacts="a",
                       status="failed")
    assert nodes.removal_notes(failed, ["gpu03"]) == [
        "gpu03 not removed (see the failure above); the inventory still lists them."
    ]


def test_cli_removes_a_node(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(
        main, ["node", "remove", "gpu03", "-i", str(write_inventory(INVENTORY)), "--json", "--yes", "--force"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["removed"] == ["gpu03"] and data["hosts"]["gpu03"]["changed"] == 3
    assert any("Cancelled" in note for note in data["notes"])
    request = runs.requests[0]
    assert request.playbook == "remove_node.yml" and request.extra_vars["slurm_remove_force"] is True
    assert "Removing gpu03; running on: gpu03, ctl01, mon01" in result.stderr


def test_cli_summary_says_to_edit_the_inventory(write_inventory, fake):
    fake()
    result = CliRunner().invoke(main, ["node", "remove", "gpu03", "-i", str(write_inventory(INVENTORY)), "--yes"])
    assert result.exit_code == 0, result.output
    assert "Now delete it from slurm_compute" in result.stderr


def test_cli_check_mode_needs_no_confirmation_and_removes_nothing(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(main, ["node", "remove", "gpu03", "-i", str(write_inventory(INVENTORY)), "--check", "--json"])
    assert result.exit_code == 0, result.output
    assert runs.requests[0].check and json.loads(result.stdout)["removed"] == []


def test_cli_failed_run_exits_1(write_inventory, fake):
    fake(status="failed")
    result = CliRunner().invoke(main, ["node", "remove", "gpu03", "-i", str(write_inventory(INVENTORY)), "--yes"])
    assert result.exit_code == 1
    assert "not removed" in result.stderr


def test_cli_without_yes_and_no_terminal_refuses(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(main, ["node", "remove", "gpu03", "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 2 and "--yes" in result.output
    assert runs.requests == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["gpu09"], ["gpu09 is not in"]),
        (["ctl01"], ["ctl01 is the controller"]),
        (["login01"], ["login01 is a login node"]),
        (["gpu03", "gpu02", "gpu01", "mon01"], ["mon01 is the monitoring host"]),
        ([], ["Missing argument"]),
        (["gpu03", "--timeout", "-1"], ["--timeout"]),
        (["gpu03", "-e", "bad"], ["bad"]),
    ],
)
def test_cli_bad_input_exits_2_and_runs_nothing(write_inventory, fake, args, words):
    runs = fake()
    result = CliRunner().invoke(main, ["node", "remove", *args, "--yes", "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.output, result.output
    assert runs.requests == []


def test_node_remove_keeps_the_remaining_nodes_recorded_definitions(tmp_path):
    """A node remove (the removed gpu05 is out of deepops_slurm_compute; its targets hold
    every member) reads the facts only of the compute nodes without a record from the
    last deploy, and warns about none: the others keep their definitions."""
    targets = ["gpu05", "ctl01", "gpu01", "gpu02", "gpu03", "gpu04"]
    assert computes_read_by_the_controller(tmp_path, targets, "deepops_remove_node_targets") == {
        "read": ["gpu03", "gpu04"], "warn": []}
