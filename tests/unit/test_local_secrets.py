"""Secrets made once beside the inventory (plugins/plugin_utils/local_secrets.py) and the
deepops.cluster.local_secret action plugin: called directly, and in ansible-playbook with --check."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.deepops.cluster.plugins.action import local_secret as plugin
from ansible_collections.deepops.cluster.plugins.plugin_utils import local_secrets

REPO = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_password_is_made_once_private_and_then_only_read(tmp_path):
    path = tmp_path / "secrets" / "slurmdbd_db_password"
    first = local_secrets.ensure(path)
    assert first.created is True and first.changed is True
    assert len(first.password) == 32 and set(first.password) <= set(local_secrets.PASSWORD_CHARS)
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    again = local_secrets.ensure(path)
    assert again.created is False and again.changed is False and again.password == first.password
    assert local_secrets.ensure(tmp_path / "secrets" / "other").password != first.password


def test_a_key_is_random_bytes_never_returned(tmp_path):
    path = tmp_path / "secrets" / "munge.key"
    secret = local_secrets.ensure(path, "bytes", 1024)
    assert secret.password is None and secret.changed is True
    assert len(path.read_bytes()) == 1024
    assert path.read_bytes() != local_secrets.ensure(tmp_path / "secrets" / "k2", "bytes", 1024).path.read_bytes()
    assert local_secrets.ensure(path, "bytes", 1024).changed is False


def test_modes_opened_by_hand_are_put_right_and_reported(tmp_path):
    path = tmp_path / "secrets" / "grafana_admin_password"
    password = local_secrets.ensure(path).password
    os.chmod(path, 0o644)
    assert local_secrets.ensure(path) == local_secrets.Secret(path, False, True, password)
    assert _mode(path) == 0o600
    os.chmod(path.parent, 0o755)
    assert local_secrets.ensure(path).changed is True and _mode(path.parent) == 0o700
    assert local_secrets.ensure(path).changed is False


def test_a_file_from_ansibles_password_lookup_keeps_its_password(tmp_path):
    path = tmp_path / "secrets" / "slurmdbd_db_password"
    path.parent.mkdir(mode=0o700)
    path.write_text("Abc123def456ghi789jkl012 salt=xyz\n")
    os.chmod(path, 0o600)
    assert local_secrets.ensure(path) == local_secrets.Secret(path, False, False, "Abc123def456ghi789jkl012")


@pytest.mark.parametrize(("kind", "size", "message"), [("pin", 32, "kind must be one of"), ("password", 8, "16 or more")])
def test_bad_requests_make_nothing(tmp_path, kind, size, message):
    with pytest.raises(ValueError, match=message):
        local_secrets.ensure(tmp_path / "secrets" / "x", kind, size)
    assert not (tmp_path / "secrets").exists()


def test_an_empty_password_file_is_an_error_not_an_empty_password(tmp_path):
    path = tmp_path / "secrets" / "x"
    path.parent.mkdir()
    path.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        local_secrets.ensure(path)


def run_action(args: dict) -> dict:
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="deepops.cluster.local_secret")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = plugin.ActionModule(task, connection, play_context=None, loader=None, templar=None)
    return action.run(task_vars={})


def test_the_action_returns_a_password_but_never_a_key(tmp_path):
    result = run_action({"path": str(tmp_path / "s" / "pw")})
    assert not result.get("failed") and result["changed"] is True
    assert result["password"] == (tmp_path / "s" / "pw").read_text()
    key = run_action({"path": str(tmp_path / "s" / "key"), "kind": "bytes", "size": 64})
    assert "password" not in key and key["path"] == str(tmp_path / "s" / "key")


@pytest.mark.parametrize("args", [{}, {"path": "relative/pw"}, {"path": "/x", "length": 3}, {"path": "/x", "size": True}])
def test_the_action_rejects_bad_arguments(args):
    result = run_action(args)
    assert result["failed"] is True and "local_secret takes path" in result["msg"]


def test_the_action_reports_a_bad_kind_by_the_path(tmp_path):
    result = run_action({"path": str(tmp_path / "pw"), "kind": "pin"})
    assert result["failed"] is True and str(tmp_path / "pw") in result["msg"] and "kind" in result["msg"]


def test_in_a_plan_the_secret_is_made_too_and_no_log_keeps_it_out(tmp_path):
    """deepops plan (check mode) renders what a deploy would: the secret is made then, too."""
    path = tmp_path / "secrets" / "pw"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        f"    - deepops.cluster.local_secret: {{path: {path}}}\n      no_log: true\n"
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "--check", str(playbook),
         "-e", f"ansible_python_interpreter={sys.executable}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    password = path.read_text()
    assert len(password) == 32 and password not in proc.stdout
    assert json.loads(proc.stdout)["stats"]["localhost"]["changed"] == 1
