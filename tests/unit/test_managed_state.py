"""managed_files skips its module run where the run's first read shows every
entry in place (plugins/plugin_utils/managed_state.py): the comparison agrees
with the module itself, and the saving holds only until the run changes
anything, and only with the callback that tracks that."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.deepops.cluster.plugins.plugin_utils import managed_state
from local_playbook import run_local_playbook

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="owners other than the caller need root")


def _tree(tmp_path: Path) -> tuple[list[dict], Path]:
    """Paths in known states, and entries that match them or differ in one way each."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "same").write_text("a\n")
    (root / "same").chmod(0o644)
    (root / "other-mode").write_text("a\n")
    (root / "other-mode").chmod(0o600)
    (root / "other-content").write_text("b\n")
    (root / "linked-file").write_text("a\n")
    (root / "linked-file").chmod(0o644)
    (root / "via-link").symlink_to(root / "linked-file")
    (root / "dir").mkdir(mode=0o755)
    (root / "dir").chmod(0o755)
    (root / "dir-other-mode").mkdir()
    (root / "dir-other-mode").chmod(0o700)
    (root / "link").symlink_to("/etc/hostname")
    (root / "present").write_text("x")
    entries = [
        {"path": f"{root}/same", "content": "a\n"},
        {"path": f"{root}/same", "content": "a\n", "mode": "644"},
        {"path": f"{root}/same", "content": "a\n", "owner": "root", "group": "0"},
        {"path": f"{root}/same", "content": "a\n", "owner": "nobody"},
        {"path": f"{root}/same", "content": "a\n", "mode": "u=rw,g=r,o=r"},  # symbolic: the module decides
        {"path": f"{root}/same", "content": "a\n", "mode": "u=r"},
        {"path": f"{root}/other-mode", "content": "a\n"},
        {"path": f"{root}/other-content", "content": "a\n"},
        {"path": f"{root}/missing", "content": "a\n"},
        {"path": f"{root}/via-link", "content": "a\n"},
        {"path": f"{root}/dir", "state": "directory"},
        {"path": f"{root}/dir", "state": "directory", "mode": "0700"},
        {"path": f"{root}/dir-other-mode", "state": "directory"},
        {"path": f"{root}/new-dir", "state": "directory"},
        {"path": f"{root}/link", "state": "link", "target": "/etc/hostname"},
        {"path": f"{root}/link", "state": "link", "target": "/etc/hosts"},
        {"path": f"{root}/missing-link", "state": "link", "target": "/etc/hosts"},
        {"path": f"{root}/missing", "state": "absent"},
        {"path": f"{root}/present", "state": "absent"},
    ]
    return entries, root


@AS_ROOT
def test_in_place_agrees_with_the_module(tmp_path):
    """Each entry alone through the module in check mode, against the paths' states
    read by host_reads: in place wherever the module changes nothing, except where
    in_place leaves the decision to the module (a symbolic mode)."""
    entries, _root = _tree(tmp_path)
    defaults = {"mode": "0644"}
    tasks = [{"name": "read", "deepops.cluster.host_reads": {"file_states": sorted({entry["path"] for entry in entries}),
                                                             "file_states_key": "k"}}]
    tasks += [{"name": f"entry {index}", "check_mode": True,
               "deepops.cluster.managed_files": {**defaults, "files": [entry]}} for index, entry in enumerate(entries)]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "tasks": tasks}]))
    read, *results = run_local_playbook(playbook, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    states = read["hosts"]["localhost"]["file_states"]
    # The digests in the result are keyed: a file holding a password cannot be guessed back from them.
    same = states[entries[0]["path"]]
    assert "sha256" not in same and same["hmac"] != hashlib.sha256(b"a\n").hexdigest()
    verdicts = []
    for entry, result in zip(entries, results, strict=True):
        changed = result["hosts"]["localhost"]["changed"]
        judged = managed_state.in_place(entry, defaults, states[entry["path"]], "k")
        assert not managed_state.in_place(entry, defaults, states[entry["path"]], "another key") or "content" not in entry
        verdicts.append((judged, changed))
        if "=" in entry.get("mode", ""):
            assert not judged  # a symbolic mode is left to the module
        else:
            assert judged == (not changed), (entry, states[entry["path"]])
    assert (True, False) in verdicts and (False, True) in verdicts


def test_without_a_key_or_a_readable_state_nothing_is_in_place():
    assert managed_state.in_place({"path": "/x", "state": "absent"}, {}, {"exists": False}, "k")
    assert not managed_state.in_place({"path": "/x", "state": "absent"}, {}, {"exists": False}, "")
    assert not managed_state.in_place({"path": "/x", "state": "absent"}, {}, {"exists": True, "error": "denied"}, "k")
    assert not managed_state.in_place({"path": "/x", "content": ""}, {}, None, "k")


def _play(tmp_path: Path, tasks: list[dict]) -> Path:
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "tasks": tasks}]))
    return playbook


