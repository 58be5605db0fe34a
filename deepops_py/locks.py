"""One playbook run per inventory at a time.

Every command that runs a playbook (deploy, plan, node add, validate) holds
the inventory's lock for the whole run, so two of them never work on the same
hosts at once. The lock is an advisory ``flock`` on
``<state dir>/locks/<digest>.lock`` (the digest of the inventory's resolved
path). The kernel releases it when the holding process ends, however it ends
(SIGKILL and a crash included): a lock whose holder is gone is simply free,
and the next run takes it and overwrites the old holder's record. The file
records who holds it, so a second run can name that run.

A command made of several runs (``deepops upgrade``, one run per step) takes
the lock once around all of them: within the process that holds it, taking
it again is the same lock, released only by the outermost holder, so no
other command slips in between two steps.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from deepops_py import paths
from deepops_py.errors import EXIT_BUSY, DeepopsError


def lock_path(inventory: Path) -> Path:
    digest = hashlib.sha256(str(Path(inventory).resolve()).encode()).hexdigest()[:16]
    return paths.state_dir() / "locks" / f"{digest}.lock"


def describe_holder(record: dict) -> str:
    """'deploy run 20261201-... (pid 1234 on host, since 2026-12-01 05:12:34)' from a lock file's record."""
    what = f"{record.get('command', 'a deepops command')}"
    if record.get("run_id"):
        what += f" run {record['run_id']}"
    started = record.get("started", "")
    try:
        started = datetime.fromisoformat(started).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        pass
    return f"{what} (pid {record.get('pid', '?')} on {record.get('hostname', '?')}, since {started or '?'})"


class InventoryLock:
    """The held lock: ``record_run`` adds the run id to the holder record once it exists."""

    def __init__(self, handle, record: dict):
        self._handle = handle
        self._record = record

    def record_run(self, run_id: str) -> None:
        self._record["run_id"] = run_id
        _write_record(self._handle, self._record)


# The locks this process holds, by lock file: a nested inventory_lock gets the held one.
_held: dict[Path, InventoryLock] = {}


@contextmanager
def inventory_lock(inventory: Path, command: str, *, wait: bool = False) -> Iterator[InventoryLock]:
    """Hold INVENTORY's lock for the body. Busy: wait (WAIT) or raise DeepopsError naming the holder.

    Already held by this process: the body runs under that lock, which stays held after it.
    """
    path = lock_path(inventory)
    if path in _held:
        yield _held[path]
        return
    paths.make_dir(path.parent)
    # O_CLOEXEC (Python's default): ansible-playbook never inherits the lock,
    # so it is released with this process and not kept by a child.
    with open(path, "a+", encoding="utf-8") as handle:
        os.chmod(path, 0o600)
        if not _try_lock(handle):
            holder = describe_holder(_read_record(handle))
            if not wait:
                raise DeepopsError(
                    f"{Path(inventory).resolve()} is in use by deepops {holder}.\n"
                    "Wait for it to finish, or run again with --wait to queue behind it.",
                    exit_code=EXIT_BUSY,
                )
            print(f"Waiting for deepops {holder} to finish...", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        record = {
            "command": command,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "inventory": str(Path(inventory).resolve()),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        _write_record(handle, record)
        _held[path] = InventoryLock(handle, record)
        try:
            yield _held[path]
        finally:
            del _held[path]
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_record(handle) -> dict:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(handle, record: dict) -> None:
    handle.seek(0)
    handle.truncate(0)
    handle.write(json.dumps(record))
    handle.flush()
