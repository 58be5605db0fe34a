"""Inventory, vars and -e files are read with limits: duplicate keys,
recursive aliases, alias bombs, absurd depth and size are clear errors
(exit 2 from the CLI), found from the YAML node graph before any value is
built, so a bomb costs nothing."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from ansible_collections.deepops.cluster.plugins.plugin_utils import yaml_files
from ansible_collections.deepops.cluster.plugins.plugin_utils.yaml_files import Vaulted, YamlFileError

from deepops_py.cli import main


def bomb(levels: int = 9) -> str:
    """The "billion laughs": each level holds ten aliases of the one before."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1\nb: 2\na: 3\n", "line 3, column 1: duplicate key 'a' (first on line 1)"),
        ("top:\n  k: 1\n  k: 1\n", "line 3, column 3: duplicate key 'k' (first on line 2)"),
        ("a: &a [*a]\n", "a recursive alias"),
        ("a: &a {b: *a}\n", "a recursive alias"),
        (bomb(), "aliases expand to more than 200000 values (an alias bomb?)"),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "values nest more than 64 levels deep"),
    ],
)
def test_hostile_yaml_is_refused(text, expected):
    with pytest.raises(YamlFileError, match="not valid YAML") as error:
        yaml_files.loads(text)
    assert expected in str(error.value)


def test_ordinary_yaml_features_still_work():
    text = "base: &base {port: 6817, hosts: [a, b]}\nx:\n  <<: *base\n  port: 1\ny: *base\n'1': text\n1: number\n"
    data = yaml_files.loads(text)
    assert data["x"] == {"port": 1, "hosts": ["a", "b"]} and data["y"]["hosts"] == ["a", "b"]
    assert data["1"] == "text" and data[1] == "number"  # the same text, different types: not duplicates
    assert yaml_files.loads(bomb(levels=3))["a3"][0][0][0] == ["x"] * 10  # 11,111 values: under the limit
    assert isinstance(yaml_files.loads("$ANSIBLE_VAULT;1.1;AES256\n6162\n"), Vaulted)
    assert yaml_files.loads("") is None


def test_an_oversized_file_is_refused_without_reading_it(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_files, "MAX_BYTES", 1024)
    path = tmp_path / "big.yml"
    path.write_text("a: " + "x" * 2000 + "\n")
    with pytest.raises(YamlFileError, match="larger than"):
        yaml_files.load(path)


@pytest.mark.usefixtures("test_specs")
def test_a_bomb_in_group_vars_is_exit_2(write_inventory):
    inventory = write_inventory(files={"group_vars/all.yml": bomb()})
    result = CliRunner().invoke(main, ["check", "-i", str(inventory), "--no-ssh"])
    assert result.exit_code == 2, result.output
    assert "group_vars/all.yml" in result.output and "an alias bomb" in result.output


def test_a_bomb_through_extra_vars_is_exit_2(write_inventory, tmp_path, monkeypatch):
    from deepops_py import runner

    started: list = []
    monkeypatch.setattr(runner, "run_playbook", lambda request, **kwargs: started.append(request))
    (tmp_path / "bomb.yml").write_text(bomb())
    result = CliRunner().invoke(main, ["deploy", "-i", str(write_inventory()), "-e", f"@{tmp_path / 'bomb.yml'}"])
    assert result.exit_code == 2, result.output
    assert "an alias bomb" in result.output and started == []
