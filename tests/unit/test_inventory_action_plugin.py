"""The deepops.cluster.inventory_check action plugin: called directly, and inside ansible-playbook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.deepops.cluster.plugins.action import inventory_check as plugin

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("test_specs")




def run_action(task_vars: dict, args: dict | None = None) -> dict:
    task = SimpleNamespace(args=args or {}, async_val=0, check_mode=False, action="deepops.cluster.inventory_check")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = plugin.ActionModule(task, connection, play_context=None, loader=None, templar=None)
    return action.run(task_vars=task_vars)


def test_valid_inventory_succeeds_unchanged_with_counts(write_inventory) -> None:
    path = write_inventory()
    result = run_action({"ansible_inventory_sources": [str(path), "localhost,"]})
    assert not result.get("failed"), result
    assert result["changed"] is False
    assert result["hosts"] == 3
    assert result["inventories"] == [{"inventory": str(path), "hosts": 3, "groups": 4}]


def test_invalid_inventory_fails_with_every_problem(write_inventory) -> None:
    base = write_inventory().read_text()
    path = write_inventory(base.replace("ctl01:", "ctl01: {slurm_port: abc}"), {"group_vars/all.yml": "slurm_partitons: []\n"})
    result = run_action({"ansible_inventory_sources": [str(path)]})
    assert result["failed"] is True
    assert result["changed"] is False
    assert "is invalid (2 problems)" in result["msg"]
    assert "host ctl01: slurm_port: expected int" in result["msg"]
    assert "did you mean slurm_partitions?" in result["msg"]


def test_no_file_source_is_skipped() -> None:
    result = run_action({"ansible_inventory_sources": ["gpu01,gpu02"]})
    assert result["skipped"] is True and not result.get("failed")


def test_arguments_are_rejected(write_inventory) -> None:
    result = run_action({"ansible_inventory_sources": [str(write_inventory())]}, args={"strict": True})
    assert result["failed"] is True and "takes no arguments" in result["msg"]


def test_inventory_validated_by_deepops_is_not_loaded_again(monkeypatch: pytest.MonkeyPatch, write_inventory) -> None:
    # deepops validates before it starts a run and names the file; the plugin trusts that
    # (an invalid file proves it did not load it), and still checks any other source.
    path = write_inventory("all:\n  children:\n    slurm-controller: {}\n")
    monkeypatch.setenv(plugin.CHECKED_ENV, str(path))
    result = run_action({"ansible_inventory_sources": [str(path)]})
    assert not result.get("failed"), result
    assert result["inventories"] == [{"inventory": str(path), "checked_by": "deepops"}]
    assert "validated by deepops before this run" in result["msg"]

    monkeypatch.setenv(plugin.CHECKED_ENV, str(path.parent / "another.yml"))
    assert run_action({"ansible_inventory_sources": [str(path)]})["failed"] is True


def _playbook(inventory: Path, *options: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(
        [str(bin_dir / "ansible-playbook"), "-i", str(inventory), *options, str(REPO / "playbooks" / "validate_inventory.yml")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )


@pytest.mark.skipif(not (REPO / "playbooks" / "validate_inventory.yml").is_file(), reason="validation playbook not present")
def test_ansible_playbook_runs_the_check(write_inventory) -> None:
    # The subprocess uses the shipped roles' specs, so only group problems are used here.
    good = write_inventory()
    passed = _playbook(good)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ok: [localhost]" in passed.stdout, passed.stdout

    write_inventory(good.read_text().replace("slurm_controller", "slurm-controller"))
    failed = _playbook(good)
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert "did you mean slurm_controller?" in failed.stdout, failed.stdout + failed.stderr
    assert "no controller" in failed.stdout


# --------------------------------------------------------------------------
# values only the run knows: templated and vaulted variables, and -e


VAULT_PASSWORD = b"test-vault-password"


def _vaulted(text: str) -> str:
    from ansible.parsing.vault import VaultLib, VaultSecret

    ciphertext = VaultLib([("default", VaultSecret(VAULT_PASSWORD))]).encrypt(text).decode()
    return "!vault |\n" + "".join(f"  {line}\n" for line in ciphertext.splitlines())


@pytest.fixture
def run_in_play(monkeypatch: pytest.MonkeyPatch):
    """Run the action as ansible-playbook would, with Ansible's own hostvars, templar,
    extra vars and vault secrets for the inventory ``path``."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.parsing.vault import VaultSecret, VaultSecretsContext
    from ansible.template import Templar
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager
    from ansible_collections.deepops.cluster.plugins.plugin_utils.inventory import _init_plugin_loader

    _init_plugin_loader()
    secrets = [("default", VaultSecret(VAULT_PASSWORD))]
    monkeypatch.setattr(VaultSecretsContext, "_current", VaultSecretsContext(secrets))

    def run(path: Path, extra_vars: dict | None = None) -> dict:
        loader = DataLoader()
        loader.set_vault_secrets(secrets)
        inventory = InventoryManager(loader=loader, sources=[str(path)])
        manager = VariableManager(loader=loader, inventory=inventory)
        manager._extra_vars = extra_vars or {}  # what ansible-playbook's -e fills in
        task = SimpleNamespace(args={}, async_val=0, check_mode=False, action="deepops.cluster.inventory_check")
        connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
        action = plugin.ActionModule(task, connection, play_context=None, loader=loader, templar=Templar(loader=loader))
        hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
        return action.run(task_vars={"ansible_inventory_sources": [str(path)], "hostvars": hostvars})

    return run


