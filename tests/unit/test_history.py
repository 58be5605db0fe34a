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
