"""`deepops check` stage 2: reach every host over SSH, in parallel, before any playbook runs.

Per host, each recorded on its own: SSH reachable (with a known host key),
root or passwordless sudo, python3 present, OS supported. A host problem is
never an exception, it is a row with ``ok=False``. The supported releases are
the collection's table (``plugins/module_utils/platforms.py``), the one the
roles' preflight asserts; a supported release that CI does not test passes,
marked "untested".

``--limit`` here takes a comma- (or colon-) separated list of host and group
names, plus ``all``; it is not Ansible's full pattern language (no
wildcards, ``!`` or ``&``), and anything else is rejected as invalid input.

The SSH side is a small interface (``Connect`` returns a ``Session`` that
runs commands) so the check logic is tested with a fake. The real one,
``default_connect``, uses paramiko (known_hosts honoured, unknown keys
refused) and runs the checks on this machine for ``ansible_connection=local``
hosts, as Ansible would.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import shlex
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ansible_collections.deepops.cluster.plugins.module_utils import platforms

from deepops_py.errors import InputError

MIN_PYTHON = (3, 8)  # oldest target Python ansible-core 2.19 supports
SYSTEM_KNOWN_HOSTS = (Path("/etc/ssh/ssh_known_hosts"), Path("~/.ssh/known_hosts"))

CHECK_SSH = "ssh"
CHECK_ROOT = "root_or_sudo"
CHECK_PYTHON = "python3"
CHECK_OS = "os"
CHECKS = (CHECK_SSH, CHECK_ROOT, CHECK_PYTHON, CHECK_OS)


class HostLike(Protocol):
    """What preflight needs of ``deepops_py.inventory.Host``."""

    name: str
    groups: tuple[str, ...]
    address: str
    port: int
    user: str | None
    private_key: str | None
    become: bool
    ssh_common_args: str | None
    vars: Mapping[str, Any]


class ClusterLike(Protocol):
    hosts: Mapping[str, HostLike]
    groups: Mapping[str, list[str]]


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str


class Session(Protocol):
    def run(self, command: str, stdin: str | None = None) -> CommandResult: ...

    def close(self) -> None: ...


class ConnectError(Exception):
    """SSH could not connect or authenticate; the message is what the user sees."""


Connect = Callable[[HostLike, float], Session]


@dataclass
class HostCheck:
    host: str
    address: str
    port: int
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)
    os: str | None = None
    # Whether CI tests the host's (supported) release; None when unsupported or unknown.
    os_tested: bool | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(self.checks.get(name, (False, ""))[0] for name in CHECKS)

    def record(self, name: str, ok: bool, detail: str) -> bool:
        self.checks[name] = (ok, detail)
        if not ok and self.error is None:
            self.error = detail
        return ok

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "address": self.address,
            "port": self.port,
            "ok": self.ok,
            "os": self.os,
            "error": self.error,
            "checks": {name: {"ok": ok, "detail": detail} for name, (ok, detail) in self.checks.items()},
        }


# --------------------------------------------------------------------------
# selecting hosts


def select_hosts(cluster: ClusterLike, limit: str | None) -> list[HostLike]:
    """Hosts named by ``limit`` (host or group names, comma/colon separated), in inventory order."""
    if not limit:
        return list(cluster.hosts.values())
    wanted: set[str] = set()
    unknown: list[str] = []
    for name in filter(None, (part.strip() for part in re.split(r"[,:]", limit))):
        if re.search(r"[*?!&~\[\]]", name):
            raise InputError(
                f"--limit {limit!r}: {name!r} is a pattern; deepops check takes only host and group names"
            )
        if name == "all":
            wanted.update(cluster.hosts)
        elif name in cluster.hosts:
            wanted.add(name)
        elif name in cluster.groups:
            wanted.update(cluster.groups[name])
        else:
            unknown.append(name)
    if unknown:
        groups = ", ".join(sorted(cluster.groups))
        raise InputError(f"--limit {limit!r}: no host or group named {', '.join(unknown)} (groups: {groups})")
    return [host for name, host in cluster.hosts.items() if name in wanted]


# --------------------------------------------------------------------------
# the checks


def parse_os_release(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            try:
                values[key] = " ".join(shlex.split(value))
            except ValueError:
                values[key] = value.strip("\"'")
    return values


def os_release_of(os_release: Mapping[str, str]) -> platforms.Release | None:
    """The supported release /etc/os-release values describe (Debian testing by its codename), or None."""
    return platforms.find_release(os_release.get("ID"), os_release.get("VERSION_ID"), os_release.get("VERSION_CODENAME"))


def judge_os(os_release: Mapping[str, str]) -> tuple[bool, str]:
    """(supported, "Debian 12") from /etc/os-release values."""
    release = os_release_of(os_release)
    if release is not None:
        return True, release.name
    distro = os_release.get("ID", "").lower()
    names = {known.os_id: known.distribution for known in platforms.RELEASES}
    return False, f"{names.get(distro, os_release.get('NAME') or distro or 'unknown OS')} {os_release.get('VERSION_ID', '')}".strip()


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _python_interpreter(host: HostLike) -> str:
    """The interpreter Ansible will use: ansible_python_interpreter when it is a plain path, else python3."""
    configured = str(host.vars.get("ansible_python_interpreter") or "")
    if configured and "{{" not in configured and not configured.startswith("auto"):
        return configured
    return "python3"


def _check_root(session: Session, check: HostCheck, user: str) -> None:
    uid = session.run("id -u")
    if uid.rc == 0 and uid.stdout.strip() == "0":
        check.record(CHECK_ROOT, True, "root")
        return
    sudo = session.run("sudo -n true")
    if sudo.rc == 0:
        check.record(CHECK_ROOT, True, f"passwordless sudo as {user}")
    else:
        why = _first_line(sudo.stderr) or f"rc={sudo.rc}"
        check.record(CHECK_ROOT, False, f"{user} is not root and has no passwordless sudo ({why})")


def _check_python(session: Session, check: HostCheck, interpreter: str) -> None:
    result = session.run(f"{shlex.quote(interpreter)} --version")
    if result.rc != 0:
        why = "not found" if result.rc == 127 else _first_line(result.stderr) or f"rc={result.rc}"
        check.record(CHECK_PYTHON, False, f"{interpreter}: {why}; install python3 on the host")
        return
    version_text = _first_line(result.stdout) or _first_line(result.stderr)  # Python 2 printed it on stderr
    match = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", version_text)
    if not match:
        check.record(CHECK_PYTHON, False, f"{interpreter} --version said {version_text!r}")
        return
    if (int(match.group(1)), int(match.group(2))) < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        check.record(CHECK_PYTHON, False, f"{version_text} is too old; Ansible needs Python {wanted} or newer")
        return
    check.record(CHECK_PYTHON, True, match.group(0))


def _check_os(session: Session, check: HostCheck) -> None:
    result = session.run("cat /etc/os-release")
    if result.rc != 0:
        check.record(CHECK_OS, False, "cannot read /etc/os-release: " + (_first_line(result.stderr) or f"rc={result.rc}"))
        return
    os_release = parse_os_release(result.stdout)
    supported, name = judge_os(os_release)
    check.os = name
    if not supported:
        check.record(CHECK_OS, False, f"{name} is not supported (supported: {platforms.supported_text()})")
        return
    check.os_tested = os_release_of(os_release).tested
    check.record(CHECK_OS, True, name if check.os_tested else f"{name} (untested)")


def check_host(host: HostLike, connect: Connect, timeout: float) -> HostCheck:
    """All checks of one host; never raises."""
    check = HostCheck(host=host.name, address=host.address, port=host.port)
    user = host.user or getpass.getuser()
    try:
        session = connect(host, timeout)
    except ConnectError as error:
        check.record(CHECK_SSH, False, str(error))
        return check
    except Exception as error:  # a host problem must stay a row, whatever the SSH library throws
        check.record(CHECK_SSH, False, f"ssh failed: {type(error).__name__}: {error}")
        return check
    try:
        check.record(CHECK_SSH, True, getattr(session, "description", None) or f"{user}@{host.address}:{host.port}")
        _check_root(session, check, user)
        _check_python(session, check, _python_interpreter(host))
        _check_os(session, check)
    except Exception as error:
        check.error = check.error or f"connection lost during checks: {type(error).__name__}: {error}"
    finally:
        try:
            session.close()
        except Exception:
            pass  # closing a broken connection tells us nothing new
    return check


class LocalSession:
    """For hosts with ansible_connection=local: Ansible runs their tasks here, so preflight checks here."""

    description = "local connection"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def run(self, command: str, stdin: str | None = None) -> CommandResult:
        import subprocess

        done = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, timeout=self.timeout, env={**os.environ, "LC_ALL": "C"},
            input=stdin if stdin is not None else "",
        )
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        pass


_SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh")


def default_connect(host: HostLike, timeout: float) -> Session:
    """SSH (paramiko) for SSH hosts, this machine for local ones; other connection plugins are not checked."""
    connection = str(host.vars.get("ansible_connection") or "ssh")
    if connection in ("local", "ansible.builtin.local"):
        return LocalSession(timeout)
    if connection not in _SSH_CONNECTIONS:
        raise ConnectError(f"ansible_connection {connection!r} is not one preflight can check (ssh or local)")
    return paramiko_connect(host, timeout)


def run_preflight(
    cluster: ClusterLike,
    limit: str | None = None,
    forks: int = 20,
    timeout: int = 10,
    *,
    connect: Connect | None = None,
) -> list[HostCheck]:
    """Check the selected hosts in parallel (``forks`` at a time); results in inventory order."""
    hosts = select_hosts(cluster, limit)
    if not hosts:
        return []
    connect = connect or default_connect
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts))), thread_name_prefix="preflight") as pool:
        return list(pool.map(lambda host: check_host(host, connect, timeout), hosts))


def unreachable_hosts(results: list[HostCheck]) -> list[str]:
    """The hosts SSH got no session on: unreachable, refused, an unknown or changed host key, failed login."""
    return [result.host for result in results if not result.checks.get(CHECK_SSH, (False, ""))[0]]


def results_as_dict(results: list[HostCheck]) -> dict[str, Any]:
    return {
        "ok": all(result.ok for result in results),
        "hosts": [result.as_dict() for result in results],
    }


def print_table(results: list[HostCheck], console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not results:
        console.print("No hosts selected.")
        return
    table = Table(title="Preflight", title_justify="left")
    for column in ("host", "address", "ssh", "root/sudo", "python3", "OS", "result"):
        table.add_column(column)

    def cell(result: HostCheck, name: str, short: Callable[[str], str], colour: str = "green") -> str:
        if name not in result.checks:
            return "[dim]-[/dim]"
        ok, detail = result.checks[name]
        return f"[{colour}]{escape(short(detail))}[/{colour}]" if ok else "[red]FAILED[/red]"

    for result in results:
        table.add_row(
            escape(result.host),
            escape(f"{result.address}:{result.port}"),
            cell(result, CHECK_SSH, lambda detail: "local" if detail == LocalSession.description else "ok"),
            cell(result, CHECK_ROOT, lambda detail: "root" if detail == "root" else "sudo"),
            cell(result, CHECK_PYTHON, lambda detail: detail),
            cell(result, CHECK_OS, lambda detail: detail, "yellow" if result.os_tested is False else "green"),
            "[green]ok[/green]" if result.ok else "[red]FAILED[/red]",
        )
    console.print(table)
    for result in results:
        if result.os_tested is False:
            console.print(
                f"[yellow]{escape(result.host)}[/yellow]: {escape(result.os or '')} is supported but not tested in CI"
                f" (tested: {escape(platforms.tested_text())})",
                highlight=False,
            )
    failed = [result for result in results if not result.ok]
    # the why, one line per host, below the table where long messages stay readable
    for result in failed:
        console.print(f"[red]{escape(result.host)}[/red]: {escape(result.error or 'failed')}", highlight=False)
    if failed:
        console.print(f"[red]{len(failed)} of {len(results)} hosts failed preflight.[/red]")
    else:
        console.print(f"[green]All {len(results)} hosts passed preflight.[/green]")


# --------------------------------------------------------------------------
# the real SSH side (paramiko)


def ssh_options(ssh_common_args: str | None) -> dict[str, str]:
    """``-o Key=Value`` / ``-oKey=Value`` / ``-o 'Key Value'`` options from ansible_ssh_common_args, keys lower-cased."""
    options: dict[str, str] = {}
    try:
        words = shlex.split(ssh_common_args or "")
    except ValueError:
        return options
    index = 0
    while index < len(words):
        word = words[index]
        value = None
        if word == "-o" and index + 1 < len(words):
            value, index = words[index + 1], index + 1
        elif word.startswith("-o") and len(word) > 2:
            value = word[2:]
        index += 1
        if value:
            key, *rest = re.split(r"[=\s]", value.strip(), maxsplit=1)
            options.setdefault(key.lower(), rest[0].strip() if rest else "")  # ssh: the first value given wins
    return options


def known_hosts_files(ssh_common_args: str | None) -> list[Path]:
    """System and user known_hosts, plus UserKnownHostsFile/GlobalKnownHostsFile from the host's ssh args."""
    options = ssh_options(ssh_common_args)
    files = list(SYSTEM_KNOWN_HOSTS)
    for key in ("userknownhostsfile", "globalknownhostsfile"):
        files.extend(Path(name) for name in (options.get(key) or "").split() if name != "/dev/null")
    return [path.expanduser() for path in files]


