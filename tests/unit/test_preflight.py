"""Preflight checks: the logic with a fake SSH session, and the paramiko side against an in-process SSH server."""

from __future__ import annotations

import io
import json
import socket
import threading
from pathlib import Path

import paramiko
import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import platforms
from rich.console import Console

from deepops_py import preflight
from deepops_py.errors import InputError
from deepops_py.inventory import Cluster, Host
from deepops_py.preflight import CommandResult, ConnectError

DEBIAN_12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
UBUNTU_2404 = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
ROCKY_9 = 'NAME="Rocky Linux"\nVERSION_ID="9.3"\nID="rocky"\n'
TRIXIE_TESTING = 'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=trixie\nID=debian\n'

HEALTHY = {
    "id -u": CommandResult(0, "0\n", ""),
    "python3 --version": CommandResult(0, "Python 3.11.2\n", ""),
    "cat /etc/os-release": CommandResult(0, DEBIAN_12, ""),
}


class FakeSession:
    def __init__(self, responses: dict[str, CommandResult]):
        self.responses = responses
        self.commands: list[str] = []
        self.closed = False

    def run(self, command: str) -> CommandResult:
        self.commands.append(command)
        return self.responses.get(command, CommandResult(127, "", f"sh: {command.split()[0]}: not found"))

    def close(self) -> None:
        self.closed = True


