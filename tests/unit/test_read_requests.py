"""host_reads tasks answered from the run's first read (plugins/plugin_utils/read_requests.py, plugins/action/host_reads.py).

What matters: the first read makes the reads remembered from later tasks and
keeps their results apart from its own; a later task is answered exactly as
its module would answer, or not at all (a read missing, a status it does not
accept, a change in the run); and an ansible-playbook run shows it: the
second run answers from the first read, a run with a change before the later
task does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.plugin_utils import read_requests

REPO = Path(__file__).resolve().parents[2]

FIRST = {"commands": [{"name": "passwd", "argv": ["getent", "passwd"]}], "files": {"hosts": "/etc/hosts"},
         "file_states": ["/etc/x"], "file_states_key": "k"}
LATER = {"commands": [{"name": "findmnt", "argv": ["findmnt", "--json"]},
                      {"name": "written", "argv": ["grep", "-r", "x", "/etc"], "ok_rc": [0, 1]}],
         "files": {"modulespath": "/etc/lmod/modulespath"}, "paths": {"binary": "/usr/bin/dcgm-exporter"}}


def _module_result(args: dict) -> dict:
    """What host_reads returns for ARGS, made up: each command exits 1 if it is grep, else 0."""
    return {"changed": False,
            "commands": {spec["name"]: {"rc": 1 if spec["argv"][0] == "grep" else 0, "stdout": spec["argv"][0],
                                        "stderr": "", "stdout_lines": [spec["argv"][0]]}
                         for spec in args["commands"]},
            "files": {name: {"exists": True, "content": path} for name, path in args["files"].items()},
            "paths": {name: {"exists": True, "isdir": False} for name, path in args["paths"].items()},
            "file_states": {}}


def test_the_first_read_makes_the_remembered_reads_and_keeps_their_results_apart():
    keys = read_requests.requests_of(LATER) + read_requests.requests_of({"files": {"again": "/etc/hosts"}})
    args = read_requests.with_remembered(FIRST, keys)

    # Its own reads and options as they were, the later task's beside them (a read it makes already is not added).
    assert args["commands"][0] == FIRST["commands"][0] and args["files"]["hosts"] == "/etc/hosts"
    assert args["file_states"] == ["/etc/x"] and args["file_states_key"] == "k"
    added = [spec for spec in args["commands"] if spec["name"].startswith("remembered:")]
    assert sorted(spec["argv"][0] for spec in added) == ["findmnt", "grep"]
    assert all(spec["may_fail"] for spec in added)  # the first read never fails on another task's read
    assert list(args["files"].values()).count("/etc/hosts") == 1

    result = _module_result(args)
    answers = read_requests.first_read_answers(args, result)

    assert len(answers) == 4
    assert list(result["commands"]) == ["passwd"] and list(result["files"]) == ["hosts"] and result["paths"] == {}
    assert FIRST["commands"][0]["name"] == "passwd"  # the caller's arguments are left alone
    answered = read_requests.answer(LATER, answers)
    expected = _module_result(LATER)
    assert answered == {key: expected[key] for key in ("commands", "files", "paths", "file_states")}


def _answers_for(args: dict) -> dict:
    first = read_requests.with_remembered({}, read_requests.requests_of(args))
    return read_requests.first_read_answers(first, _module_result(first))


def test_a_task_is_not_answered_where_a_read_is_missing_or_its_status_is_not_accepted():
    answers = _answers_for(LATER)

    assert read_requests.answer({**LATER, "files": {"other": "/etc/other"}}, answers) is None
    strict = {"commands": [{"name": "written", "argv": ["grep", "-r", "x", "/etc"]}]}  # ok_rc [0], grep exited 1
    assert read_requests.answer(strict, answers) is None
    tolerant = {"commands": [{"name": "written", "argv": ["grep", "-r", "x", "/etc"], "may_fail": True}]}
    assert read_requests.answer(tolerant, answers)["commands"]["written"]["rc"] == 1
    assert read_requests.answer({**LATER, "file_states": ["/etc/x"]}, answers) is None


def test_reads_are_remembered_per_inventory_and_host_and_forgotten_when_unused(tmp_path, monkeypatch):
    keys = read_requests.requests_of(LATER)
    read_requests.remember("/inv/a.yml", "gpu01", keys, tmp_path)

    assert sorted(read_requests.known("/inv/a.yml", "gpu01", tmp_path)) == sorted(keys)
    assert read_requests.known("/inv/a.yml", "gpu02", tmp_path) == {}
    assert read_requests.known("/inv/b.yml", "gpu01", tmp_path) == {}
    assert oct(read_requests.cache_file("/inv/a.yml", "gpu01", tmp_path).parent.stat().st_mode & 0o777) == "0o700"

    later = time.time() + read_requests.STALE_AFTER_S + 60
    monkeypatch.setattr(read_requests.time, "time", lambda: later)
    assert read_requests.known("/inv/a.yml", "gpu01", tmp_path) == {}

    read_requests.cache_file("/inv/a.yml", "gpu03", tmp_path).write_text("not json")
    assert read_requests.known("/inv/a.yml", "gpu03", tmp_path) == {}


def test_a_full_list_starts_again_with_the_reads_of_the_task_that_overflows_it(tmp_path, monkeypatch):
    monkeypatch.setattr(read_requests, "MAX_READS", 3)
    read_requests.remember(None, "h", [json.dumps(["paths", f"/p{n}"]) for n in range(3)], tmp_path)
    read_requests.remember(None, "h", [json.dumps(["paths", "/new"])], tmp_path)

    assert list(read_requests.known(None, "h", tmp_path)) == [json.dumps(["paths", "/new"])]


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: First read
      deepops.cluster.host_reads:
        files: {hosts: /etc/hosts}
        include_remembered: true
      register: deepops_host_reads

    - name: A change in the run
      ansible.builtin.debug:
        msg: changed
      changed_when: true
      when: change | default(false) | bool

    - name: Later read
      deepops.cluster.host_reads:
        commands:
          - {name: content, argv: [cat, "{{ marker }}"]}
        paths: {marker: "{{ marker }}"}
      register: later

    - name: Show
      ansible.builtin.debug:
        msg: "LATER {{ later.answered_by_first_read | default(false) }} {{ later.commands.content.stdout }}"
"""


