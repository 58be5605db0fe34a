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


def _playbook(inventory: Path) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(
        [str(bin_dir / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "validate_inventory.yml")],
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
