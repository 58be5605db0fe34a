"""Input from the command line and the environment that used to end in a
Python traceback: malformed -e values and a state directory deepops cannot
use. Each is exit 2 with a message that names it, and no playbook starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from deepops_py import runner
from deepops_py.cli import main


@pytest.fixture
def playbook_runs(monkeypatch):
    """The playbook runs a command would start (none, for bad input)."""
    started: list = []
    monkeypatch.setattr(runner, "run_playbook", lambda request, **kwargs: started.append(request))
    return started


@pytest.mark.parametrize("value", ["x=[1,", "slurm_partitions={a: [", "x='unclosed", "x=a: b: c"])
@pytest.mark.parametrize("command", ["deploy", "plan"])
def test_malformed_yaml_in_an_extra_var_is_exit_2(write_inventory, playbook_runs, command, value):
    result = CliRunner().invoke(main, [command, "-i", str(write_inventory()), "-e", value])
    assert result.exit_code == 2, result.output
    assert f"-e {value!r}" in result.output and "is not valid YAML" in result.output
    assert "Traceback" not in result.output and playbook_runs == []


def test_a_quoted_value_passes_as_text(write_inventory, playbook_runs):
    from deepops_py.cli import _parse_extra_vars

    assert _parse_extra_vars(("x='[1,'",)) == {"x": "[1,"}


def test_state_dir_that_is_a_file_is_exit_2(write_inventory, tmp_path, monkeypatch):
    # The real runner: it must stop at the state directory, before ansible-playbook starts.
    state = tmp_path / "state"
    state.write_text("not a directory\n")
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(state))
    for args in (["runs"], ["deploy", "-i", str(write_inventory())], ["virtual", "status"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert f"DEEPOPS_STATE_DIR {state} is not a directory" in result.output


def test_state_dir_that_cannot_be_created_is_exit_2(write_inventory, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(blocker / "state"))  # a directory under a file
    result = CliRunner().invoke(main, ["deploy", "-i", str(write_inventory())])
    assert result.exit_code == 2, result.output
    assert f"cannot create {blocker / 'state'}/" in result.output  # the first directory it needs there
    assert "DEEPOPS_STATE_DIR must be a directory deepops can write to" in result.output


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["slurm_partitions=notalist"], "-e: slurm_partitions: expected list, found str ('notalist')"),
        (["slurm_partitons=[]"], "-e: slurm_partitons: unknown variable 'slurm_partitons' — did you mean slurm_partitions?"),
        (['{"slurm_partitions": 3}'], "-e: slurm_partitions: expected list, found int"),
        (["@vars.yml"], "-e @vars.yml: slurm_partitions: expected list, found str ('notalist')"),
    ],
)
@pytest.mark.parametrize("command", ["deploy", "plan"])
def test_extra_vars_are_checked_against_the_roles_specs(write_inventory, playbook_runs, tmp_path, monkeypatch, command, values, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vars.yml").write_text("slurm_partitions: notalist\n")
    args = [command, "-i", str(write_inventory())]
    for value in values:
        args += ["-e", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "invalid extra variables (-e)" in result.output and expected in result.output
    assert playbook_runs == []


def test_valid_and_unrelated_extra_vars_pass(write_inventory, playbook_runs):
    from deepops_py.cli import _parse_extra_vars

    values = ("slurm_partitions=[]", "ansible_python_interpreter=/usr/bin/python3", '{"my_site_var": 1}')
    assert _parse_extra_vars(values) == {"slurm_partitions": [], "ansible_python_interpreter": "/usr/bin/python3", "my_site_var": 1}