def _playbook(tmp_path: Path, *extra: str) -> str:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), "DEEPOPS_PAYLOAD_CACHE_DIR": "", "DEEPOPS_TEMPLATE_CACHE_DIR": ""}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"marker={tmp_path / 'marker'}",
               *extra, str(tmp_path / "play.yml")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if "LATER " in line]
    return line.split("LATER ", 1)[1].rstrip('"')


@pytest.mark.parametrize("check", [False, True], ids=["deploy", "check mode"])
def test_ansible_playbook_answers_a_later_read_from_the_first_read_of_a_run_that_changed_nothing(tmp_path, check):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "marker").write_text("one")
    extra = ["--check"] if check else []

    assert _playbook(tmp_path, *extra) == "False one"  # first run: the later task reads, and is remembered
    assert _playbook(tmp_path, *extra) == "True one"  # the first read made its reads
    (tmp_path / "marker").write_text("two")
    assert _playbook(tmp_path, *extra) == "True two"  # made at the first read of this run
    assert _playbook(tmp_path, *extra, "-e", "change=true") == "False two"  # a change since: it reads again


def test_a_read_asked_for_again_within_the_hour_writes_nothing(tmp_path, monkeypatch):
    keys = read_requests.requests_of(LATER)
    read_requests.remember(None, "h", keys, tmp_path)
    target = read_requests.cache_file(None, "h", tmp_path)
    written = target.stat().st_mtime_ns

    read_requests.remember(None, "h", keys, tmp_path)
    assert target.stat().st_mtime_ns == written
    later = time.time() + read_requests.REFRESH_AFTER_S + 60
    monkeypatch.setattr(read_requests.time, "time", lambda: later)
    read_requests.remember(None, "h", keys, tmp_path)
    assert set(read_requests.known(None, "h", tmp_path).values()) == {later}
