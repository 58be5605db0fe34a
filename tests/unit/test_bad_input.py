"""Bad input through the real CLI: exit 2, a message naming file, scope and key, no traceback."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepops_py.cli import main

pytestmark = pytest.mark.usefixtures("test_specs")


def inventory_with(*, controller: str = "ctl01:", compute: str = "gpu01:\n        gpu02:", extra: str = "") -> str:
    """BASE_INVENTORY with the controller/compute hosts and extra groups replaced."""
    return f"""\
all:
  children:
    slurm_controller:
      hosts:
        {controller}
    slurm_compute:
      hosts:
        {compute}
{extra}"""


def host_vars_inline(host_line: str) -> str:
    """The base inventory with gpu01 carrying inline vars, e.g. 'gpu01: {slurm_port: abc}'."""
    return inventory_with(compute=f"{host_line}\n        gpu02:")


BASE_INVENTORY = inventory_with()  # the same as conftest's default inventory


@dataclass
class Case:
    id: str
    inventory: str | bytes | None = BASE_INVENTORY  # None: the test builds the -i target itself
    files: dict[str, object] = field(default_factory=dict)
    expect: tuple[str, ...] = ()
    target: str = "inv/inventory.yml"  # -i, relative to tmp_path


CASES = [
    # --- files that are not (valid) YAML
    Case("broken-yaml-inventory", "all:\n  children:\n    slurm_controller:\n      hosts: [ctl01\n", expect=("inventory.yml", "not valid YAML", "line 5")),
    Case("broken-yaml-group-vars", files={"group_vars/all.yml": "slurm_port: 1\nslurm_version: [23\nfoo: 1\n"},
         expect=("group_vars/all.yml", "group all", "not valid YAML", "line 3")),
    Case("broken-yaml-host-vars-dir", files={"host_vars/gpu01/main.yml": "a: b: c\n"},
         expect=("host_vars/gpu01/main.yml", "host gpu01", "line 1")),
    Case("binary-garbage", b"\x00\xff\xfe\x00garbage\x80", expect=("inventory.yml", "not UTF-8")),
    Case("text-garbage", "this is: not: [valid yaml\n", expect=("inventory.yml", "not valid YAML", "line 1")),
    Case("ini-inventory", "[slurm_controller]\nctl01\n\n[slurm_compute]\ngpu01\n", expect=("inventory.yml", "INI inventories are not supported", "ansible-inventory -i")),
    Case("empty-file", "", expect=("inventory.yml", "the file is empty")),
    Case("top-level-list", "- ctl01\n- gpu01\n", expect=("inventory.yml", "expected a YAML mapping of groups", "found a list")),
    Case("top-level-scalar", "just some words\n", expect=("inventory.yml", "found text")),
    # --- structure
    Case("group-is-a-list", "all: [ctl01, gpu01]\n", expect=("inventory.yml", "group all", "expected a mapping with hosts, children or vars")),
    Case("hosts-is-a-list", inventory_with(compute="").replace("      hosts:\n        \n", "      hosts: [gpu01, gpu02]\n"),
         expect=("inventory.yml", "group slurm_compute", "hosts", "expected a mapping, found a list")),
    Case("misspelt-section", BASE_INVENTORY.replace("      hosts:\n        ctl01:", "      host:\n        ctl01:"),
         expect=("inventory.yml", "group slurm_controller", "host", "did you mean hosts?")),
    Case("host-vars-not-mapping", host_vars_inline("gpu01: 10.0.0.1"), expect=("inventory.yml", "host gpu01", "expected a mapping of variables, found text")),
    Case("group-vars-file-is-list", files={"group_vars/slurm_compute.yml": "- slurm_port: 1\n"},
         expect=("group_vars/slurm_compute.yml", "group slurm_compute", "expected a mapping of variables, found a list")),
    Case("group-vars-both-file-and-dir", files={"group_vars/all.yml": "slurm_port: 1\n", "group_vars/all/main.yml": "slurm_port: 2\n"},
         expect=("group_vars/all.yml", "group all", "ignored by Ansible")),
    # --- groups
    Case("unknown-group", inventory_with(extra="    rack1:\n      hosts:\n        gpu01:\n"), expect=("inventory.yml", "group rack1", "unknown group 'rack1'")),
    Case("hyphenated-group", BASE_INVENTORY.replace("slurm_compute", "slurm-compute"),
         expect=("inventory.yml", "group slurm-compute", "group names use underscores: did you mean slurm_compute?")),
    Case("misspelt-group", inventory_with(extra="    slurm_logn:\n      hosts:\n        login01:\n"),
         expect=("inventory.yml", "group slurm_logn", "did you mean slurm_login?")),
    Case("host-in-controller-and-compute", inventory_with(compute="ctl01:\n        gpu01:"),
         expect=("inventory.yml", "host ctl01", "slurm_controller", "slurm_compute")),
    Case("host-in-login-and-compute", inventory_with(extra="    slurm_login:\n      hosts:\n        gpu02:\n"),
         expect=("inventory.yml", "host gpu02", "slurm_login", "slurm_compute")),
    Case("no-controller", inventory_with(controller=""), expect=("inventory.yml", "group slurm_controller", "no controller")),
    Case("three-controllers", inventory_with(controller="ctl01:\n        ctl02:\n        ctl03:"),
         expect=("inventory.yml", "group slurm_controller", "3 controllers (ctl01, ctl02, ctl03)")),
    Case("empty-compute-group", "all:\n  children:\n    slurm_controller:\n      hosts:\n        ctl01:\n    slurm_compute:\n",
         expect=("inventory.yml", "group slurm_compute", "slurm_compute has no hosts")),
    Case("missing-compute-group", "all:\n  children:\n    slurm_controller:\n      hosts:\n        ctl01:\n",
         expect=("inventory.yml", "group slurm_compute", "missing group slurm_compute")),
    Case("three-dbd-hosts", inventory_with(extra="    slurm_dbd:\n      hosts:\n        ctl01:\n        gpu01:\n        gpu02:\n"),
         expect=("inventory.yml", "group slurm_dbd", "expected at most 2")),
    Case("host-in-no-group", BASE_INVENTORY.replace("all:\n", "all:\n  hosts:\n    stray01:\n"), expect=("inventory.yml", "host stray01", "is in no deepops group")),
    Case("invalid-hostname", host_vars_inline("gpu_01:"), expect=("inventory.yml", "host gpu_01", "invalid host name")),
    Case("hostname-leading-hyphen", host_vars_inline("-gpu01:"), expect=("inventory.yml", "host -gpu01", "invalid host name")),
    Case("bad-host-range", host_vars_inline("'gpu[1:x]':"), expect=("inventory.yml", "host gpu[1:x]", "invalid host pattern")),
    Case("unclosed-host-range", host_vars_inline("'gpu[01:':"), expect=("inventory.yml", "host gpu[01:", "invalid host pattern")),
    Case("group-vars-for-missing-group", files={"group_vars/slurm-compute.yml": "slurm_port: 1\n"},
         expect=("group_vars/slurm-compute.yml", "group slurm-compute", "no group 'slurm-compute'", "did you mean slurm_compute?")),
    Case("host-vars-for-missing-host", files={"host_vars/gpu03.yml": "slurm_port: 1\n"},
         expect=("host_vars/gpu03.yml", "host gpu03", "no host 'gpu03'", "did you mean gpu02?")),
    # --- variable types
    Case("int-for-str", files={"group_vars/all.yml": "testbase_apt_proxy: 3142\n"},
         expect=("group_vars/all.yml", "group all", "testbase_apt_proxy", "expected str, found int (3142)")),
    Case("float-for-str", files={"group_vars/slurm_compute.yml": "slurm_version: 23.11\n"},
         expect=("group_vars/slurm_compute.yml", "group slurm_compute", "slurm_version", "expected str, found float (23.11)")),
    Case("str-for-int", host_vars_inline("gpu01: {slurm_port: abc}"), expect=("inventory.yml", "host gpu01", "slurm_port", "expected int, found str ('abc')")),
    Case("bool-for-int", files={"host_vars/gpu02.yml": "slurm_port: yes\n"}, expect=("host_vars/gpu02.yml", "host gpu02", "slurm_port", "expected int, found bool (True)")),
    Case("str-for-bool", BASE_INVENTORY + "  vars:\n    slurm_accounting_enabled: maybe\n",
         expect=("inventory.yml", "group all", "slurm_accounting_enabled", "expected bool, found str ('maybe')")),
    Case("dict-for-list", files={"group_vars/all.yml": "slurm_partitions: {name: gpu}\n"},
         expect=("group_vars/all.yml", "group all", "slurm_partitions", "expected list, found dict")),
    Case("list-element-wrong-type", files={"group_vars/all.yml": "testbase_packages: [curl, 3]\n"},
         expect=("group_vars/all.yml", "testbase_packages", "item 2: expected str, found int (3)")),
    Case("list-of-dict-missing-key", files={"group_vars/all.yml": "slurm_partitions: [{nodes: ALL}]\n"},
         expect=("group_vars/all.yml", "slurm_partitions", "item 1: missing required key 'name'")),
    Case("choices", files={"group_vars/all.yml": "slurm_select_type: linaer\n"},
         expect=("group_vars/all.yml", "slurm_select_type", "expected one of cons_tres, linear, found 'linaer'")),
    Case("list-choices", files={"group_vars/all.yml": "slurm_gres_types: [gpu, mig]\n"},
         expect=("group_vars/all.yml", "slurm_gres_types", "item 2: expected one of gpu, mps, shard, found 'mig'")),
    Case("connection-var-type", host_vars_inline("gpu01: {ansible_port: twenty-two}"), expect=("host gpu01", "ansible_port", "expected int")),
    Case("connection-var-bool", files={"group_vars/all.yml": "ansible_become: sure\n"}, expect=("group_vars/all.yml", "ansible_become", "expected bool")),
    # --- misspelt variables
    Case("misspelt-variable", files={"group_vars/slurm_compute.yml": "slurm_partitons: []\n"},
         expect=("group_vars/slurm_compute.yml", "group slurm_compute", "slurm_partitons", "unknown variable 'slurm_partitons' — did you mean slurm_partitions?")),
    Case("misspelt-variable-inline", host_vars_inline("gpu01: {testbase_apt_prxy: 'http://cache:3142'}"),
         expect=("inventory.yml", "host gpu01", "testbase_apt_prxy", "did you mean testbase_apt_proxy?")),
    Case("hyphenated-variable", files={"group_vars/all.yml": "slurm-port: 6817\n"},
         expect=("group_vars/all.yml", "slurm-port", "not a valid variable name", "did you mean slurm_port?")),
    Case("case-confused-variable", files={"group_vars/all.yml": "Slurm_Version: '23.11'\n"},
         expect=("group_vars/all.yml", "Slurm_Version", "did you mean slurm_version?")),
    Case("misspelt-connection-var", host_vars_inline("gpu01: {ansible_hots: 10.0.0.1}"), expect=("host gpu01", "ansible_hots", "did you mean ansible_host?")),
    # --- the -i target itself
    Case("missing-inventory-file", None, target="nowhere/inventory.yml", expect=("nowhere/inventory.yml", "does not exist", "deepops init")),
    Case("directory-without-inventory", None, files={"empty/README": "nothing here"}, target="inv/empty",
         expect=("inv/empty", "is a directory without inventory.yml", "deepops init")),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_exits_2_with_a_precise_message(case: Case, tmp_path: Path, write_inventory) -> None:
    if case.inventory is not None:
        write_inventory(case.inventory, case.files)
    else:
        for relative, text in case.files.items():
            path = tmp_path / "inv" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(text))

    result = CliRunner().invoke(main, ["check", "-i", str(tmp_path / case.target), "--no-ssh"])

    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for expected in case.expect:
        assert expected in result.output, f"{expected!r} not in:\n{result.output}"


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30


def test_every_problem_is_reported_at_once(write_inventory) -> None:
    path = write_inventory(
        inventory_with(controller="", extra="    rack1:\n      hosts:\n        gpu01:\n"),
        {"group_vars/all.yml": "slurm_port: abc\nslurm_partitons: []\n"},
    )
    result = CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])
    assert result.exit_code == 2
    assert "(4 problems)" in result.output
    for expected in ("no controller", "unknown group 'rack1'", "expected int", "did you mean slurm_partitions?"):
        assert expected in result.output


def test_one_bad_group_var_inherited_by_1000_hosts_is_one_problem(write_inventory) -> None:
    hosts = "\n".join(f"        gpu{index:04d}:" for index in range(1000)).lstrip()
    path = write_inventory(inventory_with(compute=hosts), {"group_vars/slurm_compute.yml": "slurm_port: many\n"})
    result = CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])
    assert result.exit_code == 2
    assert "(1 problem)" in result.output
    assert result.output.count("expected int, found str ('many')") == 1


def test_a_host_range_with_a_bad_var_is_one_problem(write_inventory) -> None:
    path = write_inventory(host_vars_inline("gpu[10:99]: {slurm_port: abc}"))
    result = CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])
    assert result.exit_code == 2
    assert "host gpu[10:99]: slurm_port: expected int" in result.output
    assert "(1 problem)" in result.output


def test_debug_shows_the_traceback_users_do_not_see(write_inventory) -> None:
    path = write_inventory("")
    result = CliRunner().invoke(main, ["--debug", "check", "-i", str(path), "--no-ssh"])
    assert result.exit_code != 0
    assert not isinstance(result.exception, SystemExit)