def _managed(name: str, path: Path, content: str) -> dict:
    return {"name": name, "deepops.cluster.managed_files": {"mode": "0644", "files": [{"path": str(path), "content": content}]}}


def _first_read(path: Path, key: str = "{{ lookup('deepops.cluster.managed_paths', 'key') }}") -> dict:
    """As the deploy's first task reads (playbooks/components/common.yml), with the run's key."""
    return {"name": "read", "deepops.cluster.host_reads": {"file_states": [str(path)], "file_states_key": key},
            "register": "deepops_host_reads"}


def test_the_module_runs_again_once_the_run_changed_something(tmp_path):
    target = tmp_path / "file"
    target.write_text("a\n")
    target.chmod(0o644)
    tasks = [_first_read(target), _managed("in place", target, "a\n"), _managed("differs", target, "b\n"),
             _managed("back to a, after a change", target, "a\n")]
    _read, in_place, differs, after = run_local_playbook(_play(tmp_path, tasks),
                                                         env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert in_place["hosts"]["localhost"].get("in_place_at_first_read") is True
    assert in_place["hosts"]["localhost"]["changed"] is False
    assert differs["hosts"]["localhost"]["changed"] is True
    # The first read said "a", as the file is again now; but the run changed something since.
    assert "in_place_at_first_read" not in after["hosts"]["localhost"]
    assert after["hosts"]["localhost"]["changed"] is True
    assert target.read_text() == "a\n"


def test_without_the_tracking_callback_the_module_always_runs(tmp_path):
    target = tmp_path / "file"
    target.write_text("a\n")
    target.chmod(0o644)
    # No run key without the callback: a read under any other key proves nothing to managed_files.
    _read, result = run_local_playbook(_play(tmp_path, [_first_read(target, "k"), _managed("in place", target, "a\n")]),
                                       env={"XDG_CACHE_HOME": str(tmp_path / "cache"),
                                            "ANSIBLE_CALLBACKS_ENABLED": "deepops.cluster.preload"})
    assert "in_place_at_first_read" not in result["hosts"]["localhost"]
    assert result["hosts"]["localhost"]["changed"] is False


def test_paths_written_are_remembered_for_the_next_run(tmp_path):
    target = tmp_path / "file"
    cache = tmp_path / "cache"
    tasks = [{"name": "known before", "ansible.builtin.debug": {"msg": "{{ query('deepops.cluster.managed_paths') }}"}},
             _managed("write", target, "a\n")]
    before, _write = run_local_playbook(_play(tmp_path, tasks), env={"XDG_CACHE_HOME": str(cache)})
    assert before["hosts"]["localhost"]["msg"] == []
    again, _write = run_local_playbook(_play(tmp_path, tasks), env={"XDG_CACHE_HOME": str(cache)})
    assert again["hosts"]["localhost"]["msg"] == [str(target)]


def test_the_cache(tmp_path):
    assert managed_state.known("inv.yml", "gpu01", tmp_path) == []
    managed_state.remember("inv.yml", "gpu01", ["/etc/b", "/etc/a", "/etc/b"], tmp_path)
    managed_state.remember("inv.yml", "gpu01", ["/etc/a", "/etc/c"], tmp_path)
    assert managed_state.known("inv.yml", "gpu01", tmp_path) == ["/etc/a", "/etc/b", "/etc/c"]
    assert managed_state.known("other.yml", "gpu01", tmp_path) == []  # per inventory and host
    managed_state.cache_file("inv.yml", "gpu01", tmp_path).write_text("{broken")
    assert managed_state.known("inv.yml", "gpu01", tmp_path) == []
    managed_state.cache_file("inv.yml", "gpu01", tmp_path).write_text(json.dumps(["relative", 3, "/ok"]))
    assert managed_state.known("inv.yml", "gpu01", tmp_path) == ["/ok"]


def test_the_deploy_reads_the_remembered_paths_first():
    play = yaml.safe_load((Path(__file__).resolve().parents[2] / "playbooks/components/common.yml").read_text())[0]
    [read] = [task for task in play["pre_tasks"] if task.get("register") == "deepops_host_reads"]
    assert play["pre_tasks"].index(read) == 0 and read["tags"] == ["always"]
    args = read["deepops.cluster.host_reads"]
    assert args["file_states"] == "{{ query('deepops.cluster.managed_paths') }}"
    assert args["file_states_key"] == "{{ lookup('deepops.cluster.managed_paths', 'key') }}"
