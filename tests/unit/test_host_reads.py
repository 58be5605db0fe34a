"""The host_reads module run as Ansible runs it (ansible-playbook, local): every
read in one call, results by name, nothing changed, in check mode too, and a
failing or malformed read named before or instead of a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, tasks: list[dict], *options: str) -> dict[str, dict]:
    """Each task's result on localhost, by task name."""
    play = [{"name": "host_reads", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook),
         "-e", f"ansible_python_interpreter={sys.executable}", *options],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return {task["task"]["name"]: task["hosts"]["localhost"]
            for play in json.loads(proc.stdout)["plays"] for task in play["tasks"]}


def _task(name: str, **args) -> dict:
    return {"name": name, "deepops.cluster.host_reads": args, "ignore_errors": True}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "record.json").write_text('{"users": ["alice"]}\n')
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "dir").mkdir()
    return tmp_path


@pytest.mark.parametrize("check", [False, True], ids=["run", "check mode"])
def test_every_read_comes_back_by_name_and_nothing_changes(tree: Path, check: bool) -> None:
    task = _task(
        "reads",
        commands=[
            {"name": "echo", "argv": ["printf", "a\\nb\\n"]},
            # grep's "no match" is a status the caller allows.
            {"name": "no_match", "argv": ["grep", "-r", "no-such-text", str(tree / "dir")], "ok_rc": [0, 1]},
            {"name": "missing", "argv": ["/nonexistent/program"], "may_fail": True},
            {"name": "fails", "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"], "may_fail": True},
        ],
        files={"record": str(tree / "record.json"), "gone": str(tree / "gone.json"), "latin1": str(tree / "latin1.txt")},
        paths={"dir": str(tree / "dir"), "file": str(tree / "record.json"), "gone": str(tree / "gone")},
    )
    result = _run(tree, [task], *(["--check"] if check else []))["reads"]
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    commands = result["commands"]
    assert commands["echo"] == {"rc": 0, "stdout": "a\nb", "stderr": "", "stdout_lines": ["a", "b"]}
    assert commands["no_match"]["rc"] == 1
    assert commands["missing"]["rc"] == 127 and "nonexistent" in commands["missing"]["stderr"]
    assert (commands["fails"]["rc"], commands["fails"]["stdout"], commands["fails"]["stderr"]) == (3, "out", "err")
    assert result["files"] == {"record": {"exists": True, "content": '{"users": ["alice"]}\n'},
                               "gone": {"exists": False}, "latin1": {"exists": True, "content": "caf\ufffd\n"}}
    assert result["paths"] == {"dir": {"exists": True, "isdir": True}, "file": {"exists": True, "isdir": False},
                               "gone": {"exists": False, "isdir": False}}


def test_a_command_that_fails_fails_the_task_naming_it(tree: Path) -> None:
    task = _task("reads", commands=[{"name": "passwd", "argv": ["sh", "-c", "echo broken >&2; exit 2"]}])
    result = _run(tree, [task])["reads"]
    assert result["failed"] is True
    assert result["msg"] == "passwd: sh -c echo broken >&2; exit 2 exited with 2: broken"


def test_bad_arguments_run_nothing_and_say_every_problem(tree: Path) -> None:
    marker = tree / "ran"
    task = _task(
        "reads",
        commands=[{"name": "touch", "argv": ["touch", str(marker)]}, {"name": "touch", "argv": ["true"]},
                  {"name": "empty", "argv": []}],
        files={"relative": "etc/passwd"},
        paths={"number": 5},
    )
    result = _run(tree, [task])["reads"]
    assert result["failed"] is True and not marker.exists()
    for problem in ("commands: touch is named twice", "commands.empty.argv is empty",
                    "files.relative must be an absolute path, got 'etc/passwd'", "paths.number must be an absolute path"):
        assert problem in result["msg"], result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_commands_run_side_by_side_and_the_first_failure_in_order_is_named(tree: Path) -> None:
    """The first command waits (up to a minute) for a file the second one
    writes: run one after the other, it would wait in vain and fail."""
    flag = tree / "flag"
    waits = f"for i in $(seq 600); do [ -e {flag} ] && exit 0; sleep 0.1; done; exit 1"
    task = _task("reads", commands=[{"name": "waits", "argv": ["sh", "-c", waits]},
                                    {"name": "writes", "argv": ["touch", str(flag)]}])
    result = _run(tree, [task])["reads"]
    assert result.get("failed") is not True, result
    assert result["commands"]["waits"]["rc"] == 0

    failing = _task("reads", commands=[{"name": "first", "argv": ["sh", "-c", "sleep 1; exit 4"]},
                                       {"name": "second", "argv": ["sh", "-c", "exit 5"]}])
    failed = _run(tree, [failing])["reads"]
    assert failed["failed"] is True and failed["msg"].startswith("first: ")