def test_a_templated_value_of_the_wrong_type_fails_once_naming_file_host_and_variable(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"group_vars/all.yml": "slurm_port: \"{{ 'abc' }}\"\n"})
    result = run_in_play(path)
    assert result["failed"] is True, result
    assert "Values resolved at the start of the run are invalid (1 problem)" in result["msg"]
    assert f"{path.parent / 'group_vars' / 'all.yml'}: host ctl01: slurm_port: resolved value:" in result["msg"]
    assert "convert to int" in result["msg"]


def test_templated_values_of_the_right_type_or_coercible_pass(write_inventory, run_in_play) -> None:
    # "5" for an int passes, as it did in Ansible's per-role check.
    inventory = (
        "all:\n  children:\n    slurm_controller:\n      hosts:\n"
        "        ctl01: {slurm_port: \"{{ '5' }}\", slurm_select_type: \"{{ 'linear' }}\"}\n"
        "    slurm_compute:\n      hosts:\n        gpu01: {slurm_partitions: [{name: \"{{ 'gpu' }}\"}]}\n"
    )
    result = run_in_play(write_inventory(inventory))
    assert not result.get("failed"), result
    assert result["resolved"] == 3
    assert "3 templated, vaulted or extra values resolved and checked" in result["msg"]


def test_a_vaulted_value_is_checked_and_never_shown(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"group_vars/all.yml": "slurm_port: " + _vaulted("hunter2-not-a-port")})
    result = run_in_play(path)
    assert result["failed"] is True, result
    assert "slurm_port: resolved value does not fit the argument spec (type int); the value is not shown" in result["msg"]
    assert "hunter2" not in str(result)

    write_inventory(files={"group_vars/all.yml": "slurm_port: " + _vaulted("6817")})
    assert not run_in_play(path).get("failed")


def test_a_secret_named_value_is_not_shown(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"group_vars/all.yml": "testbase_key_file: \"{{ 's3cr3t\\nrest' }}\"\n"})
    result = run_in_play(path)
    assert result["failed"] is True, result
    assert "testbase_key_file: resolved value: must be one line without control characters" in result["msg"]
    assert "s3cr3t" not in str(result)


def test_a_value_only_known_later_is_left_to_the_role(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"group_vars/all.yml": "slurm_port: \"{{ ansible_facts.slurm_port_later }}\"\n"})
    result = run_in_play(path)
    assert not result.get("failed"), result
    assert result["resolved"] == 0


def test_a_template_that_cannot_be_resolved_otherwise_is_a_problem(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"host_vars/gpu01.yml": "slurm_version: \"{{ 1 + }}\"\n"})
    result = run_in_play(path)
    assert result["failed"] is True
    assert "host gpu01: slurm_version: cannot be resolved: " in result["msg"]


def test_a_multi_line_templated_value_is_rejected(write_inventory, run_in_play) -> None:
    path = write_inventory(files={"group_vars/all.yml": "slurm_version: \"{{ '23.11\\nExtra=1' }}\"\n"})
    result = run_in_play(path)
    assert result["failed"] is True
    assert "slurm_version: resolved value: must be one line without control characters" in result["msg"]


def test_extra_vars_are_checked_with_ansibles_coercions(write_inventory, run_in_play) -> None:
    path = write_inventory()
    # -e k=v gives strings: "6817" passes for an int, as before; "abc" does not.
    assert not run_in_play(path, {"slurm_port": "6817", "slurm_accounting_enabled": "yes"}).get("failed")
    from ansible.template import trust_as_template  # as ansible-playbook marks -e values

    result = run_in_play(path, {"slurm_port": "abc", "slurm_select_type": trust_as_template("{{ 'fastest' }}")})
    assert result["failed"] is True, result
    assert "-e: slurm_port: resolved value: argument 'slurm_port'" in result["msg"]
    assert "-e: host ctl01: slurm_select_type: resolved value: value of slurm_select_type must be one of: cons_tres, linear" in result["msg"]
    assert result["msg"].count("slurm_select_type") == 2  # once (the message names it twice), not once per host


@pytest.mark.skipif(not (REPO / "playbooks" / "validate_inventory.yml").is_file(), reason="validation playbook not present")
def test_ansible_playbook_checks_templated_values_under_any_limit(write_inventory) -> None:
    # The shipped specs: slurm_realmemory_reserve_mb is an int. A --limit without
    # localhost does not skip the check; nothing else runs after it.
    good = write_inventory(files={"group_vars/all.yml": "slurm_realmemory_reserve_mb: \"{{ 'abc' }}\"\n"})
    failed = _playbook(good, "--limit", "gpu01")
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert "slurm_realmemory_reserve_mb: resolved value:" in failed.stdout, failed.stdout
    assert "gpu01                      : ok=0    changed=0    unreachable=0    failed=1" in failed.stdout
