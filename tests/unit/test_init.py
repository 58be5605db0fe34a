"""`deepops init`: the starter config is written, valid, and never overwritten by accident."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepops_py import inventory as inv
from deepops_py import starter
from deepops_py.cli import main
from deepops_py.errors import InputError

pytestmark = pytest.mark.usefixtures("test_specs")

# '# name: value' lines are the example settings; descriptions are '#   text'.
EXAMPLE_SETTING = re.compile(r"^# ([a-z_][a-z0-9_]*:(?: .*)?)$", re.MULTILINE)


def test_init_writes_a_starter_that_passes_validation(tmp_path: Path) -> None:
    written = starter.write_starter_config(tmp_path / "site", force=False)

    assert written == [tmp_path / "site" / "inventory.yml", tmp_path / "site" / "group_vars" / "all.yml"]
    cluster = inv.load_cluster(tmp_path / "site" / "inventory.yml")
    assert cluster.groups["slurm_controller"] == ["ctl01"]
    assert cluster.groups["slurm_compute"] == ["gpu01", "gpu02"]
    assert "slurm_login" not in cluster.groups  # shown, commented out
    assert "# slurm_login:" in written[0].read_text()


def test_group_vars_document_every_role_variable(tmp_path: Path, specs_dir: Path) -> None:
    text = starter.render_group_vars_all(specs_dir)
    for name in ("slurm_partitions", "slurm_upgrade_drain_timeout", "testbase_apt_proxy", "testbase_anything"):
        assert name in text
    assert "# slurm_select_type: cons_tres" in text
    assert "one of: cons_tres, linear" in text


def test_every_example_setting_is_valid_when_uncommented(tmp_path: Path) -> None:
    starter.write_starter_config(tmp_path, force=False)
    group_vars = tmp_path / "group_vars" / "all.yml"
    uncommented = EXAMPLE_SETTING.sub(r"\1", group_vars.read_text())
    assert uncommented.count("\nslurm_") >= 5
    group_vars.write_text(uncommented)

    cluster = inv.load_cluster(tmp_path / "inventory.yml")
    assert cluster.hosts["gpu01"].vars["slurm_port"] == 6817
    assert cluster.hosts["gpu01"].vars["slurm_partitions"] == [{"name": "gpu", "nodes": "ALL"}]


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("mine: 1\n")

    with pytest.raises(InputError) as caught:
        starter.write_starter_config(tmp_path, force=False)

    assert str(tmp_path / "group_vars" / "all.yml") in caught.value.message
    assert "--force" in caught.value.message
    assert not (tmp_path / "inventory.yml").exists()
    assert (tmp_path / "group_vars" / "all.yml").read_text() == "mine: 1\n"


def test_force_overwrites(tmp_path: Path) -> None:
    (tmp_path / "inventory.yml").write_text("old\n")
    starter.write_starter_config(tmp_path, force=True)
    assert "slurm_controller" in (tmp_path / "inventory.yml").read_text()


def test_init_into_a_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="not a directory"):
        starter.write_starter_config(tmp_path / "file", force=False)


def test_cli_init_default_dir_refuse_and_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    first = runner.invoke(main, ["init"])
    assert first.exit_code == 0, first.output
    assert "wrote config/inventory.yml" in first.output
    assert "wrote config/group_vars/all.yml" in first.output

    again = runner.invoke(main, ["init"])
    assert again.exit_code == 2
    assert "config/inventory.yml" in again.output and "--force" in again.output
    assert "Traceback" not in again.output

    forced = runner.invoke(main, ["init", "--force"])
    assert forced.exit_code == 0

    check = runner.invoke(main, ["check", "--no-ssh"])
    assert check.exit_code == 0, check.output
    assert "Using inventory config/inventory.yml (config/inventory.yml)" in check.output


def test_starter_from_the_shipped_roles_passes_with_the_shipped_specs(tmp_path: Path) -> None:
    from deepops_py import paths

    roles = paths.content_dir() / "roles"
    starter.write_starter_config(tmp_path, force=False, roles_dir=roles)
    assert len(inv.load_cluster(tmp_path / "inventory.yml", roles_dir=roles).hosts) == 3
