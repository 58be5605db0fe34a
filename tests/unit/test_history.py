"""Run history read back from run.json files (written here by hand; test_runner covers real runs)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys

import pytest
from rich.console import Console

from deepops_py import history
from deepops_py.errors import InputError


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "state" / "runs"
    path.mkdir(parents=True)
    return path


def write_run(runs_dir, run_id, *, start, status="ok", duration=1.5, command="deploy", **extra):
    run_dir = runs_dir / run_id
    run_dir.mkdir()
    data = {
        "run_id": run_id, "command": command, "playbook": "/p/site.yml", "inventory": "/i.yml", "start": start,
        "artifacts": str(run_dir), "status": status, "duration": duration, "rc": 0, "runner_status": "successful",
        "check": command == "plan", "request": {}, "hosts": {"gpu01": {"ok": 3, "changed": 1, "changed_tasks": ["X"]}},
        **extra,
    }
    (run_dir / "run.json").write_text(json.dumps(data))
    return data


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_list_runs_newest_first_with_fields(runs_dir):
    write_run(runs_dir, "20261130-100000-deploy-aaaa", start="2026-11-30T10:00:00+00:00")
    write_run(runs_dir, "20261130-110000-plan-bbbb", start="2026-11-30T11:00:00+00:00", command="plan", status="failed")
    (runs_dir / "not-a-run").mkdir()
    (runs_dir / "broken").mkdir()
    (runs_dir / "broken" / "run.json").write_text("{not json")

    records = history.list_runs()
    assert [record.id for record in records] == ["20261130-110000-plan-bbbb", "20261130-100000-deploy-aaaa"]
    assert records[0].as_dict() == {
        "id": "20261130-110000-plan-bbbb", "command": "plan", "start": "2026-11-30T11:00:00+00:00",
        "duration": 1.5, "result": "failed",
    }


def test_no_runs_dir_means_no_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "nothing"))
    assert history.list_runs() == []


def test_running_run_whose_process_died_is_interrupted(runs_dir):
    write_run(runs_dir, "dead", start="2026-11-30T10:00:00+00:00", status="running", duration=None,
              pid=_dead_pid(), hostname=socket.gethostname())
    write_run(runs_dir, "alive", start="2026-11-30T09:00:00+00:00", status="running", duration=None,
              pid=os.getpid(), hostname=socket.gethostname())
    results = {record.id: record.result for record in history.list_runs()}
    assert results == {"dead": "interrupted", "alive": "running"}
    assert history.load_run("dead").status == "interrupted"


def test_load_run_by_id_and_unique_prefix(runs_dir):
    write_run(runs_dir, "20261130-100000-deploy-aaaa", start="2026-11-30T10:00:00+00:00")
    result = history.load_run("20261130-100000-deploy-aaaa")
    assert result.ok and result.hosts["gpu01"].changed_tasks == ["X"] and result.hosts["gpu01"].host == "gpu01"
    assert history.load_run("20261130-100000-deploy").run_id == "20261130-100000-deploy-aaaa"


def test_load_run_unknown_lists_known_ids(runs_dir):
    write_run(runs_dir, "20261130-100000-deploy-aaaa", start="2026-11-30T10:00:00+00:00")
    write_run(runs_dir, "20261130-100000-deploy-bbbb", start="2026-11-30T10:00:00+00:00")
    with pytest.raises(InputError) as raised:
        history.load_run("nope")
    assert raised.value.exit_code == 2
    assert "20261130-100000-deploy-aaaa" in raised.value.message and "20261130-100000-deploy-bbbb" in raised.value.message
    with pytest.raises(InputError, match="ambiguous"):
        history.load_run("20261130-100000")


def test_print_runs_table(runs_dir):
    write_run(runs_dir, "20261130-100000-deploy-aaaa", start="2026-11-30T10:00:00+00:00", duration=12.34)
    out = io.StringIO()
    history.print_runs(history.list_runs(), console=Console(file=out, width=200))
    text = out.getvalue()
    assert "20261130-100000-deploy-aaaa" in text and "12.3s" in text and "ok" in text

    out = io.StringIO()
    history.print_runs([], console=Console(file=out, width=200))
    assert "No runs recorded" in out.getvalue()


# --------------------------------------------------------------------------
# keeping the last $DEEPOPS_RUNS_KEEP runs


def _finished(runs_dir, count, *, hour=10):
    """``count`` finished runs, a minute apart, oldest first, long ago (a new run is newer); returns their ids."""
    ids = []
    for minute in range(count):
        run_id = f"20200101-{hour:02d}{minute:02d}00-deploy-{minute:04x}"
        write_run(runs_dir, run_id, start=f"2020-01-01T{hour:02d}:{minute:02d}:00+00:00",
                  status="failed" if minute % 2 else "ok")
        ids.append(run_id)
    return ids


def test_runs_keep_default_setting_and_bad_values(monkeypatch):
    monkeypatch.delenv("DEEPOPS_RUNS_KEEP", raising=False)
    assert history.runs_keep() == history.DEFAULT_RUNS_KEEP == 50
    assert history.runs_keep({"DEEPOPS_RUNS_KEEP": " 7 "}) == 7
    assert history.runs_keep({"DEEPOPS_RUNS_KEEP": "0"}) == 0
    assert history.runs_keep({"DEEPOPS_RUNS_KEEP": ""}) == 50
    for bad in ("-1", "ten", "2.5"):
        with pytest.raises(InputError) as raised:
            history.runs_keep({"DEEPOPS_RUNS_KEEP": bad})
        assert raised.value.exit_code == 2 and "$DEEPOPS_RUNS_KEEP" in raised.value.message and bad in raised.value.message


def test_prune_removes_the_oldest_finished_runs_beyond_keep(runs_dir):
    ids = _finished(runs_dir, 6)
    assert history.prune_runs(4) == ids[:2]  # oldest first
    assert [record.id for record in history.list_runs()] == ids[:1:-1]
    assert sorted(path.name for path in runs_dir.iterdir()) == sorted(ids[2:])  # nothing half-removed left
    assert history.prune_runs(4) == []  # already within the limit


def test_prune_never_removes_a_running_run(runs_dir):
    alive = write_run(runs_dir, "20200101-090000-deploy-live", start="2020-01-01T09:00:00+00:00", status="running",
                      duration=None, pid=os.getpid(), hostname=socket.gethostname())["run_id"]
    elsewhere = write_run(runs_dir, "20200101-090100-deploy-away", start="2020-01-01T09:01:00+00:00",
                          status="running", duration=None, pid=1, hostname="another-machine")["run_id"]
    dead = write_run(runs_dir, "20200101-090200-deploy-dead", start="2020-01-01T09:02:00+00:00", status="running",
                     duration=None, pid=_dead_pid(), hostname=socket.gethostname())["run_id"]
    ids = _finished(runs_dir, 3)
    removed = history.prune_runs(2)
    # the oldest runs are beyond the limit, but two of them may still be running (here, or on another machine)
    assert removed == [dead, ids[0]]
    assert {record.id for record in history.list_runs()} == {alive, elsewhere, *ids[1:]}


def test_prune_leaves_other_directories_alone(runs_dir):
    ids = _finished(runs_dir, 3)
    (runs_dir / "not-a-run").mkdir()
    (runs_dir / "notes.txt").write_text("mine")
    copied = runs_dir / "copy-of-a-run"  # run.json names another id: not this directory's run
    write_run(runs_dir, "copy-of-a-run", start="2020-01-01T08:00:00+00:00")
    data = json.loads((copied / "run.json").read_text())
    (copied / "run.json").write_text(json.dumps({**data, "run_id": "20200101-080000-deploy-orig"}))
    (runs_dir / ".removing-20200101-070000-deploy-0000-ab12").mkdir()  # an interrupted removal
    assert history.prune_runs(1) == ids[:2]
    assert sorted(path.name for path in runs_dir.iterdir()) == sorted(["not-a-run", "notes.txt", "copy-of-a-run", ids[2]])


def test_keep_zero_keeps_every_run(runs_dir, monkeypatch):
    ids = _finished(runs_dir, 4)
    monkeypatch.setenv("DEEPOPS_RUNS_KEEP", "0")
    assert history.prune_runs() == []
    assert len(history.list_runs()) == len(ids)


def test_print_runs_says_how_many_runs_are_kept(runs_dir, monkeypatch):
    _finished(runs_dir, 1)
    monkeypatch.delenv("DEEPOPS_RUNS_KEEP", raising=False)
    out = io.StringIO()
    history.print_runs(history.list_runs(), console=Console(file=out, width=200))
    assert "Keeping the last 50 runs ($DEEPOPS_RUNS_KEEP, default 50)" in out.getvalue()

    out = io.StringIO()
    history.print_runs([], console=Console(file=out, width=200), keep=0)
    assert "No runs recorded" in out.getvalue() and "Keeping every run ($DEEPOPS_RUNS_KEEP=0)" in out.getvalue()


def test_cli_runs_shows_the_setting_and_refuses_a_bad_one(runs_dir, monkeypatch):
    from click.testing import CliRunner

    from deepops_py.cli import main

    _finished(runs_dir, 2)
    monkeypatch.setenv("DEEPOPS_RUNS_KEEP", "20")
    result = CliRunner().invoke(main, ["runs"])
    assert result.exit_code == 0, result.output
    assert "Keeping the last 20 runs ($DEEPOPS_RUNS_KEEP" in " ".join(result.output.split())

    monkeypatch.setenv("DEEPOPS_RUNS_KEEP", "lots")
    result = CliRunner().invoke(main, ["runs"])
    assert result.exit_code == 2 and "DEEPOPS_RUNS_KEEP='lots'" in result.output


def test_a_new_run_prunes_and_a_bad_setting_stops_it_first(runs_dir, tmp_path, monkeypatch):
    """Through the runner, with a real (tiny) playbook run."""
    from deepops_py import runner
    from deepops_py.progress import SilentProgress

    content = tmp_path / "content"
    (content / "playbooks").mkdir(parents=True)
    (content / "ansible.cfg").write_text("[defaults]\nretry_files_enabled = False\n")
    (content / "playbooks" / "site.yml").write_text(
        "- name: Nothing\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Noop\n      ansible.builtin.meta: noop\n"
    )
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        f"all:\n  hosts:\n    here: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n"
    )
    ids = _finished(runs_dir, 4)
    request = runner.RunRequest(command="deploy", playbook="site.yml", inventory=inventory, content_dir=content)

    monkeypatch.setenv("DEEPOPS_RUNS_KEEP", "x")
    with pytest.raises(InputError):
        runner.run_playbook(request, progress=SilentProgress())
    assert len(history.list_runs()) == len(ids)  # nothing recorded, nothing removed

    monkeypatch.setenv("DEEPOPS_RUNS_KEEP", "2")
    result = runner.run_playbook(request, progress=SilentProgress())
    assert result.ok, result.error
    assert [record.id for record in history.list_runs()] == [result.run_id, ids[-1]]
