"""load_cluster's model, its agreement with Ansible's precedence, and resolve_inventory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from deepops_py import inventory as inv
from deepops_py.cli import main
from deepops_py.errors import InputError

pytestmark = pytest.mark.usefixtures("test_specs")

SITE_INVENTORY = """\
all:
  vars:
    ansible_user: admin
    slurm_port: 1
  children:
    slurm_controller:
      hosts:
        ctl01:
          ansible_host: 10.0.0.10
    slurm_compute:
      vars:
        slurm_port: 2
      hosts:
        gpu[01:04]:
      children:
        gpu_h100:
          vars:
            slurm_port: 3
          hosts:
            gpu01:
              ansible_port: 2201
            gpu02:
    slurm_login:
      hosts:
        login01:
          ansible_user: "{{ lookup('env', 'USER') }}"
"""

SITE_FILES = {
    "group_vars/all.yml": "ansible_become: true\nslurm_version: '23.11'\nslurm_port: 4\n",
    "group_vars/slurm_compute.yml": "ansible_ssh_common_args: -o ProxyJump=bastion\nslurm_port: 5\n",
    "group_vars/gpu_h100/main.yml": "slurm_port: 6\n",
    "group_vars/gpu_h100/keys.yml": "ansible_ssh_private_key_file: ~/.ssh/h100\n",
    "host_vars/gpu02.yaml": "slurm_port: 7\nansible_host: 10.0.0.12\n",
}


@pytest.fixture
def site(write_inventory) -> Path:
    return write_inventory(SITE_INVENTORY, SITE_FILES)


def test_hosts_groups_and_connection_fields(site: Path) -> None:
    cluster = inv.load_cluster(site)

    assert sorted(cluster.hosts) == ["ctl01", "gpu01", "gpu02", "gpu03", "gpu04", "login01"]
    assert cluster.groups["slurm_controller"] == ["ctl01"]
    assert sorted(cluster.groups["slurm_compute"]) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert sorted(cluster.groups["gpu_h100"]) == ["gpu01", "gpu02"]
    assert cluster.groups["slurm_dbd"] == ["ctl01"]  # defaults to the controller
    assert cluster.groups["monitoring"] == ["ctl01"]

    ctl = cluster.hosts["ctl01"]
    assert (ctl.address, ctl.port, ctl.user, ctl.become, ctl.private_key, ctl.ssh_common_args) == (
        "10.0.0.10", 22, "admin", True, None, None,
    )
    assert ctl.groups == ("slurm_controller",)

    gpu01 = cluster.hosts["gpu01"]
    assert gpu01.address == "gpu01"  # no ansible_host: the inventory name
    assert gpu01.port == 2201
    assert gpu01.private_key == "~/.ssh/h100"
    assert gpu01.ssh_common_args == "-o ProxyJump=bastion"
    assert set(gpu01.groups) == {"slurm_compute", "gpu_h100"}
    assert cluster.hosts["gpu02"].address == "10.0.0.12"
    assert cluster.hosts["gpu03"].private_key is None
    assert type(gpu01.address) is str and type(gpu01.port) is int


def test_merged_vars_follow_precedence(site: Path) -> None:
    hosts = inv.load_cluster(site).hosts
    # inline all < group_vars/all < inline groups by depth < group_vars by depth < inline host < host_vars
    assert hosts["ctl01"].vars["slurm_port"] == 4
    assert hosts["gpu03"].vars["slurm_port"] == 5
    assert hosts["gpu01"].vars["slurm_port"] == 6
    assert hosts["gpu02"].vars["slurm_port"] == 7
    assert hosts["gpu01"].vars["slurm_version"] == "23.11"


def test_merged_vars_match_ansibles_variable_manager(site: Path) -> None:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    cluster = inv.load_cluster(site)
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(site)])
    variables = VariableManager(loader=loader, inventory=manager)
    for name, host in cluster.hosts.items():
        expected = variables.get_vars(host=manager.get_host(name), include_hostvars=False)
        for key, value in host.vars.items():
            assert key in expected and expected[key] == value, (name, key)
        defined_here = {
            "slurm_port", "slurm_version", "ansible_user", "ansible_host", "ansible_port",
            "ansible_become", "ansible_ssh_common_args", "ansible_ssh_private_key_file",
        }
        assert defined_here & set(expected) == defined_here & set(host.vars), name


def test_templates_and_vault_values_skip_type_checks(write_inventory) -> None:
    path = write_inventory(
        SITE_INVENTORY,
        {
            "group_vars/all.yml": (
                "slurm_port: \"{{ 6000 + 817 }}\"\n"
                "slurm_accounting_enabled: !vault |\n"
                "  $ANSIBLE_VAULT;1.1;AES256\n"
                "  6231\n"
            ),
            "group_vars/slurm_compute.yml": "$ANSIBLE_VAULT;1.1;AES256\n3135\n",
        },
    )
    cluster = inv.load_cluster(path)
    assert "gpu01" in cluster.hosts


def test_unknown_variables_far_from_known_ones_are_allowed(write_inventory) -> None:
    path = write_inventory(files={"group_vars/all.yml": "site_rack_layout: {row: 3}\nmy_team: hpc\n"})
    assert inv.load_cluster(path).hosts["gpu01"].vars["my_team"] == "hpc"


def test_two_controllers_and_child_groups_are_valid(write_inventory) -> None:
    path = write_inventory(
        """\
        all:
          children:
            slurm_controller:
              hosts: {ctl01: , ctl02: }
            slurm_compute:
              children:
                gpu_a100:
                  children:
                    rack_a:
                      hosts: {gpu01: }
            slurm_dbd:
              hosts: {db01: }
        """
    )
    cluster = inv.load_cluster(path)
    assert cluster.groups["slurm_controller"] == ["ctl01", "ctl02"]
    assert cluster.groups["slurm_dbd"] == ["db01"]
    assert cluster.groups["rack_a"] == ["gpu01"]


def test_a_directory_stands_for_its_inventory_yml(site: Path) -> None:
    assert inv.resolve_inventory(str(site.parent)).path == site
    assert len(inv.load_cluster(site.parent).hosts) == 6


def test_problems_carry_file_scope_and_key(write_inventory) -> None:
    path = write_inventory(files={"group_vars/slurm_compute.yml": "slurm_port: abc\n"})
    with pytest.raises(InputError) as caught:
        inv.load_cluster(path)
    (problem,) = caught.value.problems
    assert (problem.file, problem.scope, problem.key) == (str(path.parent / "group_vars" / "slurm_compute.yml"), "group slurm_compute", "slurm_port")
    assert caught.value.exit_code == 2


# --------------------------------------------------------------------------
# resolve_inventory: -i, $DEEPOPS_INVENTORY, config/inventory.yml, virtual cluster


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with no inventory anywhere."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("DEEPOPS_INVENTORY", raising=False)
    monkeypatch.delenv("DEEPOPS_STATE_DIR", raising=False)
    return work


def _touch_inventory(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("all: {}\n")
    return path


def test_resolve_order(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    virtual = _touch_inventory(workdir / ".deepops" / "virtual" / "inventory.yml")
    source = inv.resolve_inventory(None)
    assert (source.path.resolve(), source.origin) == (virtual.resolve(), "virtual cluster")

    _touch_inventory(workdir / "config" / "inventory.yml")
    source = inv.resolve_inventory(None)
    assert (source.path, source.origin) == (Path("config/inventory.yml"), "config/inventory.yml")

    from_env = _touch_inventory(workdir / "env" / "inventory.yml")
    monkeypatch.setenv("DEEPOPS_INVENTORY", str(from_env))
    source = inv.resolve_inventory(None)
    assert (source.path, source.origin) == (from_env, "$DEEPOPS_INVENTORY")

    option = _touch_inventory(workdir / "opt" / "inventory.yml")
    source = inv.resolve_inventory(str(option))
    assert (source.path, source.origin) == (option, "-i")


def test_resolve_with_nothing_says_what_was_tried(workdir: Path) -> None:
    with pytest.raises(InputError) as caught:
        inv.resolve_inventory(None)
    message = caught.value.render()
    for expected in ("$DEEPOPS_INVENTORY", "config/inventory.yml", "virtual", "deepops init", "deepops virtual up"):
        assert expected in message


def test_resolve_missing_env_inventory_is_an_error(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPOPS_INVENTORY", "gone.yml")
    _touch_inventory(workdir / "config" / "inventory.yml")  # not a fallback for a wrong explicit choice
    with pytest.raises(InputError, match=r"gone.yml \(from \$DEEPOPS_INVENTORY\) does not exist"):
        inv.resolve_inventory(None)


def test_check_says_which_inventory_it_used(workdir: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPOPS_INVENTORY", str(site))
    result = CliRunner().invoke(main, ["check", "--no-ssh"])
    assert result.exit_code == 0, result.output
    assert f"Using inventory {site} ($DEEPOPS_INVENTORY)" in result.output
    assert "Inventory valid: 6 hosts" in result.output


def test_check_without_any_inventory_exits_2(workdir: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-ssh"])
    assert result.exit_code == 2
    assert "deepops init" in result.output


def test_valid_hostnames() -> None:
    assert inv.is_valid_hostname("gpu-01.rack3.example.com")
    assert inv.is_valid_hostname("10.0.0.1")
    for bad in ("gpu_01", "-gpu", "gpu-", "a" * 64, "gpu..x", "", "gpu 01"):
        assert not inv.is_valid_hostname(bad), bad