class FakeConnect:
    """host name -> responses (a dict) or an exception to raise on connect."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.sessions: dict[str, FakeSession] = {}
        self.lock = threading.Lock()

    def __call__(self, host, timeout):
        outcome = self.behaviour[host.name]
        if isinstance(outcome, BaseException):
            raise outcome
        session = FakeSession(outcome)
        with self.lock:
            self.sessions[host.name] = session
        return session


def make_cluster(*names: str, groups: dict[str, list[str]] | None = None, **host_options) -> Cluster:
    hosts = {
        name: Host(name=name, groups=("slurm_compute",), address=f"10.0.0.{index}", port=22, user="admin", **host_options)
        for index, name in enumerate(names, start=1)
    }
    return Cluster(inventory=Path("inventory.yml"), hosts=hosts, groups=groups or {"slurm_compute": list(names)})


def run(cluster, behaviour, **options):
    connect = FakeConnect(behaviour)
    return preflight.run_preflight(cluster, connect=connect, **options), connect


def test_healthy_root_host_passes_every_check():
    [result], connect = run(make_cluster("gpu01"), {"gpu01": HEALTHY})
    assert result.ok and result.error is None
    assert result.os == "Debian 12"
    assert result.checks == {
        "ssh": (True, "admin@10.0.0.1:22"),
        "root_or_sudo": (True, "root"),
        "python3": (True, "3.11.2"),
        "os": (True, "Debian 12"),
    }
    assert connect.sessions["gpu01"].closed


def test_each_problem_is_its_own_failed_row():
    behaviour = {
        "down": ConnectError("unreachable: admin@10.0.0.1:22: timed out after 10s"),
        "nosudo": {**HEALTHY, "id -u": CommandResult(0, "1000\n", ""),
                   "sudo -n true": CommandResult(1, "", "sudo: a password is required\n")},
        "sudo": {**HEALTHY, "id -u": CommandResult(0, "1000\n", ""), "sudo -n true": CommandResult(0, "", "")},
        "nopython": {key: value for key, value in HEALTHY.items() if key != "python3 --version"},
        "rocky": {**HEALTHY, "cat /etc/os-release": CommandResult(0, ROCKY_9, "")},
        "ubuntu": {**HEALTHY, "cat /etc/os-release": CommandResult(0, UBUNTU_2404, "")},
        "hostkey": preflight.UnknownHostKey("host key of [10.0.0.7]:22 unknown (ssh-ed25519); ssh to it once or add it to known_hosts"),
        "oldpython": {**HEALTHY, "python3 --version": CommandResult(0, "Python 3.6.8\n", "")},
        "boom": RuntimeError("library bug"),
    }
    results, _ = run(make_cluster(*behaviour), behaviour, forks=4)
    by_host = {result.host: result for result in results}

    assert [result.host for result in results] == list(behaviour)  # inventory order, whatever finished first
    assert {name for name, result in by_host.items() if result.ok} == {"sudo", "ubuntu"}
    assert by_host["sudo"].checks["root_or_sudo"] == (True, "passwordless sudo as admin")
    assert by_host["ubuntu"].os == "Ubuntu 24.04"

    assert by_host["down"].checks == {"ssh": (False, "unreachable: admin@10.0.0.1:22: timed out after 10s")}
    assert by_host["down"].error.startswith("unreachable")
    assert by_host["nosudo"].checks["root_or_sudo"] == (
        False, "admin is not root and has no passwordless sudo (sudo: a password is required)")
    assert by_host["nosudo"].checks["python3"][0] and by_host["nosudo"].checks["os"][0]  # later checks still ran
    assert by_host["nopython"].checks["python3"] == (False, "python3: not found; install python3 on the host")
    assert by_host["rocky"].checks["os"] == (
        False, "Rocky Linux 9.3 is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)")
    assert by_host["rocky"].os == "Rocky Linux 9.3"
    assert "ssh to it once or add it to known_hosts" in by_host["hostkey"].error
    assert "too old" in by_host["oldpython"].checks["python3"][1]
    assert by_host["boom"].checks == {"ssh": (False, "ssh failed: RuntimeError: library bug")}
    # SSH got no session on these (a moved port may even answer with another node's host key)
    assert preflight.unreachable_hosts(results) == ["down", "hostkey", "boom"]


def test_lost_connection_mid_checks_is_a_row_not_an_exception():
    class Dropping(FakeSession):
        def run(self, command):
            if command == "python3 --version":
                raise EOFError("socket closed")
            return super().run(command)

    cluster = make_cluster("gpu01")
    [result] = preflight.run_preflight(cluster, connect=lambda host, timeout: Dropping(HEALTHY))
    assert not result.ok
    assert "connection lost during checks: EOFError" in result.error


def test_ansible_python_interpreter_is_what_gets_checked():
    cluster = make_cluster("gpu01", vars={"ansible_python_interpreter": "/opt/py/bin/python3"})
    behaviour = {"gpu01": {**HEALTHY, "/opt/py/bin/python3 --version": CommandResult(0, "Python 3.12.1", "")}}
    [result], connect = run(cluster, behaviour)
    assert result.checks["python3"] == (True, "3.12.1")
    assert "/opt/py/bin/python3 --version" in connect.sessions["gpu01"].commands


def test_debian_testing_without_version_id_is_recognised():
    assert preflight.judge_os(preflight.parse_os_release(TRIXIE_TESTING)) == (True, "Debian 13")
    assert preflight.judge_os(preflight.parse_os_release("ID=debian\nVERSION_ID=11\n")) == (False, "Debian 11")
    assert preflight.judge_os({}) == (False, "unknown OS")


def test_os_judgement_is_the_collections_table():
    for release in platforms.RELEASES:
        os_release = {"ID": release.os_id, "VERSION_ID": release.version, "VERSION_CODENAME": release.codename}
        assert preflight.judge_os(os_release) == (True, release.name)
        assert preflight.os_release_of(os_release) == release
    assert preflight.judge_os({"ID": "ubuntu", "VERSION_ID": "22.10", "NAME": "Ubuntu"}) == (False, "Ubuntu 22.10")


def test_supported_but_untested_release_passes_marked_untested():
    behaviour = {"deb": HEALTHY, "ubu": {**HEALTHY, "cat /etc/os-release": CommandResult(0, UBUNTU_2404, "")}}
    (deb, ubu), _ = run(make_cluster(*behaviour), behaviour)
    assert deb.ok and deb.os_tested is True and deb.checks["os"] == (True, "Debian 12")
    assert ubu.ok and ubu.os == "Ubuntu 24.04" and ubu.os_tested is False
    assert ubu.checks["os"] == (True, "Ubuntu 24.04 (untested)")
    data = preflight.results_as_dict([deb, ubu])
    assert data["ok"] is True
    assert data["hosts"][1]["checks"]["os"] == {"ok": True, "detail": "Ubuntu 24.04 (untested)"}

    out = io.StringIO()
    preflight.print_table([deb, ubu], console=Console(file=out, width=200))
    text = out.getvalue()
    assert "ubu: Ubuntu 24.04 is supported but not tested in CI (tested: Debian 12, 13)" in text
    assert "deb: Debian 12 is supported but not tested" not in text
    assert "All 2 hosts passed preflight" in text


def test_limit_takes_host_and_group_names_only():
    cluster = make_cluster("ctl", "gpu01", "gpu02", groups={"slurm_controller": ["ctl"], "slurm_compute": ["gpu01", "gpu02"]})
    assert [h.name for h in preflight.select_hosts(cluster, None)] == ["ctl", "gpu01", "gpu02"]
    assert [h.name for h in preflight.select_hosts(cluster, "slurm_compute")] == ["gpu01", "gpu02"]
    assert [h.name for h in preflight.select_hosts(cluster, "gpu02,ctl")] == ["ctl", "gpu02"]
    assert [h.name for h in preflight.select_hosts(cluster, "all")] == ["ctl", "gpu01", "gpu02"]
    with pytest.raises(InputError, match="no host or group named nosuch"):
        preflight.select_hosts(cluster, "gpu01,nosuch")
    with pytest.raises(InputError, match="pattern"):
        preflight.select_hosts(cluster, "gpu*")
    results, connect = run(cluster, {"gpu01": HEALTHY}, limit="gpu01")
    assert [r.host for r in results] == ["gpu01"] and list(connect.sessions) == ["gpu01"]


def test_json_and_table_output():
    behaviour = {"gpu01": HEALTHY, "gpu02": ConnectError("unreachable: admin@10.0.0.2:22: connection refused")}
    results, _ = run(make_cluster("gpu01", "gpu02"), behaviour)

    data = json.loads(json.dumps(preflight.results_as_dict(results)))
    assert data["ok"] is False
    assert data["hosts"][0] == {
        "host": "gpu01", "address": "10.0.0.1", "port": 22, "ok": True, "os": "Debian 12", "error": None,
        "checks": {
            "ssh": {"ok": True, "detail": "admin@10.0.0.1:22"},
            "root_or_sudo": {"ok": True, "detail": "root"},
            "python3": {"ok": True, "detail": "3.11.2"},
            "os": {"ok": True, "detail": "Debian 12"},
        },
    }
    assert data["hosts"][1]["ok"] is False and data["hosts"][1]["checks"]["ssh"]["ok"] is False
    assert preflight.unreachable_hosts(results) == ["gpu02"]  # the hosts a stale-port hint is about

    out = io.StringIO()
    preflight.print_table(results, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "10.0.0.1:22" in text and "Debian 12" in text and "3.11.2" in text
    assert "gpu02: unreachable: admin@10.0.0.2:22: connection refused" in text
    assert "1 of 2 hosts failed preflight" in text


def test_local_connection_hosts_are_checked_on_this_machine():
    cluster = make_cluster("ctl", "odd", groups={"slurm_controller": ["ctl"]})
    cluster.hosts["ctl"] = Host(name="ctl", groups=(), address="ctl", vars={"ansible_connection": "local"})
    cluster.hosts["odd"] = Host(name="odd", groups=(), address="odd", vars={"ansible_connection": "community.docker.docker"})
    local, odd = preflight.run_preflight(cluster)
    assert local.checks["ssh"] == (True, "local connection")
    assert set(local.checks) == {"ssh", "root_or_sudo", "python3", "os"}  # every check ran, whatever this machine is
    assert local.checks["python3"][0]
    assert odd.checks == {"ssh": (False, "ansible_connection 'community.docker.docker' is not one preflight can check (ssh or local)")}


def test_ssh_options_and_known_hosts_files(monkeypatch):
    args = "-o UserKnownHostsFile=/tmp/kh -oStrictHostKeyChecking=yes -o 'ProxyCommand ssh -o X=Y -W %h:%p jump'"
    options = preflight.ssh_options(args)
    assert options == {"userknownhostsfile": "/tmp/kh", "stricthostkeychecking": "yes", "proxycommand": "ssh -o X=Y -W %h:%p jump"}
    files = preflight.known_hosts_files(args)
    assert files[-1] == Path("/tmp/kh")
    assert Path("/etc/ssh/ssh_known_hosts") in files
    assert Path("/dev/null") not in preflight.known_hosts_files("-o UserKnownHostsFile=/dev/null")


# --------------------------------------------------------------------------
# the real paramiko client against a small in-process SSH server


class _Server(paramiko.ServerInterface):
    def __init__(self, client_key: paramiko.PKey, responses: dict[str, CommandResult]):
        self.client_key = client_key
        self.responses = responses

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_SUCCESSFUL if key == self.client_key else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command):
        command = command.decode().removeprefix("LC_ALL=C ")
        result = self.responses.get(command, CommandResult(127, "", "not found\n"))

        # answer inline, ending with EOF but no close: everything then reaches the client before (and in
        # order with) the reply to this request, and a close racing that reply would fail the exec
        channel.sendall(result.stdout.encode())
        channel.sendall_stderr(result.stderr.encode())
        channel.send_exit_status(result.rc)
        channel.shutdown_write()
        return True


@pytest.fixture(scope="module")
def keys():
    return {"server": paramiko.RSAKey.generate(2048), "client": paramiko.RSAKey.generate(2048),
            "other": paramiko.RSAKey.generate(2048)}


@pytest.fixture
def ssh_server(keys):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    transports = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(connection)
            transport.add_server_key(keys["server"])
            transports.append(transport)
            try:
                transport.start_server(server=_Server(keys["client"], HEALTHY))
            except (paramiko.SSHException, EOFError, OSError):
                transport.close()  # the client hung up (refused our host key): expected in some tests

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    yield listener.getsockname()[1]
    # shutdown() wakes the thread blocked in accept(); close() alone would not, and once the
    # descriptor number is reused by a later test's socket that thread would accept its connections.
    listener.shutdown(socket.SHUT_RDWR)
    server.join(10)
    listener.close()
    for transport in transports:
        transport.close()


@pytest.fixture
def real_host(tmp_path, keys, ssh_server, monkeypatch):
    monkeypatch.setattr(preflight, "SYSTEM_KNOWN_HOSTS", ())
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("ANSIBLE_HOST_KEY_CHECKING", raising=False)
    key_file = tmp_path / "id_rsa"
    keys["client"].write_private_key_file(str(key_file))
    known_hosts = tmp_path / "known_hosts"

    def make(server_key="server", client_key_file=key_file, extra_args=""):
        if server_key:
            known_hosts.write_text(f"[127.0.0.1]:{ssh_server} ssh-rsa {keys[server_key].get_base64()}\n")
        return Host(
            name="node", groups=("slurm_compute",), address="127.0.0.1", port=ssh_server, user="admin",
            private_key=str(client_key_file), ssh_common_args=f"-o UserKnownHostsFile={known_hosts} {extra_args}",
        )

    return make


def test_paramiko_known_host_passes_all_checks(real_host):
    result = preflight.check_host(real_host(), preflight.paramiko_connect, timeout=10)
    assert result.ok, result.as_dict()
    assert result.os == "Debian 12"


def test_paramiko_unknown_host_key_is_refused(real_host):
    result = preflight.check_host(real_host(server_key=None), preflight.paramiko_connect, timeout=10)
    assert not result.ok
    assert "unknown" in result.error and "ssh to it once or add it to known_hosts" in result.error


def test_paramiko_unknown_key_accepted_when_inventory_says_so(real_host):
    host = real_host(server_key=None, extra_args="-o StrictHostKeyChecking=no")
    assert preflight.check_host(host, preflight.paramiko_connect, timeout=10).ok


def test_paramiko_changed_host_key_is_refused(real_host):
    result = preflight.check_host(real_host(server_key="other"), preflight.paramiko_connect, timeout=10)
    assert not result.ok
    assert "does not match known_hosts" in result.error


def test_paramiko_wrong_client_key_is_an_auth_failure(real_host, keys, tmp_path):
    wrong = tmp_path / "wrong_key"
    keys["other"].write_private_key_file(str(wrong))
    result = preflight.check_host(real_host(client_key_file=wrong), preflight.paramiko_connect, timeout=10)
    assert not result.ok
    assert result.error.startswith("authentication failed as admin@127.0.0.1")


def test_paramiko_refused_port_is_unreachable():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    host = Host(name="gone", groups=(), address="127.0.0.1", port=port, user="admin")
    result = preflight.check_host(host, preflight.paramiko_connect, timeout=5)
    assert not result.ok
    assert result.error.startswith(f"unreachable: admin@127.0.0.1:{port}")
