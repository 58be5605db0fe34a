"""Past runs, read back from ``.deepops/runs/<id>/run.json`` (written by ``runner``)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from deepops_py import paths
from deepops_py.errors import InputError
from deepops_py.run_results import RUN_FILE, STATUS_INTERRUPTED, STATUS_RUNNING, RunResult

_MAX_LISTED_IDS = 20


@dataclass(frozen=True)
class RunRecord:
    """One line of `deepops runs`."""

    id: str
    command: str
    start: str
    duration: float | None
    result: str  # "ok", "failed", "running" or "interrupted"

    def as_dict(self) -> dict:
        return asdict(self)


def _read(run_file: Path) -> dict | None:
    try:
        data = json.loads(run_file.read_text())
    except (OSError, ValueError):
        return None  # unreadable or foreign directory: not a run we can show
    return data if isinstance(data, dict) and data.get("run_id") else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _effective_status(data: dict) -> str:
    """A run still marked running whose process is gone on this machine was killed: show it as interrupted."""
    status = str(data.get("status") or STATUS_RUNNING)
    if status != STATUS_RUNNING:
        return status
    pid, hostname = data.get("pid"), data.get("hostname")
    if isinstance(pid, int) and hostname == socket.gethostname() and not _process_alive(pid):
        return STATUS_INTERRUPTED
    return status


def _runs() -> list[dict]:
    runs_dir = paths.runs_dir()
    if not runs_dir.is_dir():
        return []
    runs = [data for run_file in runs_dir.glob(f"*/{RUN_FILE}") if (data := _read(run_file)) is not None]
    runs.sort(key=lambda data: (str(data.get("start") or ""), str(data["run_id"])), reverse=True)
    return runs


def list_runs() -> list[RunRecord]:
    """Every recorded run, newest first."""
    return [
        RunRecord(
            id=str(data["run_id"]),
            command=str(data.get("command") or ""),
            start=str(data.get("start") or ""),
            duration=data.get("duration"),
            result=_effective_status(data),
        )
        for data in _runs()
    ]


def _known_ids_hint(ids: list[str]) -> str:
    if not ids:
        return "No runs recorded yet."
    shown = ", ".join(ids[:_MAX_LISTED_IDS])
    more = f" (and {len(ids) - _MAX_LISTED_IDS} older)" if len(ids) > _MAX_LISTED_IDS else ""
    return f"Known runs, newest first: {shown}{more}"


def load_run(run_id: str) -> RunResult:
    """The stored result of one run; a unique prefix of its id is enough (e.g. without the random suffix)."""
    runs = _runs()
    ids = [str(data["run_id"]) for data in runs]
    matches = [data for data in runs if data["run_id"] == run_id] or [
        data for data in runs if run_id and str(data["run_id"]).startswith(run_id)
    ]
    if not matches:
        raise InputError(f"No run with id {run_id!r}. {_known_ids_hint(ids)}")
    if len(matches) > 1:
        candidates = ", ".join(str(data["run_id"]) for data in matches)
        raise InputError(f"Run id {run_id!r} is ambiguous; it matches: {candidates}")
    data = dict(matches[0])
    data["status"] = _effective_status(data)
    return RunResult.from_dict(data)


def _local_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def print_runs(records: list[RunRecord], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if not records:
        console.print(f"No runs recorded under {paths.runs_dir()} yet.")
        return
    colours = {"ok": "green", "failed": "red", "interrupted": "yellow", "running": "cyan"}
    table = Table()
    # ids are copied into `deepops runs show`: never wrap or truncate them
    table.add_column("id", no_wrap=True, min_width=max(len(record.id) for record in records))
    table.add_column("command", min_width=7)
    table.add_column("start", no_wrap=True)
    table.add_column("duration", justify="right", min_width=8)
    table.add_column("result")
    for record in records:
        duration = f"{record.duration:.1f}s" if isinstance(record.duration, (int, float)) else "-"
        colour = colours.get(record.result, "white")
        table.add_row(record.id, record.command, _local_time(record.start), duration, f"[{colour}]{record.result}[/{colour}]")
    console.print(table)
