"""Past runs, read back from ``.deepops/runs/<id>/run.json`` (written by ``runner``).

Only the last ``$DEEPOPS_RUNS_KEEP`` runs are kept (default 50, 0 keeps them
all): when a run starts, ``prune_runs`` removes the oldest finished ones
beyond that number. A run still running is never removed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from deepops_py import paths
from deepops_py.errors import InputError
from deepops_py.run_results import RUN_FILE, STATUS_INTERRUPTED, STATUS_RUNNING, EventCollector, RunResult

_MAX_LISTED_IDS = 20

RUNS_KEEP_ENV = "DEEPOPS_RUNS_KEEP"
DEFAULT_RUNS_KEEP = 50
# A run directory is renamed to this prefix first, then deleted: readers never see half a run.
_REMOVING_PREFIX = ".removing-"


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


def _run_entries() -> list[tuple[Path, dict]]:
    """(directory, run.json data) of every recorded run, newest first."""
    runs_dir = paths.runs_dir()
    if not runs_dir.is_dir():
        return []
    entries = [
        (run_file.parent, data) for run_file in runs_dir.glob(f"*/{RUN_FILE}") if (data := _read(run_file)) is not None
    ]
    entries.sort(key=lambda entry: (str(entry[1].get("start") or ""), str(entry[1]["run_id"])), reverse=True)
    return entries


def _runs() -> list[dict]:
    return [data for _, data in _run_entries()]


def runs_keep(environ: dict[str, str] | None = None) -> int:
    """How many runs to keep: ``$DEEPOPS_RUNS_KEEP``, default 50; 0 keeps every run."""
    raw = (os.environ if environ is None else environ).get(RUNS_KEEP_ENV, "").strip()
    if not raw:
        return DEFAULT_RUNS_KEEP
    if not raw.isdigit():
        raise InputError(
            f"${RUNS_KEEP_ENV}={raw!r}: expected how many runs to keep, a whole number "
            f"(default {DEFAULT_RUNS_KEEP}; 0 keeps every run)"
        )
    return int(raw)


def prune_runs(keep: int | None = None) -> list[str]:
    """Remove the oldest finished runs beyond the newest ``keep``; return the ids removed, oldest first.

    Runs still running are never removed (they count towards ``keep``);
    directories that are not runs are left alone. A run that cannot be
    removed (permissions, another deepops removing it) is skipped: pruning
    never fails the command that triggered it.
    """
    keep = runs_keep() if keep is None else keep
    if keep <= 0:
        return []
    runs_dir = paths.runs_dir()
    removed = []
    for run_dir, data in reversed(_run_entries()[keep:]):
        run_id = str(data["run_id"])
        if _effective_status(data) == STATUS_RUNNING or run_dir.name != run_id or run_dir.is_symlink():
            continue
        doomed = runs_dir / f"{_REMOVING_PREFIX}{run_id}-{secrets.token_hex(2)}"
        try:
            run_dir.rename(doomed)
        except OSError:
            continue
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(run_id)
    # leftovers of a removal that was interrupted
    for leftover in runs_dir.glob(f"{_REMOVING_PREFIX}*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
    return removed


def keep_note(keep: int) -> str:
    """The line `deepops runs` ends with."""
    if keep <= 0:
        return f"Keeping every run (${RUNS_KEEP_ENV}=0)."
    return (
        f"Keeping the last {keep} runs (${RUNS_KEEP_ENV}, default {DEFAULT_RUNS_KEEP}); "
        "older finished runs are removed when a new run starts."
    )


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
    recorded = str(data.get("status") or STATUS_RUNNING)
    data["status"] = _effective_status(data)
    result = RunResult.from_dict(data)
    if recorded == STATUS_RUNNING and result.status == STATUS_INTERRUPTED:
        _replay_events(result)
    return result


def _replay_events(result: RunResult) -> None:
    """A run whose process died (SIGKILL, a crash) never wrote its results:
    rebuild them from the job events ansible-runner stored as the run went."""
    collector = EventCollector()
    events = Path(result.artifacts) / "job_events"
    for path in sorted(events.glob("*.json"), key=lambda path: int(path.name.split("-", 1)[0] or 0)):
        try:
            collector.handle(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # the event being written when the process died
    result.hosts = collector.host_results()
    result.error = (
        "interrupted: its process ended before the run finished (killed, or the machine went down); "
        f"the counts are what its {sum(1 for _ in events.glob('*.json'))} job events recorded"
    )


def _local_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def print_runs(records: list[RunRecord], console=None, *, keep: int | None = None) -> None:
    """The runs as a table, then which runs are kept (``keep``, default ``runs_keep()``)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    note = keep_note(runs_keep() if keep is None else keep)
    if not records:
        console.print(f"No runs recorded under {paths.runs_dir()} yet.")
        console.print(note, highlight=False)
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
    console.print(note, highlight=False)