class UnknownHostKey(ConnectError):
    pass


class _RejectUnknownHostKey:
    """paramiko's missing-host-key policy: fail with the message we want users to read."""

    def missing_host_key(self, client, hostname, key) -> None:
        raise UnknownHostKey(
            f"host key of {hostname} unknown ({key.get_name()}); ssh to it once or add it to known_hosts"
        )


class _AcceptUnknownHostKey:
    """For inventories that turned host key checking off: accept silently, remember nothing."""

    def missing_host_key(self, client, hostname, key) -> None:
        return None


class ParamikoSession:
    def __init__(self, client, timeout: float) -> None:
        self.client = client
        self.timeout = timeout

    def run(self, command: str, stdin: str | None = None) -> CommandResult:
        # no pty: sudo -n must fail fast rather than prompt; LC_ALL=C keeps messages predictable
        channel_in, stdout, stderr = self.client.exec_command(f"LC_ALL=C {command}", timeout=self.timeout)
        if stdin is not None:  # e.g. a password: never on a command line, where ps shows it
            channel_in.write(stdin)
            channel_in.channel.shutdown_write()
        out = stdout.read().decode("utf-8", "replace")
        err = stderr.read().decode("utf-8", "replace")
        return CommandResult(rc=stdout.channel.recv_exit_status(), stdout=out, stderr=err)

    def close(self) -> None:
        self.client.close()


