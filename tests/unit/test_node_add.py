"""deepops node add: host checks, the hosts it targets, the request it makes, and the CLI (runner replaced).

What playbooks/add_node.yml does with the request is run for real in test_cluster_groups.py.
"""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from deepops_py import inventory as inv
from deepops_py import nodes, runner
from deepops_py.cli import main
from deepops_py.errors import InputError
from deepops_py.run_results import HostResult, RunResult
from local_playbook import REPO, run_local_playbook

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
    slurm_login:
      hosts:
        login01:
    slurm_compute:
      hosts:
        gpu01:
        gpu02:
        gpu03:
"""


@pytest.fixture
def cluster(write_inventory):
    return inv.load_cluster(write_inventory(INVENTORY))


class FakeRunner:
    def __init__(self, status="ok"):
        self.status, self.requests = status, []

    def __call__(self, request, json_output=False, **kwargs):
        self.requests.append(request)
        return RunResult(
            run_id="r2", command=request.command, playbook=request.playbook, inventory=str(request.inventory),
            start="s", artifacts="/tmp/a", status=self.status,
            hosts={"gpu03": HostResult("gpu03", ok=40, changed=12), "ctl01": HostResult("ctl01", ok=30, changed=2)},
        )


@pytest.fixture
def fake(monkeypatch):
    def install(status="ok"):
        runs = FakeRunner(status)
        monkeypatch.setattr(runner, "run_playbook", runs)
        return runs

    return install


def test_targets_are_new_hosts_then_the_servers_then_the_other_members(cluster):
    # monitoring defaults to the first controller; the other compute nodes get /etc/hosts only
    assert nodes.target_hosts(cluster, ["gpu03"]) == ["gpu03", "ctl01", "db01", "login01", "gpu01", "gpu02"]


def test_targets_without_separate_dbd_name_the_controller_once(write_inventory):
    cluster = inv.load_cluster(write_inventory())  # slurm_dbd and monitoring default to the controller
    assert nodes.target_hosts(cluster, ["gpu02", "gpu01"])[:3] == ["gpu02", "gpu01", "ctl01"]
    assert len(set(nodes.target_hosts(cluster, ["gpu02", "gpu01"]))) == len(nodes.target_hosts(cluster, ["gpu02", "gpu01"]))


def test_hosts_are_deduplicated_in_order(cluster):
    assert nodes.check_new_hosts(cluster, ["gpu03", "gpu02", "gpu03"]) == ["gpu03", "gpu02"]


def test_host_outside_slurm_compute_is_refused(cluster):
    with pytest.raises(InputError) as error:
        nodes.check_new_hosts(cluster, ["login01"])
    assert "login01 is not in slurm_compute in" in error.value.message
    assert "slurm_login" in error.value.message and "add it there first" in error.value.message


def test_unknown_host_is_refused_with_a_suggestion(cluster):
    with pytest.raises(InputError) as error:
        nodes.check_new_hosts(cluster, ["gpu3"])
    assert "gpu3 is not in" in error.value.message and "add it to slurm_compute there first" in error.value.message
    assert "did you mean gpu03" in error.value.message.replace("—", "")


def test_every_bad_host_is_named(cluster):
    with pytest.raises(InputError) as error:
        nodes.check_new_hosts(cluster, ["gpu03", "nope", "ctl01"])
    text = error.value.render()
    assert "Cannot add 2 of the hosts" in text and "nope" in text and "ctl01" in text


def test_request_runs_add_node_with_the_new_hosts_and_no_limit(cluster):
    request = nodes.build_request(cluster, ["gpu03", "gpu02", "gpu03"], extra_vars={"a": 1}, forks=5)
    assert (request.command, request.playbook, request.limit, request.forks) == ("node-add", "add_node.yml", None, 5)
    assert request.extra_vars == {"a": 1, "deepops_new_nodes": ["gpu03", "gpu02"]} and not request.check
    assert request.playbook_path().is_file()


def test_the_new_hosts_cannot_be_overridden_with_extra_vars(cluster):
    request = nodes.build_request(cluster, ["gpu03"], extra_vars={"deepops_new_nodes": ["gpu01", "gpu02"]})
    assert request.extra_vars["deepops_new_nodes"] == ["gpu03"]


def test_cli_adds_a_node(write_inventory, fake):
    runs = fake()
    result = CliRunner().invoke(main, ["node", "add", "gpu03", "-i", str(write_inventory(INVENTORY)), "--json", "-f", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hosts"]["gpu03"]["changed"] == 12
    request = runs.requests[0]
    assert (request.playbook, request.limit, request.forks) == ("add_node.yml", None, 3)
    assert request.extra_vars["deepops_new_nodes"] == ["gpu03"]
    assert "running on: gpu03, ctl01, db01" in result.stderr


def test_cli_failed_run_exits_1(write_inventory, fake):
    fake(status="failed")
    result = CliRunner().invoke(main, ["node", "add", "gpu03", "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 1


@pytest.mark.parametrize(
    "args, words",
    [
        (["login01"], ["login01 is not in slurm_compute", "add it there first"]),
        (["gpu09"], ["gpu09 is not in", "add it to slurm_compute there first"]),
        ([], ["Missing argument"]),
        (["gpu03", "-e", "bad"], ["bad"]),
    ],
)
def test_cli_bad_input_exits_2_and_runs_nothing(write_inventory, fake, args, words):
    runs = fake()
    result = CliRunner().invoke(main, ["node", "add", *args, "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.output
    assert runs.requests == []


def computes_read_by_the_controller(tmp_path, targets: list[str], group: str = "deepops_add_node_targets",
                                    ) -> dict[str, list[str]]:
    """The hosts whose facts tasks/controller.yml reads and warns about, with its own
    expressions and the role's vars, rendered by Ansible: gpu01 and gpu02 have records
    from the last deploy, gpu04 has none, none has facts (all outside the controller's play).
    TARGETS: the run's GROUP (deepops_add_node_targets: a node add), or no such group where empty."""
    controller = yaml.safe_load((REPO / "roles/slurm/tasks/controller.yml").read_text())
    # each loop with its task's own vars
    loops = {task["name"]: (task["loop"], task.get("vars", {})) for task in controller if "loop" in task}
    records = json.dumps({name: {"cpus": 8} for name in ("gpu01", "gpu02")})
    # The hosts join their groups in a play of their own: in the play that adds them they count as its hosts.
    grouping = {"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        *({"ansible.builtin.add_host": {"name": name, "groups": ["deepops_slurm_compute"]}}
          for name in ("gpu01", "gpu02", "gpu03", "gpu04")),
        *({"ansible.builtin.add_host": {"name": name, "groups": [group]}} for name in targets),
    ]}
    play = {
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(REPO / "roles/slurm/defaults/main.yml"), str(REPO / "roles/slurm/vars/main.yml")],
        "vars": {"__slurm_controller_reads": {"files": {"node_records": {"content": records}}}},
        "tasks": [
            *({"name": short, "ansible.builtin.debug": {"msg": loops[name][0]}, "vars": loops[name][1]}
              for short, name in (("read", "Slurm | Read facts of compute nodes outside this run"),
                                  ("warn", "Slurm | Warn about compute nodes known only from the last deploy"))),
        ],
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([grouping, play]))
    return {task["task"]["name"]: task["hosts"]["localhost"]["msg"]
            for task in run_local_playbook(playbook) if task["task"]["name"] in ("read", "warn")}


def test_node_add_keeps_the_other_nodes_recorded_definitions(tmp_path):
    """A node add reads the facts of the new node and of a compute node never
    deployed, not of the ones recorded by the last deploy (they keep their
    definitions), and warns about none of them."""
    assert computes_read_by_the_controller(tmp_path, ["gpu03"]) == {"read": ["gpu03", "gpu04"], "warn": []}


def test_a_run_outside_node_add_reads_every_compute_node_outside_it(tmp_path):
    """--limit: every compute node outside the run is read; a recorded one whose
    read brings no facts (unreachable) is the one warned about."""
    assert computes_read_by_the_controller(tmp_path, []) == {
        "read": ["gpu01", "gpu02", "gpu03", "gpu04"], "warn": ["gpu01", "gpu02"]}
