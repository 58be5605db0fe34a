"""Live progress of a playbook run on stderr, fed by ansible-runner events.

Two renderings of the same per-host state: a rich Live table when stderr is a
terminal, and concise plain lines otherwise (CI logs): one line per task
start and one per changed, failed or unreachable host result. Events arrive
on ansible-runner's thread; the Live table is redrawn on rich's own refresh
thread, so the shared state sits behind a lock.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Protocol, TextIO


@dataclass
class HostProgress:
    done: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    current_task: str = ""


class ProgressView(Protocol):
    def start(self) -> None: ...

    def handle(self, event: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


class ProgressState:
    """Per-host task counts and current task, updated from events."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hosts: dict[str, HostProgress] = {}
        self.play = ""
        self.task = ""

    def _host(self, name: str) -> HostProgress:
        return self.hosts.setdefault(name, HostProgress())

    def update(self, event: dict[str, Any]) -> None:
        kind = event.get("event") or ""
        data = event.get("event_data") or {}
        with self.lock:
            if kind == "playbook_on_stats":
                for host in self.hosts.values():
                    host.current_task = "done"
            elif kind == "playbook_on_play_start":
                self.play = str(data.get("play") or data.get("name") or "")
            elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
                self.task = str(data.get("task") or data.get("name") or "")
            elif kind == "runner_on_start" and data.get("host"):
                self._host(data["host"]).current_task = str(data.get("task") or "")
            elif kind.startswith("runner_on_") and data.get("host"):
                host = self._host(data["host"])
                if kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"):
                    host.done += 1
                if kind == "runner_on_ok" and (data.get("res") or {}).get("changed"):
                    host.changed += 1
                elif kind == "runner_on_failed" and not data.get("ignore_errors"):
                    host.failed += 1
                elif kind == "runner_on_unreachable":
                    host.unreachable += 1


def _task_name(data: dict[str, Any]) -> str:
    return str(data.get("task") or data.get("name") or "(unnamed task)")


def _message(data: dict[str, Any]) -> str:
    """First line of the result's msg (or Ansible's 'censored' note for no_log tasks)."""
    result = data.get("res") or {}
    text = str(result.get("msg") or result.get("censored") or "").strip()
    return text.splitlines()[0] if text else ""


class PlainProgress:
    """One line per task start and per changed/failed/unreachable host result, for logs."""

    def __init__(self, stream: TextIO | None = None, *, check_mode: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.changed_word = "would change" if check_mode else "changed"
        self.state = ProgressState()

    def start(self) -> None:
        pass

    def _say(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def handle(self, event: dict[str, Any]) -> None:
        self.state.update(event)
        kind = event.get("event") or ""
        data = event.get("event_data") or {}
        host = data.get("host", "")
        if kind == "playbook_on_play_start":
            self._say(f"PLAY {data.get('play') or data.get('name') or ''}")
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self._say(f"  task: {_task_name(data)}")
        elif kind == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            self._say(f"    {self.changed_word}: {host}")
        elif kind == "runner_on_failed":
            suffix = " (ignored)" if data.get("ignore_errors") else ""
            self._say(f"    FAILED{suffix}: {host}: {_message(data)}")
        elif kind == "runner_on_unreachable":
            self._say(f"    UNREACHABLE: {host}: {_message(data)}")

    def stop(self) -> None:
        pass


class LiveProgress:
    """A rich Live table on stderr: per host, tasks done, changed/failed counts and current task."""

    def __init__(self, *, check_mode: bool = False, title: str = "") -> None:
        from rich.console import Console
        from rich.live import Live

        self.state = ProgressState()
        self.check_mode = check_mode
        self.title = title
        self.console = Console(stderr=True)
        # transient: the summary printed after the run replaces the live table
        self.live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4, transient=True)

    def _render(self):
        from rich.table import Table

        with self.state.lock:
            heading = " / ".join(part for part in (self.title, self.state.play, self.state.task) if part)
            table = Table(title=heading or None, title_justify="left", expand=False)
            table.add_column("host")
            table.add_column("tasks", justify="right")
            table.add_column("would change" if self.check_mode else "changed", justify="right")
            table.add_column("failed", justify="right")
            table.add_column("current task", overflow="ellipsis", no_wrap=True, max_width=60)
            for name, host in sorted(self.state.hosts.items()):
                failed = host.failed + host.unreachable
                table.add_row(
                    name,
                    str(host.done),
                    str(host.changed),
                    f"[red]{failed}[/red]" if failed else "0",
                    "[red]unreachable[/red]" if host.unreachable else host.current_task,
                )
            return table

    def start(self) -> None:
        self.live.start()

    def handle(self, event: dict[str, Any]) -> None:
        self.state.update(event)

    def stop(self) -> None:
        self.live.stop()


class SilentProgress:
    def start(self) -> None:
        pass

    def handle(self, event: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        pass


def make_progress(
    *, check_mode: bool, title: str, stream: TextIO | None = None, plain: bool = False, quiet: bool = False
) -> ProgressView:
    """Live table on a terminal, plain lines elsewhere (or when asked), nothing when quiet."""
    if quiet:
        return SilentProgress()
    stream = stream or sys.stderr
    if stream.isatty() and not plain:
        return LiveProgress(check_mode=check_mode, title=title)
    return PlainProgress(stream, check_mode=check_mode)