def _proxy_sock(host: HostLike, options: dict[str, str]):
    """Honour ProxyCommand / ProxyJump from the host's ssh args, as ssh (and so Ansible) would."""
    import paramiko

    command = options.get("proxycommand")
    if not command and options.get("proxyjump") and options["proxyjump"].lower() != "none":
        command = f"ssh -W %h:%p {shlex.quote(options['proxyjump'])}"
    if not command or command.lower() == "none":
        return None
    command = command.replace("%h", host.address).replace("%p", str(host.port)).replace("%%", "%")
    return paramiko.ProxyCommand(command)


def _load_private_key(path_text: str):
    """Load the key ourselves: given a file, paramiko reports a wrong key as a key-format error."""
    import paramiko

    path = Path(path_text).expanduser()
    try:
        return paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        # ssh would prompt; Ansible cannot. The agent may hold the unlocked key.
        return None
    except (OSError, ValueError, paramiko.SSHException) as error:
        raise ConnectError(f"cannot use private key {path}: {error}") from None


def _accepts_unknown_keys(options: dict[str, str]) -> bool:
    if options.get("stricthostkeychecking", "").lower() in ("no", "off", "accept-new"):
        return True
    return os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "").lower() in ("0", "false", "no", "off")


def paramiko_connect(host: HostLike, timeout: float) -> Session:
    """Connect and authenticate like Ansible's ssh would: known hosts honoured, agent or given key."""
    import socket

    import paramiko

    # paramiko logs transport errors itself; they become our one-line message instead
    logging.getLogger("paramiko").addHandler(logging.NullHandler())
    options = ssh_options(host.ssh_common_args)
    user = host.user or getpass.getuser()
    client = paramiko.SSHClient()
    for path in known_hosts_files(host.ssh_common_args):
        if path.is_file():
            try:
                client.load_system_host_keys(str(path))
            except (OSError, paramiko.SSHException) as error:
                raise ConnectError(f"cannot read known hosts file {path}: {error}") from None
    if _accepts_unknown_keys(options):
        # the inventory (or ANSIBLE_HOST_KEY_CHECKING) told Ansible to accept unknown keys, so preflight does too
        client.set_missing_host_key_policy(_AcceptUnknownHostKey())
    else:
        client.set_missing_host_key_policy(_RejectUnknownHostKey())
    where = f"{user}@{host.address}:{host.port}"
    private_key = _load_private_key(host.private_key) if host.private_key else None
    try:
        client.connect(
            host.address,
            port=host.port,
            username=user,
            pkey=private_key,
            look_for_keys=private_key is None,
            allow_agent=True,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            sock=_proxy_sock(host, options),
        )
    except UnknownHostKey:
        client.close()
        raise
    except paramiko.BadHostKeyException as error:
        client.close()
        raise ConnectError(
            f"host key of {host.address} does not match known_hosts (got {error.key.get_name()}); "
            "if the host was reinstalled, remove its old key with ssh-keygen -R"
        ) from None
    except paramiko.AuthenticationException as error:
        client.close()
        raise ConnectError(f"authentication failed as {where}: {error}") from None
    except (socket.timeout, TimeoutError):
        client.close()
        raise ConnectError(f"unreachable: {where} timed out after {timeout}s") from None
    except (paramiko.SSHException, OSError) as error:
        client.close()
        reason = str(error).removeprefix("[Errno None] ")  # paramiko's wording when every address refused
        raise ConnectError(f"unreachable: {where}: {reason}") from None
    return ParamikoSession(client, timeout)
