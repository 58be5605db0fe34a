"""The one wrapper around ansible-runner: every playbook run goes through ``run_playbook``.

Each run gets an id (``20261130-101502-deploy-ab12``) and its own directory
``.deepops/runs/<id>/``: ansible-runner writes its artifacts there (stdout,
job_events/, status, rc) and we keep ``run.json`` beside them, written at the
start and rewritten at the end, which is what ``deepops runs`` reads. As a
run starts, the oldest finished runs beyond ``$DEEPOPS_RUNS_KEEP`` (default
50) are removed (``history.prune_runs``).

Results come from runner events and the ``playbook_on_stats`` event only,
never from Ansible's text output. The child gets a minimal environment:
``ANSIBLE_*`` and ``DEEPOPS_*`` from the caller plus what SSH and a UTF-8
locale need. ``ansible-playbook`` is the one installed beside this Python (the
same ansible-core deepops loads inventories with), else the first on PATH.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import ansible_runner

from deepops_py import history, locks, paths
from deepops_py.errors import DeepopsError, InputError, Interrupted
from deepops_py.progress import ProgressView, make_progress
from deepops_py.run_results import (
    RUN_FILE,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    EventCollector,
    HostResult,
    RunResult,
    final_status,
)

__all__ = ["RunRequest", "RunResult", "HostResult", "run_playbook", "print_summary", "RUN_FILE"]

# Besides ANSIBLE_*/DEEPOPS_*, only what ssh, sudo prompts and Ansible's UTF-8 locale check need.
_PASSTHROUGH_NAMES = ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
_PASSTHROUGH_PREFIXES = ("ANSIBLE_", "DEEPOPS_")

# How often ansible-runner polls for cancellation (its default, 5 s, makes Ctrl-C feel dead).
_RUNNER_SETTINGS = {"pexpect_timeout": 1}


@dataclass(frozen=True)
class RunRequest:
    """What to run. ``playbook`` is a name under <content>/playbooks/ or an absolute path.

    ``content_dir`` (playbooks/ and ansible.cfg) defaults to the installed
    content; tests point it elsewhere.
    """

    command: str
    playbook: str
    inventory: Path
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    extra_vars: dict[str, Any] = field(default_factory=dict)
    forks: int | None = None
    check: bool = False
    diff: bool = False
    content_dir: Path | None = None
    # The hosts of the inventory deepops validated before this run. When given,
    # the playbook's own inventory check does not load the file again, and the
    # summary leaves out the implicit localhost of the validation play unless
    # something went wrong there.
    inventory_hosts: tuple[str, ...] = ()
    # Another run holds the inventory's lock: wait for it (--wait) instead of exiting.
    wait_for_lock: bool = False

    def resolved_content_dir(self) -> Path:
        if self.content_dir is not None:
            return Path(self.content_dir).absolute()
        try:
            return paths.content_dir()
        except RuntimeError as error:
            raise DeepopsError(str(error)) from None

    def playbook_path(self) -> Path:
        if Path(self.playbook).is_absolute():
            return Path(self.playbook)
        return self.resolved_content_dir() / "playbooks" / self.playbook

    def ansible_cfg(self) -> Path:
        return self.resolved_content_dir() / "ansible.cfg"

    def describe(self) -> dict[str, Any]:
        """The request as stored in run.json: extra variables by name only, their values may be secrets."""
        return {
            "limit": self.limit,
            "tags": self.tags,
            "skip_tags": self.skip_tags,
            "extra_vars": sorted(self.extra_vars),
            "forks": self.forks,
            "check": self.check,
            "diff": self.diff,
        }


def _now() -> datetime:
    return datetime.now().astimezone()


def _new_run_dir(command: str) -> tuple[str, Path]:
    runs = paths.make_dir(paths.runs_dir())
    while True:
        run_id = f"{_now():%Y%m%d-%H%M%S}-{command}-{secrets.token_hex(2)}"
        run_dir = runs / run_id
        try:
            run_dir.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return run_id, run_dir


def write_run_file(run_dir: Path, result: RunResult, extra: dict[str, Any] | None = None) -> None:
    """Replace run.json atomically, so a reader never sees half a file."""
    data = result.as_dict()
    data.update(extra or {})
    temporary = run_dir / f".{RUN_FILE}.tmp"
    temporary.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(temporary, run_dir / RUN_FILE)


def build_env(ansible_cfg: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: a whitelist of the caller's, plus our config."""
    environ = dict(os.environ if environ is None else environ)
    env = {
        name: value
        for name, value in environ.items()
        if name in _PASSTHROUGH_NAMES or name.startswith(_PASSTHROUGH_PREFIXES)
    }
    env["PATH"] = environ.get("PATH", os.defpath)
    env["ANSIBLE_CONFIG"] = str(ansible_cfg)
    # ansible-runner turns host key checking off unless told otherwise; keep ansible.cfg's "on" unless the caller chose.
    env.setdefault("ANSIBLE_HOST_KEY_CHECKING", "True")
    if not any(name in env for name in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"  # Ansible refuses to start without a UTF-8 locale
    return env


def ansible_playbook_binary(path: str) -> str | None:
    """ansible-playbook beside this Python (deepops' own environment), else the first one on ``path``."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ansible-playbook", path=path)


def _restrict_env(prepared: dict[str, str], allowed: dict[str, str]) -> dict[str, str]:
    """Drop what ansible-runner copied from os.environ that we did not allow; keep what it set itself."""
    return {name: value for name, value in prepared.items() if name in allowed or os.environ.get(name) != value}


def _check_inputs(request: RunRequest, env: dict[str, str]) -> tuple[Path, str]:
    """The playbook and the ansible-playbook binary, or an error saying which is missing."""
    playbook = request.playbook_path()
    if not playbook.is_file():
        raise DeepopsError(f"Playbook {playbook} not found; the deepops installation is incomplete")
    if not Path(request.inventory).is_file():
        raise InputError(f"Inventory {request.inventory} not found")
    binary = ansible_playbook_binary(env["PATH"])
    if binary is None:
        raise DeepopsError(
            f"ansible-playbook not found beside {sys.executable} or on PATH ({env['PATH']}); install deepops with "
            "its dependencies (pip install deepops) in the environment you run it from"
        )
    return playbook, binary


def _extra_vars_file(extra_vars: dict[str, Any]) -> Path | None:
    """Extra vars go through a private temporary file, not the command line (ps, the run's 'command' artifact)."""
    if not extra_vars:
        return None
    handle, name = tempfile.mkstemp(prefix="deepops-extra-vars-", suffix=".json")  # mode 0600
    with os.fdopen(handle, "w") as stream:
        json.dump(extra_vars, stream)
    return Path(name)


def _cmdline(request: RunRequest, extra_vars_file: Path | None) -> str | None:
    args: list[str] = []
    if request.check:
        args.append("--check")
    if request.diff:
        args.append("--diff")
    if extra_vars_file is not None:
        args += ["-e", f"@{extra_vars_file}"]
    return shlex.join(args) if args else None


# The signals that end a run early. Each ends ansible-playbook, its workers
# and their commands before deepops exits; the default SIGTERM/SIGHUP actions
# (and ansible-runner's cancel alone) would leave workers orphaned.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _run_until_done(runner: ansible_runner.Runner, cancel: threading.Event, errors: list[BaseException]) -> None:
    """Run on a worker thread; a stop signal only sets CANCEL, and the run ends
    through ansible-runner's cancel, so there is no moment at which deepops can
    exit with ansible-playbook still running. Raises Interrupted afterwards."""
    received: list[int] = []

    def target() -> None:
        try:
            runner.run()
        except BaseException as error:  # handed to the main thread below
            errors.append(error)

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        # The tree first: once CANCEL is set, ansible-runner's thread may kill
        # ansible-playbook, whose workers would then move to init, out of sight.
        _end_descendants()
        cancel.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, on_signal) for signum in _STOP_SIGNALS}
    worker = threading.Thread(target=target, name="deepops-ansible-runner", daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if errors:
            _end_descendants()
    if errors:
        raise DeepopsError(f"ansible-runner failed: {errors[0]}") from errors[0]
    if received:
        raise Interrupted(received[0])


def _descendants(root: int) -> list[int]:
    """Every process below ROOT, by the parent links in /proc, parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# Rounds of looking for processes born while the ones found are being stopped.
_FREEZE_ROUNDS = 50


def _end_descendants() -> None:
    """SIGKILL every process below this one. ansible-playbook runs in a session
    of its own and each of its workers starts another (setsid), so neither a
    terminal's signal nor ansible-runner's kill of ansible-playbook's process
    group reaches the workers and the commands they run. All are found before
    any is killed: a killed parent's children move to init and out of sight.
    Found ones are stopped first (SIGSTOP), and the tree is read again until
    it holds no new process: a worker forking at the first look (a loaded
    machine) would otherwise leave its new child running, out of sight."""
    found: list[int] = []
    for _round in range(_FREEZE_ROUNDS):
        new = [pid for pid in _descendants(os.getpid()) if pid not in found]
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        found += new
    for pid in found:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass  # already gone


def run_playbook(
    request: RunRequest,
    json_output: bool = False,
    *,
    progress: ProgressView | None = None,
) -> RunResult:
    """Run one playbook through ansible-runner; return per-host results and keep the run's artifacts.

    Holds the inventory's lock for the run (``locks``): another run on it
    means exit EXIT_BUSY, or waiting with ``request.wait_for_lock``.
    Never raises for host failures: they are in the result (``result.ok``).
    Raises DeepopsError when the run cannot start, Interrupted (after stopping
    ansible-playbook and recording the run as interrupted) on SIGINT, SIGTERM
    or SIGHUP.
    """
    ansible_cfg = request.ansible_cfg()
    env = build_env(ansible_cfg)
    playbook, binary = _check_inputs(request, env)
    if request.inventory_hosts:
        env["DEEPOPS_INVENTORY_CHECKED"] = str(Path(request.inventory).absolute())
    keep = history.runs_keep()  # a bad $DEEPOPS_RUNS_KEEP stops here, before the run is recorded
    with locks.inventory_lock(request.inventory, request.command, wait=request.wait_for_lock) as lock:
        return _run_locked(request, env, playbook, binary, keep, lock, json_output, progress)


def _run_locked(request, env, playbook, binary, keep, lock, json_output, progress) -> RunResult:
    run_id, run_dir = _new_run_dir(request.command)
    lock.record_run(run_id)
    started = _now()
    result = RunResult(
        run_id=run_id,
        command=request.command,
        playbook=str(playbook),
        inventory=str(Path(request.inventory).absolute()),
        start=started.isoformat(timespec="seconds"),
        artifacts=str(run_dir),
        status=STATUS_RUNNING,
        check=request.check,
        request=request.describe(),
    )
    # pid and host let `deepops runs` tell a live run from one whose process died
    owner = {"pid": os.getpid(), "hostname": socket.gethostname()}
    write_run_file(run_dir, result, owner)
    # this run, now recorded as running, is the newest: keep it and the keep-1 before it
    history.prune_runs(keep)
    (run_dir / "env").mkdir(mode=0o700, exist_ok=True)
    (run_dir / "env" / "settings").write_text(json.dumps(_RUNNER_SETTINGS))

    collector = EventCollector()
    # with --json, stdout carries only the final JSON; stderr gets plain lines, never terminal redraws
    view = progress or make_progress(check_mode=request.check, title=f"{request.command} {run_id}", plain=json_output)
    cancel = threading.Event()
    errors: list[BaseException] = []

    def on_event(event: dict[str, Any]) -> bool:
        # An exception here would leave ansible-runner without stopping the
        # child: record it and cancel the run instead.
        try:
            collector.handle(event)
            view.handle(event)
        except Exception as error:  # noqa: BLE001 - reported once the run has stopped
            errors.append(error)
            cancel.set()
            _end_descendants()
        return True  # keep ansible-runner's job_events/ artifacts

    extra_vars_file = _extra_vars_file(request.extra_vars)
    clock = time.monotonic()
    interrupted: Interrupted | None = None
    try:
        config = ansible_runner.RunnerConfig(
            private_data_dir=str(run_dir),
            artifact_dir=str(run_dir.parent),  # with ident=run_id, artifacts land in runs/<id>/ itself
            ident=run_id,
            playbook=str(playbook),
            inventory=str(Path(request.inventory).absolute()),
            limit=request.limit,
            tags=request.tags,
            skip_tags=request.skip_tags,
            forks=request.forks,
            cmdline=_cmdline(request, extra_vars_file),
            envvars=env,
            quiet=True,
            suppress_env_files=True,
            fact_cache_type="memory",  # as ansible.cfg says; no facts on disk
        )
        # Built by hand rather than through ansible_runner.run(): run() starts the child with all of
        # os.environ, and this is the one point between prepare() and start where it can be trimmed.
        config.prepare()
        # ansible-runner names the program 'ansible-playbook' for its PATH lookup; run ours, found above.
        config.command = [binary, *config.command[1:]]
        config.env = _restrict_env(config.env, env)
        runner = ansible_runner.Runner(config, event_handler=on_event, cancel_callback=cancel.is_set)
        view.start()
        try:
            _run_until_done(runner, cancel, errors)
        except Interrupted as stop:
            interrupted = stop
        finally:
            view.stop()
    except (ansible_runner.ConfigurationError, DeepopsError) as error:
        result.status, result.error = "failed", f"ansible-runner could not run the playbook: {error}"
        write_run_file(run_dir, result)
        raise DeepopsError(result.error) from None
    finally:
        if extra_vars_file is not None:
            extra_vars_file.unlink(missing_ok=True)

    result.duration = round(time.monotonic() - clock, 1)
    result.rc = runner.rc
    result.runner_status = "canceled" if interrupted else runner.status
    result.hosts = _reported_hosts(collector.host_results(), request.inventory_hosts)
    result.data = collector.artifact_data
    result.status = final_status(runner_status=result.runner_status, rc=result.rc, hosts=result.hosts)
    result.error = _run_error(result, collector)
    if interrupted:
        result.error = f"interrupted by {signal.Signals(interrupted.signum).name}: ansible-playbook was stopped"
    write_run_file(run_dir, result)
    if interrupted:
        raise interrupted
    return result


def _run_error(result: RunResult, collector: EventCollector) -> str | None:
    """Explain a failed run that no host failure explains (syntax error, no inventory, killed)."""
    if result.status == STATUS_INTERRUPTED:
        return "interrupted by the user"
    if result.ok or result.failed_hosts:
        return None
    detail = "\n".join(collector.verbose_tail) or "no output"
    return f"ansible-playbook exited with rc={result.rc} ({result.runner_status}) before any host failed:\n{detail}"


# --------------------------------------------------------------------------
# rendering


def print_summary(result: RunResult, console=None) -> None:
    """Per-host counts, then per host the failing task and message, or (plan) what would change."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    would = "would change" if result.check else "changed"
    table = Table(title=f"{result.command} {result.run_id}", title_justify="left")
    table.add_column("host", no_wrap=True)
    for column in ("ok", would, "failed", "unreachable", "skipped"):
        table.add_column(column, justify="right")
    for name, host in sorted(result.hosts.items()):
        table.add_row(
            escape(name),
            str(host.ok),
            f"[yellow]{host.changed}[/yellow]" if host.changed else "0",
            f"[red]{host.failed}[/red]" if host.failed else "0",
            f"[red]{host.unreachable}[/red]" if host.unreachable else "0",
            str(host.skipped),
        )
    if result.hosts:
        console.print(table)
    elif result.status == STATUS_INTERRUPTED:
        console.print("No task had finished when the run was interrupted.")
    else:
        console.print("No host ran any task (no hosts matched?).")
    # long task names and messages go below the table, where they stay readable at any width
    if result.check:
        for name, host in sorted(result.hosts.items()):
            if host.changed_tasks:
                console.print(f"Would change on [bold]{escape(name)}[/bold]:", highlight=False)
                for task in host.changed_tasks:
                    console.print(f"  - {escape(task)}", highlight=False)
    for name, host in sorted(result.hosts.items()):
        for warning in host.warnings:
            console.print(f"[yellow]Warning[/yellow] on [bold]{escape(name)}[/bold]: {escape(warning)}", highlight=False)
    for name, host in sorted(result.hosts.items()):
        if not host.succeeded:
            what = "unreachable" if host.unreachable else "failed"
            console.print(
                f"[red]{escape(name)} {what}[/red] at task [bold]{escape(host.failed_task or '?')}[/bold]: "
                f"{escape(host.message or '')}",
                highlight=False,
            )
    # Roles flag nodes that need a reboot (a changed driver) through set_stats.
    reboot = (result.data or {}).get("deepops_reboot_required") or {}
    if reboot:
        console.print(f"[yellow]Reboot required[/yellow]: {escape(', '.join(sorted(reboot)))}", highlight=False)
        for name, reason in sorted(reboot.items()):
            console.print(f"  - {escape(name)}: {escape(str(reason))}", highlight=False)
    if result.error:
        console.print(f"[red]{escape(result.error)}[/red]", highlight=False)
    outcome = {"ok": "[green]ok[/green]", "running": "[yellow]running[/yellow]"}.get(result.status, f"[red]{result.status}[/red]")
    duration = f"{result.duration:.1f}s" if result.duration is not None else "-"
    failed = result.failed_hosts
    failed_note = f", failed hosts: {escape(', '.join(failed))}" if failed else ""
    console.print(
        f"Run {result.run_id}: {outcome} in {duration}{failed_note}. Artifacts: {escape(result.artifacts)}",
        highlight=False,
        soft_wrap=True,  # keep the path on one line so it can be copied
    )


def _reported_hosts(hosts: dict[str, HostResult], inventory_hosts: tuple[str, ...]) -> dict[str, HostResult]:
    if not inventory_hosts:
        return hosts
    known = set(inventory_hosts)
    return {name: host for name, host in hosts.items() if name in known or not host.succeeded}
