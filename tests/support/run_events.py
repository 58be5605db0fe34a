"""What a deepops run did, task by task, from the job events in its artifacts (for the integration tests)."""

from __future__ import annotations

import json
from pathlib import Path


def task_statuses(run: dict, task: str) -> dict[str, list[str]]:
    """{host: the runner events of TASK there, in order: ok, skipped, failed...}; RUN is a run's --json."""
    statuses: dict[str, list[str]] = {}
    for path in sorted(Path(run["artifacts"], "job_events").glob("*.json")):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if data.get("task") == task and event["event"].startswith("runner_on_") and event["event"] != "runner_on_start":
            statuses.setdefault(data.get("host"), []).append(event["event"].removeprefix("runner_on_"))
    return statuses
