"""What a playbook run produced, built from ansible-runner events and stats.

Pure data and bookkeeping: no ansible-runner import, so ``history`` can
rebuild results from ``run.json`` cheaply. The runner feeds every event to
``EventCollector``; at the end ``collector.host_results()`` gives one
``HostResult`` per host, preferring Ansible's own ``playbook_on_stats``
counts and falling back to counting events for hosts the stats never
mention (the run was cancelled, or ansible-playbook died before the recap).
"""

from __future__ import annotations

import re

from dataclasses import asdict, dataclass, field
from typing import Any

RUN_FILE = "run.json"  # one per run directory, beside ansible-runner's artifacts

# run statuses, as stored in run.json and shown by `deepops runs`
STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"

_VERBOSE_TAIL_LINES = 10
_MESSAGE_LIMIT = 2000
# Ansible's notice that a module made its remote_tmp (~/.ansible/tmp) on its
# first run on a host: it warns of another user needing that directory later,
# and deepops' plays run every module as one user (root, become), so on a
# fresh host it only buried the roles' own warnings.
_UNINFORMATIVE_WARNING = re.compile(r"Module remote_tmp \S+ did not exist and was created with a mode of 0700")


@dataclass
class HostResult:
    """One host's outcome. ``ok`` counts every task that succeeded, changed or not (as Ansible's recap does)."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    failed_task: str | None = None
    message: str | None = None
    changed_tasks: list[str] = field(default_factory=list)
    # Warnings tasks returned (module.warn), "task: text", each once.
    warnings: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.failed == 0 and self.unreachable == 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostResult:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


@dataclass
class RunResult:
    """A whole run: what was asked, how it ended, and every host's outcome."""

    run_id: str
    command: str
    playbook: str
    inventory: str
    start: str  # ISO 8601 with UTC offset
    artifacts: str
    status: str = STATUS_RUNNING
    check: bool = False
    request: dict[str, Any] = field(default_factory=dict)
    duration: float | None = None
    rc: int | None = None
    runner_status: str | None = None
    error: str | None = None
    hosts: dict[str, HostResult] = field(default_factory=dict)
    # what the playbook recorded with ansible.builtin.set_stats (the stats event's artifact_data)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def failed_hosts(self) -> list[str]:
        return [name for name, host in self.hosts.items() if not host.succeeded]

    @property
    def unreachable_hosts(self) -> list[str]:
        return [name for name, host in self.hosts.items() if host.unreachable]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["hosts"] = {name: host.as_dict() for name, host in self.hosts.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data and name != "hosts"}
        hosts = {name: HostResult.from_dict({"host": name, **values}) for name, values in (data.get("hosts") or {}).items()}
        return cls(**known, hosts=hosts)


def final_status(*, runner_status: str | None, rc: int | None, hosts: dict[str, HostResult]) -> str:
    """ok only if ansible-runner succeeded, ansible-playbook exited 0 and no host failed or was unreachable."""
    if runner_status == "canceled":
        return STATUS_INTERRUPTED
    if runner_status != "successful" or rc != 0:
        return STATUS_FAILED
    if any(not host.succeeded for host in hosts.values()):
        return STATUS_FAILED
    return STATUS_OK


def _failure_message(result: dict[str, Any]) -> str:
    """The task's own msg; for no_log tasks Ansible has already replaced the result with 'censored'.

    A failed command says only "non-zero return code": the last line it
    printed (stderr first) is what tells why, so it joins the message."""
    message = result.get("msg") or result.get("censored") or result.get("reason") or "(no message)"
    text = str(message).strip()
    said = _last_line(result.get("stderr")) or _last_line(result.get("stdout"))
    if said and said not in text:
        text = f"{text}: {said}"
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + " [...]"


