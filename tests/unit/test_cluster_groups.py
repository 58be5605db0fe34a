"""Groups that default to others (plugins/module_utils/cluster_groups.py, playbooks/groups.yml)
and the hosts each entry playbook's plays run on, add_node.yml's narrowing included.

The playbook tests run a stand-in of an entry playbook for real on localhost
(every host has connection local): groups.yml and add_node's target check
exactly as shipped, and in place of each component play a play with the
same ``hosts:`` and ``vars:`` whose only task records where it ran (with
set_stats, read back from the run's stats). So they exercise the real host
expressions, but install nothing.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleUndefinedVariable

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups
from deepops_py import inventory as inv
from deepops_py import nodes, runner
from deepops_py.errors import InputError
from deepops_py.progress import SilentProgress

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
IMPORT_KEY = "ansible.builtin.import_playbook"
# Imported as they are: they only check input and build in-memory groups on localhost.
AS_SHIPPED = ("groups.yml", "components/add_node_targets.yml", "components/remove_node_targets.yml",
              "components/upgrade_targets.yml")
# The inventory check reads the shipped role specs; test_playbooks.py covers it.
LEFT_OUT = ("validate_inventory.yml",)

DBD_PLAY = "Slurm | Accounting database"
CONTROLLER_PLAY = "Slurm | Controller"
COMPUTE_PLAY = "Slurm | Compute nodes"
MONITORING_PLAY = "Monitoring | Prometheus, Alertmanager and Grafana"
HOSTS_FILE_PLAY = "Hosts file | /etc/hosts of the other members"

TWO_CONTROLLERS = {
    "slurm_controller": ["ctl01", "ctl02"],
    "slurm_compute": ["gpu01", "gpu02", "gpu03"],
    "slurm_login": ["login01"],
}


# --------------------------------------------------------------------------
# the rule


def _defaulting(resolved: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: hosts for name, hosts in resolved.items() if name in cluster_groups.RESOLVED.values()}


def test_dbd_and_monitoring_default_to_the_first_controller_only():
    assert _defaulting(cluster_groups.resolved_groups(TWO_CONTROLLERS)) == {
        "deepops_slurm_dbd": ["ctl01"],
        "deepops_monitoring": ["ctl01"],
    }


def test_groups_given_in_the_inventory_are_kept():
    groups = {**TWO_CONTROLLERS, "slurm_dbd": ["db01", "db02"], "monitoring": ["mon01"]}
    assert _defaulting(cluster_groups.resolved_groups(groups)) == {
        "deepops_slurm_dbd": ["db01", "db02"],
        "deepops_monitoring": ["mon01"],
    }


def test_empty_groups_default_and_nothing_else_changes():
    groups = {**TWO_CONTROLLERS, "slurm_dbd": [], "gpu_h100": ["gpu01"]}
    filled = cluster_groups.with_defaults(groups)
    assert filled["slurm_dbd"] == ["ctl01"] and filled["monitoring"] == ["ctl01"]
    assert {name: filled[name] for name in groups if name != "slurm_dbd"} == {
        name: hosts for name, hosts in groups.items() if name != "slurm_dbd"
    }
    assert "slurm_login" in filled and filled["slurm_login"] == ["login01"]  # login defaults to nothing
    assert cluster_groups.with_defaults({"slurm_compute": ["gpu01"]})["slurm_dbd"] == []  # no controller: nothing


def test_the_filter_applies_the_same_rule():
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import FilterModule

    resolved = FilterModule().filters()["resolved_groups"]
    assert resolved(TWO_CONTROLLERS) == cluster_groups.resolved_groups(TWO_CONTROLLERS)
    assert resolved(TWO_CONTROLLERS, "gpu03") == cluster_groups.resolved_groups(TWO_CONTROLLERS, ["gpu03"])


ALL = ["ctl01", "ctl02", "login01", "gpu01", "gpu02", "gpu03"]


@pytest.mark.parametrize("removed", [["gpu03"], "gpu03", " gpu03 ,, gpu03", ("gpu03",)])
def test_removed_nodes_leave_the_members_and_the_compute_nodes_only(removed):
    groups = {**TWO_CONTROLLERS, "all": ALL}
    resolved = cluster_groups.resolved_groups(groups, removed)
    assert resolved["deepops_members"] == ["ctl01", "ctl02", "login01", "gpu01", "gpu02"]
    assert resolved["deepops_slurm_compute"] == ["gpu01", "gpu02"]
    # the groups that default to others do not move, and the inventory's groups are untouched
    assert _defaulting(resolved) == _defaulting(cluster_groups.resolved_groups(groups))
    assert groups["slurm_compute"] == ["gpu01", "gpu02", "gpu03"]


def test_without_removed_nodes_the_members_are_the_whole_inventory():
    groups = {**TWO_CONTROLLERS, "all": ALL}
    for removed in (None, [], ""):
        resolved = cluster_groups.resolved_groups(groups, removed)
        assert resolved["deepops_members"] == ALL
        assert resolved["deepops_slurm_compute"] == TWO_CONTROLLERS["slurm_compute"]
    # no "all" (deepops_py's own groups): the union of the groups, in order
    assert cluster_groups.members(TWO_CONTROLLERS, ["gpu01"])["deepops_members"] == [
        "ctl01", "ctl02", "gpu02", "gpu03", "login01"
    ]


def test_removed_names_filter_rejects_a_mapping():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import FilterModule

    names = FilterModule().filters()["removed_names"]
    assert names("gpu02,gpu03") == ["gpu02", "gpu03"]
    with pytest.raises(AnsibleFilterError):
        names({"gpu03": 1})


def test_roles_list_members_through_the_shared_groups_only():
    """What a role renders about the cluster (slurm.conf nodes, gres.conf, partitions, Prometheus
    targets, /etc/hosts) comes from deepops_slurm_compute / deepops_members, so a removal
    (and nothing else) changes it."""
    wanted = {
        "roles/slurm/vars/main.yml": "_slurm_computes: \"{{ groups['deepops_slurm_compute'] | default([]) }}\"",
        "roles/prometheus/vars/main.yml": "_prometheus_computes: \"{{ groups['deepops_slurm_compute'] | default([]) }}\"",
    }
    for path, line in wanted.items():
        assert line in (REPO / path).read_text(), path
    for path in ("roles/prometheus/vars/main.yml", "roles/common/vars/main.yml"):
        text = (REPO / path).read_text()
        assert "groups['deepops_members']" in text and "groups['all']" not in text, path
    # The /etc/hosts block is rendered from common's vars (_common_hosts_block).
    hosts_task = (REPO / "roles/common/tasks/hosts.yml").read_text()
    assert "block: \"{{ _common_hosts_block }}\"" in hosts_task and "groups['all']" not in hosts_task


# --------------------------------------------------------------------------
# the plays, run for real on localhost


def _inventory(groups: dict[str, list[str]]) -> str:
    data = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {name: {"hosts": {host: None for host in hosts}} for name, hosts in groups.items()},
        }
    }
    return yaml.safe_dump(data, sort_keys=False)


def _stand_in(entry: str) -> tuple[list[dict], list[str]]:
    """The entry playbook with each component play replaced by one that records where it ran."""
    plays, names = [], []
    for item in yaml.safe_load((PLAYBOOKS / entry).read_text()):
        target = item.get(IMPORT_KEY)
        assert target is not None, f"{entry}: {item.get('name')!r} is not an import"
        if target in LEFT_OUT:
            continue
        if target in AS_SHIPPED:
            plays.append({"name": item["name"], IMPORT_KEY: str(PLAYBOOKS / target)})
            continue
        for play in yaml.safe_load((PLAYBOOKS / target).read_text()):
            index = len(names)
            names.append(play["name"])
            plays.append({
                "name": play["name"],
                "hosts": play["hosts"],
                "gather_facts": False,
                "vars": {**play.get("vars", {}), **item.get("vars", {})},
                "tasks": [{
                    "name": "Record where this play runs",
                    "ansible.builtin.set_stats": {"data": {f"ran_{index}": ["{{ inventory_hostname }}"]}},
                }],
            })
    return plays, names


@pytest.fixture
def run_entry(tmp_path, monkeypatch):
    if shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("ansible-playbook is not installed beside this Python: ansible-core, a dependency of deepops, is missing")
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))

    def run(entry: str, groups: dict[str, list[str]], limit: str | None = None, **extra_vars):
        """Run the stand-in; return ({play name: hosts it ran on}, the run's result)."""
        plays, names = _stand_in(entry)
        playbook = tmp_path / f"stand-in-{len(list(tmp_path.glob('stand-in-*')))}-{entry}"
        playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(_inventory(groups))
        request = runner.RunRequest(
            command="test", playbook=str(playbook), inventory=inventory, limit=limit, extra_vars=extra_vars,
            content_dir=REPO,
        )
        result = runner.run_playbook(request, progress=SilentProgress())
        # sorted: a task's results arrive in the order the hosts finish
        ran = {name: sorted((result.data or {}).get(f"ran_{index}", [])) for index, name in enumerate(names)}
        return ran, result

    return run


def test_site_with_two_controllers_and_no_dbd_group_puts_slurmdbd_on_the_first_only(run_entry):
    ran, result = run_entry("site.yml", TWO_CONTROLLERS)
    assert result.ok, result.error or result.hosts
    assert ran[DBD_PLAY] == ["ctl01"]  # slurmdbd and MariaDB: never on the backup controller
    assert ran[MONITORING_PLAY] == ["ctl01"]
    assert ran[CONTROLLER_PLAY] == ["ctl01", "ctl02"]
    assert ran[COMPUTE_PLAY] == ["gpu01", "gpu02", "gpu03"]
    assert ran["Slurm | Login nodes"] == ["login01"]
    assert result.hosts["localhost"].changed == 0  # in-memory groups only


def test_site_with_dbd_and_monitoring_groups_uses_them(run_entry):
    ran, result = run_entry("site.yml", {**TWO_CONTROLLERS, "slurm_dbd": ["db01"], "monitoring": ["mon01"]})
    assert result.ok, result.error or result.hosts
    assert ran[DBD_PLAY] == ["db01"]
    assert ran[MONITORING_PLAY] == ["mon01"]
    assert "db01" in ran["Slurm | MUNGE authentication"] and "mon01" not in ran["Slurm | MUNGE authentication"]


def test_groups_play_runs_under_a_limit_without_localhost(run_entry):
    """deepops deploy --limit ctl01,gpu01 still gets complete groups, built from the whole inventory."""
    ran, result = run_entry("site.yml", {**TWO_CONTROLLERS, "slurm_dbd": ["db01"]}, limit="ctl01,gpu01")
    assert result.ok, result.error or result.hosts
    assert ran[DBD_PLAY] == [] and ran[MONITORING_PLAY] == ["ctl01"] and ran[COMPUTE_PLAY] == ["gpu01"]
    assert set(result.hosts) == {"ctl01", "gpu01"}


def test_add_node_runs_the_stack_on_the_new_node_the_servers_and_only_hosts_elsewhere(run_entry, write_inventory,
                                                                                      test_specs):
    groups = {**TWO_CONTROLLERS, "slurm_dbd": ["db01"], "monitoring": ["mon01"]}
    ran, result = run_entry("add_node.yml", groups, deepops_new_nodes=["gpu03"])
    assert result.ok, result.error or result.hosts
    assert ran["Common | Prepare every cluster node"] == ["ctl01", "ctl02", "db01", "gpu03", "login01", "mon01"]
    for name, hosts in ran.items():
        if name.startswith("NVIDIA"):
            assert hosts == ["gpu03"], name
    assert ran[COMPUTE_PLAY] == ["gpu03"]
    assert ran[CONTROLLER_PLAY] == ["ctl01", "ctl02"]
    assert ran[DBD_PLAY] == ["db01"]
    assert ran["Slurm | Login nodes"] == ["login01"]  # their slurm.conf names the new node (22.05)
    assert ran["Slurm | Wait until every compute node is up"] == ["ctl01"]
    assert ran[MONITORING_PLAY] == ["mon01"]  # Prometheus scrapes the new node from now on
    # The other members run the /etc/hosts play and nothing else.
    assert ran[HOSTS_FILE_PLAY] == ["gpu01", "gpu02"]
    for name, hosts in ran.items():
        if name != HOSTS_FILE_PLAY:
            assert not {"gpu01", "gpu02"} & set(hosts), name
    # deepops shows the same hosts before it runs
    path = write_inventory(_inventory(groups))
    cluster = inv.load_cluster(path)
    assert set(nodes.target_hosts(cluster, ["gpu03"])) == set(result.hosts) - {"localhost"}


def test_add_node_takes_comma_separated_names(run_entry):
    ran, result = run_entry("add_node.yml", TWO_CONTROLLERS, deepops_new_nodes="gpu02, gpu03")
    assert result.ok, result.error or result.hosts
    assert ran[COMPUTE_PLAY] == ["gpu02", "gpu03"]
    assert ran[DBD_PLAY] == ["ctl01"]
    assert ran[HOSTS_FILE_PLAY] == ["gpu01"]


@pytest.mark.parametrize(
    "new_nodes, words",
    [
        (None, ["Set deepops_new_nodes", "found nothing"]),
        (["login01"], ["Not in slurm_compute: login01", "Add the new nodes to slurm_compute"]),
        (["gpu03", "gpu09"], ["Not in the inventory: gpu09"]),
    ],
)
def test_add_node_refuses_hosts_that_are_not_compute_nodes_before_touching_any(run_entry, new_nodes, words):
    extra = {} if new_nodes is None else {"deepops_new_nodes": new_nodes}
    ran, result = run_entry("add_node.yml", TWO_CONTROLLERS, **extra)
    assert not result.ok
    assert set(result.hosts) == {"localhost"} and result.failed_hosts == ["localhost"]
    for word in words:
        assert word in (result.hosts["localhost"].message or ""), result.hosts["localhost"].message
    assert all(hosts == [] for hosts in ran.values()), ran


UPGRADE_PLAYS = {
    "dump": "Upgrade | Dump the accounting database before slurmdbd is touched",
    "drain": "Upgrade | Drain the step's compute nodes and wait for their jobs",
    "reboot": "Upgrade | Reboot the compute nodes where the updated packages ask for it",
    "check": "Upgrade | Check the updated compute nodes, then resume them",
}


def test_an_upgrade_step_of_servers_runs_slurm_in_schedmds_order_on_them_only(run_entry, write_inventory):
    from deepops_py import upgrade

    groups = {**TWO_CONTROLLERS, "slurm_dbd": ["db01"], "monitoring": ["mon01"]}
    cluster = inv.load_cluster(write_inventory(_inventory(groups)))
    servers, *batches = upgrade.plan_steps(cluster, 2)
    assert [step["hosts"] for step in batches] == [["gpu01", "gpu02"], ["gpu03"]]
    ran, result = run_entry("upgrade.yml", groups, deepops_upgrade_hosts=servers["hosts"])
    assert result.ok, result.error or result.hosts
    assert set(result.hosts) - {"localhost"} == {"db01", "ctl01", "ctl02", "login01", "mon01"}
    assert ran[UPGRADE_PLAYS["dump"]] == ["db01"]
    assert ran[DBD_PLAY] == ["db01"] and ran[CONTROLLER_PLAY] == ["ctl01", "ctl02"] and ran[COMPUTE_PLAY] == []
    assert ran["Slurm | Login nodes"] == ["login01"] and ran[MONITORING_PLAY] == ["mon01"]
    names = list(ran)
    assert names.index(DBD_PLAY) < names.index(CONTROLLER_PLAY) < names.index(COMPUTE_PLAY)  # SchedMD's order
    assert ran[UPGRADE_PLAYS["reboot"]] == []  # no compute node in the step: none drained, none rebooted


def test_an_upgrade_batch_runs_on_its_compute_nodes_and_drains_from_the_first_controller(run_entry):
    ran, result = run_entry("upgrade.yml", TWO_CONTROLLERS, deepops_upgrade_hosts="gpu01, gpu02")
    assert result.ok, result.error or result.hosts
    assert set(result.hosts) == {"localhost", "ctl01", "gpu01", "gpu02"}  # gpu03 and the others untouched
    assert ran[UPGRADE_PLAYS["drain"]] == ["ctl01"] and ran[UPGRADE_PLAYS["check"]] == ["ctl01"]
    assert ran[UPGRADE_PLAYS["dump"]] == [] and ran[CONTROLLER_PLAY] == [] and ran[DBD_PLAY] == []
    assert ran[COMPUTE_PLAY] == ["gpu01", "gpu02"] and ran[UPGRADE_PLAYS["reboot"]] == ["gpu01", "gpu02"]
    assert ran["Common | Prepare every cluster node"] == ["gpu01", "gpu02"]


@pytest.mark.parametrize("hosts, words", [
    (None, ["Set deepops_upgrade_hosts", "found nothing"]),
    (["gpu09"], ["not in the cluster: gpu09"]),
])
def test_an_upgrade_step_refuses_unknown_hosts_before_touching_any(run_entry, hosts, words):
    extra = {} if hosts is None else {"deepops_upgrade_hosts": hosts}
    ran, result = run_entry("upgrade.yml", TWO_CONTROLLERS, **extra)
    assert not result.ok and set(result.hosts) == {"localhost"}
    for word in words:
        assert word in (result.hosts["localhost"].message or ""), result.hosts["localhost"].message
    assert all(hosts == [] for hosts in ran.values()), ran


REMOVE_PLAYS = {
    "drain": "Remove node | Drain the nodes and wait for their jobs",
    "stop": "Remove node | Stop slurmd and the exporters on the nodes",
    "controller": "Remove node | slurm.conf and gres.conf without the nodes",
    "login": "Remove node | The login nodes' slurm.conf without the nodes",
    "prometheus": "Remove node | Prometheus targets without the nodes",
    "hosts": HOSTS_FILE_PLAY,
}


def test_remove_node_runs_on_the_node_the_controllers_monitoring_and_members(run_entry, write_inventory):
    groups = {**TWO_CONTROLLERS, "monitoring": ["mon01"]}
    ran, result = run_entry("remove_node.yml", groups, deepops_removed_nodes=["gpu03"])
    assert result.ok, result.error or result.hosts
    assert ran[REMOVE_PLAYS["drain"]] == ["ctl01"]  # the first controller only
    assert ran[REMOVE_PLAYS["stop"]] == ["gpu03"]  # only the removed node stops anything
    assert ran[REMOVE_PLAYS["controller"]] == ["ctl01", "ctl02"]
    assert ran[REMOVE_PLAYS["login"]] == ["login01"]
    assert ran[REMOVE_PLAYS["prometheus"]] == ["mon01"]
    assert ran[REMOVE_PLAYS["hosts"]] == ["ctl01", "ctl02", "gpu01", "gpu02", "login01", "mon01"]
    assert result.hosts["localhost"].changed == 0  # in-memory groups only
    path = write_inventory(_inventory(groups))
    assert set(nodes.remove_target_hosts(inv.load_cluster(path), ["gpu03"])) == set(result.hosts) - {"localhost"}


@pytest.mark.parametrize(
    "removed, words",
    [
        (None, ["Set deepops_removed_nodes", "found nothing"]),
        (["gpu09"], ["Not in the inventory: gpu09", "Nothing was changed"]),
        (["login01"], ["Not in slurm_compute: login01"]),
        (["ctl01"], ["Not in slurm_compute: ctl01"]),
        (["gpu01", "gpu02", "gpu03"], ["No compute node would be left"]),
    ],
)
def test_remove_node_refuses_bad_names_before_any_other_play(run_entry, removed, words):
    extra = {} if removed is None else {"deepops_removed_nodes": removed}
    ran, result = run_entry("remove_node.yml", TWO_CONTROLLERS, **extra)
    assert not result.ok
    assert set(result.hosts) == {"localhost"} and result.failed_hosts == ["localhost"]
    for word in words:
        assert word in (result.hosts["localhost"].message or ""), result.hosts["localhost"].message
    assert all(hosts == [] for hosts in ran.values()), ran


def test_remove_node_refuses_a_compute_node_that_also_serves(run_entry):
    groups = {**TWO_CONTROLLERS, "slurm_compute": ["ctl01", "gpu01"]}
    ran, result = run_entry("remove_node.yml", groups, deepops_removed_nodes="ctl01")
    assert not result.ok and set(result.hosts) == {"localhost"}
    assert "Also a controller, slurmdbd, monitoring, login or NFS server host: ctl01" in result.hosts["localhost"].message
    assert all(hosts == [] for hosts in ran.values()), ran


def test_remove_node_refuses_a_compute_node_that_serves_nfs(run_entry, write_inventory):
    groups = {**TWO_CONTROLLERS, "nfs_server": ["gpu01"]}
    ran, result = run_entry("remove_node.yml", groups, deepops_removed_nodes="gpu01")
    assert not result.ok and "NFS server host: gpu01" in result.hosts["localhost"].message
    assert all(hosts == [] for hosts in ran.values()), ran
    with pytest.raises(InputError, match="gpu01 is an NFS server"):
        nodes.check_removable_hosts(inv.load_cluster(write_inventory(_inventory(groups))), ["gpu01"])


STORAGE_PLAYS = ("Storage | NFS exports of the nfs_server hosts", "Storage | Shared mounts on every cluster member")


def test_site_exports_from_the_nfs_server_then_mounts_everywhere_then_makes_the_users(run_entry):
    ran, result = run_entry("site.yml", {**TWO_CONTROLLERS, "nfs_server": ["nfs01"]})
    assert result.ok, result.error or result.hosts
    assert ran[STORAGE_PLAYS[0]] == ["nfs01"]
    assert ran[STORAGE_PLAYS[1]] == ["ctl01", "ctl02", "gpu01", "gpu02", "gpu03", "login01", "nfs01"]
    assert ran["Users | Ordinary users, alike on every cluster node"] == ran[STORAGE_PLAYS[1]]
    order = list(ran)
    assert order.index("Common | Prepare every cluster node") < order.index(STORAGE_PLAYS[0]) < order.index(STORAGE_PLAYS[1])
    assert order.index(STORAGE_PLAYS[1]) < order.index("Users | Ordinary users, alike on every cluster node") < order.index(
        "Slurm | Check every Slurm node before any change")


def test_site_without_an_nfs_server_runs_the_export_play_nowhere_and_warns_not(run_entry):
    ran, result = run_entry("site.yml", TWO_CONTROLLERS)
    assert result.ok, result.error or result.hosts
    assert ran[STORAGE_PLAYS[0]] == []
    assert not any("nfs_server" in warning for host in result.hosts.values() for warning in host.warnings)


def test_add_node_exports_to_the_new_node_from_the_nfs_server(run_entry, write_inventory):
    groups = {**TWO_CONTROLLERS, "nfs_server": ["nfs01"]}
    ran, result = run_entry("add_node.yml", groups, deepops_new_nodes=["gpu03"])
    assert result.ok, result.error or result.hosts
    assert ran[STORAGE_PLAYS[0]] == ["nfs01"]
    assert ran[STORAGE_PLAYS[1]] == ["ctl01", "ctl02", "gpu03", "login01", "nfs01"]
    assert set(nodes.target_hosts(inv.load_cluster(write_inventory(_inventory(groups))), ["gpu03"])) == set(result.hosts) - {"localhost"}


def test_cluster_address_is_the_pinned_one_else_the_default_ipv4_else_unknown():
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import cluster_address

    facts = {"ansible_facts": {"default_ipv4": {"address": "10.0.0.5"}}}
    assert cluster_address({"common_hosts_address": "192.168.1.7", **facts}) == "192.168.1.7"
    assert cluster_address({"common_hosts_address": "", **facts}) == "10.0.0.5"
    assert cluster_address({"ansible_facts": {}}) == cluster_address({}) == cluster_address(None) == ""
    assert cluster_address({"ansible_facts": {"default_ipv4": {}}}) == ""


def test_hosts_file_addresses_reads_names_and_aliases_the_first_line_winning():
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import hosts_file_addresses

    text = "10.0.0.1 ctl01 ctl01.example  # the controller\n# 10.0.0.9 gpu09\n\n10.0.0.2\tgpu01\n10.0.0.3 gpu01\n"
    assert hosts_file_addresses(text) == {"ctl01": "10.0.0.1", "ctl01.example": "10.0.0.1", "gpu01": "10.0.0.2"}
    assert hosts_file_addresses("") == hosts_file_addresses(None) == {}


# --------------------------------------------------------------------------
# the NVIDIA stack's hosts

class NotYet(dict):
    """A host whose variables name facts gathered later: any read fails as Ansible's would."""

    def get(self, key, default=None):
        raise AnsibleUndefinedVariable("'ansible_facts' is undefined")

    def __bool__(self):
        return True


NVIDIA_PLAYS = [play["name"] for play in yaml.safe_load((PLAYBOOKS / "components" / "nvidia.yml").read_text())]
ALL_OFF = {name: False for name in cluster_groups.NVIDIA_STACK_SWITCHES}


def test_the_nvidia_stack_is_the_compute_members_with_any_switch_on():
    computes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    given = {"gpu01": ALL_OFF, "gpu02": {**ALL_OFF, "gpu_settings_enabled": True}, "gpu03": {"cuda_enabled": False}}
    assert cluster_groups.nvidia_stack(computes, given) == ["gpu02", "gpu03", "gpu04"]
    assert cluster_groups.nvidia_stack([], given) == []


def test_each_switch_is_on_in_its_roles_defaults():
    """nvidia_stack counts a switch not given as on: what each role's defaults say."""
    for name in cluster_groups.NVIDIA_STACK_SWITCHES:
        role = name.removesuffix("_enabled")
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
        assert defaults[name] is True, name


def test_the_nvidia_stack_filter_reads_each_hosts_switches():
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import nvidia_stack_hosts

    hostvars = {"gpu01": {**ALL_OFF, "cuda_enabled": "no"}, "gpu02": {**ALL_OFF, "cuda_enabled": "yes"},
                "gpu03": NotYet(), "gpu04": {}}
    assert nvidia_stack_hosts(["gpu01", "gpu02", "gpu03", "gpu04"], hostvars) == ["gpu02", "gpu03", "gpu04"]
    for bad in ("gpu01", None):
        with pytest.raises(Exception, match="nvidia_stack_hosts expects"):
            nvidia_stack_hosts(bad, hostvars)


def test_site_runs_the_nvidia_plays_only_where_the_stack_is_switched_on(run_entry):
    ran, result = run_entry("site.yml", TWO_CONTROLLERS)
    assert result.ok, result.error or result.hosts
    assert all(ran[play] == ["gpu01", "gpu02", "gpu03"] for play in NVIDIA_PLAYS), ran
    ran, result = run_entry("site.yml", TWO_CONTROLLERS, **ALL_OFF)
    assert result.ok, result.error or result.hosts
    assert all(ran[play] == [] for play in NVIDIA_PLAYS), ran
    assert ran[COMPUTE_PLAY] == ["gpu01", "gpu02", "gpu03"]
    # No warning about a group that does not exist.
    assert not any("nvidia" in warning for host in result.hosts.values() for warning in host.warnings)


def test_add_node_runs_the_nvidia_plays_on_the_new_node_only(run_entry):
    ran, result = run_entry("add_node.yml", TWO_CONTROLLERS, deepops_new_nodes=["gpu03"])
    assert result.ok, result.error or result.hosts
    assert all(ran[play] == ["gpu03"] for play in NVIDIA_PLAYS), ran


# --------------------------------------------------------------------------
# the nodes whose MIG layout deepops manages

MIG_PLAY = "MIG | Layouts of the GPUs, draining the nodes that change"


def test_mig_managed_is_the_compute_members_whose_layout_is_not_unmanaged():
    layouts = {"gpu01": "all-1g.10gb", "gpu02": "unmanaged", "gpu03": None, "gpu05": {"all": "disabled"}}
    assert cluster_groups.mig_managed(["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"], layouts) == ["gpu01", "gpu05"]


def test_unmanaged_is_the_mig_roles_default():
    defaults = yaml.safe_load((REPO / "roles" / "mig" / "defaults" / "main.yml").read_text())
    assert defaults["mig_layout"] == cluster_groups.MIG_UNMANAGED


def test_the_mig_managed_filter_reads_each_hosts_layout():
    from ansible_collections.deepops.cluster.plugins.filter.cluster_groups import mig_managed_hosts

    hostvars = {"gpu01": {"mig_layout": "disabled"}, "gpu02": {}, "gpu03": NotYet(), "gpu04": {"mig_layout": "unmanaged"}}
    assert mig_managed_hosts(["gpu01", "gpu02", "gpu03", "gpu04"], hostvars) == ["gpu01", "gpu03"]
    with pytest.raises(Exception, match="mig_managed_hosts expects"):
        mig_managed_hosts("gpu01", hostvars)


def test_site_runs_the_mig_play_only_where_a_layout_is_managed(run_entry):
    ran, result = run_entry("site.yml", TWO_CONTROLLERS)
    assert result.ok, result.error or result.hosts
    assert ran[MIG_PLAY] == []
    ran, result = run_entry("site.yml", TWO_CONTROLLERS, mig_layout="all-1g.10gb")
    assert result.ok, result.error or result.hosts
    assert ran[MIG_PLAY] == ["gpu01", "gpu02", "gpu03"]


def test_the_resume_step_counts_unmanaged_members_as_finished():
    """The MIG play skips unmanaged nodes; the resume step may still release our drain on them."""
    import jinja2

    expression = yaml.safe_load((REPO / "roles/mig/vars/main.yml").read_text())["_mig_finished_hosts"]
    env = jinja2.Environment()
    env.filters["unique"] = lambda items: list(dict.fromkeys(items))
    env.filters["extract"] = lambda key, container: container[key]

    def finished(groups: dict, hostvars: dict) -> list:
        return sorted(env.from_string(expression).render(groups=groups, hostvars=hostvars).strip()
                      .strip("[]").replace("'", "").replace(" ", "").split(",") if groups else [])

    hostvars = {"ctl01": {"inventory_hostname": "ctl01"}, "gpu01": {"inventory_hostname": "gpu01", "mig_changed": True},
                "gpu02": {"inventory_hostname": "gpu02"}, "gpu03": {"inventory_hostname": "gpu03"}}
    groups = {"all": list(hostvars), "deepops_slurm_compute": ["gpu01", "gpu02", "gpu03"], "deepops_mig_managed": ["gpu01", "gpu02"]}
    # gpu02: managed, and the role did not finish on it (it failed): it stays drained.
    assert finished(groups, hostvars) == ["gpu01", "gpu03"]