def _last_line(output: Any) -> str:
    lines = [line.strip() for line in str(output or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _changed(event: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a task changed its host. A no_log result reaches the events
    censored to one key, without "changed"; the callback's line still says it
    ("changed: [gpu02]"), and plan must list such a task (a replaced MUNGE key)."""
    if "censored" in result and "changed" not in result:
        return _ANSI.sub("", str(event.get("stdout") or "")).lstrip().startswith("changed:")
    return bool(result.get("changed"))


class EventCollector:
    """Accumulates per-host results from ansible-runner events (the event dicts its event_handler receives)."""

    def __init__(self) -> None:
        self._hosts: dict[str, HostResult] = {}
        self._stats: dict[str, dict[str, int]] | None = None
        self._artifact_data: dict[str, Any] = {}
        self._verbose_tail: list[str] = []

    def _host(self, name: str) -> HostResult:
        if name not in self._hosts:
            self._hosts[name] = HostResult(host=name)
        return self._hosts[name]

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_stats":
            self._stats = {
                key: dict(data.get(key) or {})
                for key in ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored", "processed")
            }
            self._artifact_data = dict(data.get("artifact_data") or {})
            return
        if kind == "verbose":
            # text ansible-playbook printed outside any task (e.g. a syntax error): kept only to explain a failed run
            line = str(event.get("stdout") or "").strip()
            if line:
                self._verbose_tail = (self._verbose_tail + [line])[-_VERBOSE_TAIL_LINES:]
            return
        host_name = data.get("host")
        if not host_name or not kind or not kind.startswith("runner_on_"):
            return
        host = self._host(host_name)
        task = str(data.get("task") or "").strip() or "(unnamed task)"
        result = data.get("res") or {}
        for warning in result.get("warnings") or [] if isinstance(result, dict) else []:
            text = str(warning).strip()
            if _UNINFORMATIVE_WARNING.match(text):
                continue
            line = f"{task}: {text}"
            if line not in host.warnings:
                host.warnings.append(line)
        if kind == "runner_on_ok":
            host.ok += 1
            if _changed(event, result):
                host.changed += 1
                if task not in host.changed_tasks:
                    host.changed_tasks.append(task)
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                # Ansible counts an ignored failure as ok + ignored, never as a failure
                host.ok += 1
                host.ignored += 1
            else:
                host.failed += 1
                host.failed_task, host.message = task, _failure_message(result)
        elif kind == "runner_on_unreachable":
            host.unreachable += 1
            host.failed_task, host.message = task, _failure_message(result)
        elif kind == "runner_on_skipped":
            host.skipped += 1

    @property
    def saw_stats(self) -> bool:
        return self._stats is not None

    @property
    def artifact_data(self) -> dict[str, Any]:
        """Run-wide data the playbook recorded with set_stats (empty when it recorded none, or never got to the recap)."""
        return dict(self._artifact_data)

    @property
    def verbose_tail(self) -> list[str]:
        return list(self._verbose_tail)

    def host_results(self) -> dict[str, HostResult]:
        """Per-host results, with counts from the stats event where the host appears in it."""
        stats = self._stats or {}
        names = list(self._hosts)
        for counts in stats.values():
            names.extend(name for name in counts if name not in names)
        results: dict[str, HostResult] = {}
        for name in names:
            seen = self._hosts.get(name) or HostResult(host=name)
            in_stats = any(name in counts for counts in stats.values())
            if not in_stats:
                results[name] = seen
                continue
            host = HostResult(
                host=name,
                ok=stats["ok"].get(name, 0),
                changed=stats["changed"].get(name, 0),
                failed=stats["failures"].get(name, 0),
                unreachable=stats["dark"].get(name, 0),
                skipped=stats["skipped"].get(name, 0),
                rescued=stats["rescued"].get(name, 0),
                ignored=stats["ignored"].get(name, 0),
                changed_tasks=list(seen.changed_tasks),
                warnings=list(seen.warnings),
            )
            if not host.succeeded:
                # a rescued failure leaves a failed event behind but no failure in the stats: only report real ones
                host.failed_task, host.message = seen.failed_task, seen.message
            results[name] = host
        return results
