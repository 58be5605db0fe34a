"""deepops status: parsing recorded Slurm outputs (22.05 and 24.11), the collector, partial results."""

from __future__ import annotations

import base64
import http.server
import json
import os
import ssl
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from ansible_collections.deepops.cluster.plugins.plugin_utils import monitoring_credentials
from deepops_py import cli, preflight
from deepops_py import status as st
from deepops_py.inventory import Cluster, Host

DATA = Path(__file__).parent / "data" / "status"
VERSIONS = ("slurm-22.05", "slurm-24.11")


def recorded(version: str, name: str) -> str:
    return (DATA / version / name).read_text()


def raw_outputs(version: str) -> dict:
    """The collector's answer as the recorded outputs make it (rc 0 each)."""
    return {name: {"rc": 0, "stdout": recorded(version, f"{name}.txt"), "stderr": ""} for name in st.SLURM_COMMANDS}


# --------------------------------------------------------------------------
# parsing


def test_oneliner_keeps_values_with_spaces_and_the_whole_reason():
    fields = st.parse_oneliner(
        "NodeName=gpu01 Arch=x86_64 OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) "
        "State=IDLE+DRAIN Partitions=gpu,debug Reason=fan=broken, see ticket 42 [root@2026-12-02T04:00:00]"
    )
    assert fields["OS"] == "Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"
    assert fields["State"] == "IDLE+DRAIN" and fields["Partitions"] == "gpu,debug"
    assert fields["Reason"] == "fan=broken, see ticket 42 [root@2026-12-02T04:00:00]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:h100:8(S:0-1)", {"h100": 8}),
        ("gpu:h100:2(IDX:0,3)", {"h100": 2}),
        ("gpu:1g.10gb:2(IDX:0-1),gpu:a100:1(IDX:3)", {"1g.10gb": 2, "a100": 1}),
        ("gpu:a100:0(IDX:N/A),gpu:3g.20gb:1(IDX:0)", {"a100": 0, "3g.20gb": 1}),
        ("gpu:4", {"": 4}),
        ("gpu:(null):0", {"": 0}),
        ("gpu:h100:8,gpu:8", {"h100": 8}),  # the untyped total beside typed entries counts once
        ("mps:200,gpu:l40s:1(S:0)", {"l40s": 1}),
        ("(null)", {}),
        ("", {}),
        (None, {}),
    ],
)
def test_gpu_gres(text, expected):
    assert st.parse_gpu_gres(text) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_outputs_parse_alike(version):
    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01")
    st.apply_slurm(status, raw_outputs(version), "ctl01")
    assert status.errors == []
    assert status.slurm_version.startswith(version.removeprefix("slurm-"))
    nodes = {node.name: node for node in status.nodes}
    assert sorted(nodes) == ["gpu01", "gpu02"]
    assert all(node.partitions for node in nodes.values())
    assert all(node.cpus_total >= 1 for node in nodes.values())
    assert [p.name for p in status.partitions] and sum(p.default for p in status.partitions) == 1


EXPECTED = json.loads((DATA / "expected.json").read_text()) if (DATA / "expected.json").is_file() else {}


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_outputs_give_the_recorded_cluster(version):
    """Each recording was taken with jobs running and a node drained; expected.json says what Slurm showed."""
    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01")
    st.apply_slurm(status, raw_outputs(version), "ctl01")
    data = status.as_dict()
    expected = EXPECTED[version]
    assert {node["name"]: node["state"] for node in data["nodes"]} == expected["states"]
    assert {node["name"]: node["reason"] for node in data["nodes"]} == expected["reasons"]
    assert {node["name"]: node["gpus"]["types"] for node in data["nodes"]} == expected["gpus"]
    assert {p["name"]: p["jobs"] for p in data["partitions"]} == expected["jobs"]
    assert data["gpus"]["total"] == sum(t["total"] for n in expected["gpus"].values() for t in n.values())


def test_squeue_counts_a_job_in_every_partition_it_waits_for():
    partitions = st.parse_partitions("PartitionName=gpu Default=YES State=UP TotalNodes=2 Nodes=gpu[01-02]\n")
    st.count_jobs(partitions, st.parse_squeue(
        "12|gpu|RUNNING|alice|1|None\n13|gpu,old|PENDING|bob|1|Resources\n14|gpu|COMPLETING|carol|1|None\n"))
    counts = {p.name: (p.running, p.pending, p.other) for p in partitions}
    assert counts == {"gpu": (1, 1, 1), "old": (0, 1, 0)}


def test_alerts_sorted_critical_first_with_node_or_instance():
    body = json.dumps([
        {"labels": {"alertname": "NodeDown", "severity": "warning", "instance": "gpu02:9100"},
         "annotations": {"summary": "gpu02 is down"}, "startsAt": "2026-12-02T04:00:00Z"},
        {"labels": {"alertname": "GpuXid", "severity": "critical", "node": "gpu01"},
         "annotations": {"description": "XID 79"}, "startsAt": "2026-12-02T04:01:00Z"},
    ])
    alerts = st.parse_alerts(body)
    assert [(a.name, a.target, a.summary) for a in alerts] == [
        ("GpuXid", "gpu01", "XID 79"), ("NodeDown", "gpu02:9100", "gpu02 is down")]
    with pytest.raises(ValueError):
        st.parse_alerts('{"status": "error"}')


def test_a_failed_slurm_command_is_named_and_the_rest_still_shown():
    raw = raw_outputs("slurm-24.11")
    raw["squeue"] = {"rc": 1, "stdout": "", "stderr": "squeue: error: Unable to contact slurm controller"}
    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01")
    st.apply_slurm(status, raw, "ctl01")
    assert status.nodes and status.partitions is None
    [problem] = status.errors
    assert problem.source == "slurm" and "Unable to contact slurm controller" in problem.message
    assert status.exit_code == st.EXIT_PARTIAL


# --------------------------------------------------------------------------
# the collector, run here for real: fake Slurm commands, a real HTTPS Alertmanager stand-in


def _fake_slurm(bin_dir: Path, version: str) -> None:
    bin_dir.mkdir()
    for command in ("sinfo", "scontrol", "squeue"):
        script = bin_dir / command
        script.write_text(
            "#!/bin/sh\n"
            f'case "$*" in\n'
            f'  --version) cat {DATA / version / "version.txt"} ;;\n'
            f'  *--Node*) cat {DATA / version / "sinfo.txt"} ;;\n'
            f'  *"show node"*) cat {DATA / version / "nodes.txt"} ;;\n'
            f'  *"show partition"*) cat {DATA / version / "partitions.txt"} ;;\n'
            f'  *) cat {DATA / version / "squeue.txt"} ;;\n'
            "esac\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)


class _Alertmanager(http.server.BaseHTTPRequestHandler):
    password = ""
    body = b"[]"
    seen: list = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append(self.path)
        expected = "Basic " + base64.b64encode(f"deepops:{self.password}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def alertmanager(tmp_path):
    """An HTTPS server with the deploy's kind of CA and basic auth, and the arguments file pointing at it."""
    credentials = monitoring_credentials.ensure(tmp_path / "secrets", ["localhost", "127.0.0.1"])
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    (server_dir / "cert.pem").write_text(credentials.server_cert)
    (server_dir / "key.pem").write_text(credentials.server_key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_dir / "cert.pem", server_dir / "key.pem")
    handler = type("Handler", (_Alertmanager,), {"password": credentials.password, "seen": [],
                                                 "body": json.dumps([{"labels": {"alertname": "NodeDown",
                                                                                 "severity": "critical",
                                                                                 "node": "gpu02"}}]).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    args_file = tmp_path / "prometheus-alertmanager"
    args_file.write_text(
        '# managed\nARGS="--config.file=/etc/prometheus/alertmanager.yml '
        f'--web.listen-address=127.0.0.1:{server.server_address[1]} --cluster.listen-address= '
        '--web.config.file=/etc/deepops/monitoring/web.yml"\n'
    )
    request = {"path": st.ALERTS_PATH, "args_file": str(args_file), "ca_file": str(tmp_path / "secrets" / "monitoring-ca.crt"),
               "password_file": str(tmp_path / "no-such-password"), "user": "deepops", "password": credentials.password}
    yield request, handler
    server.shutdown()


@pytest.mark.parametrize("version", VERSIONS)
def test_collector_runs_the_commands_and_queries_alertmanager(tmp_path, monkeypatch, alertmanager, version):
    _fake_slurm(tmp_path / "bin", version)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    am_request, handler = alertmanager
    raw = st.collect(preflight.LocalSession(30), {"commands": st.SLURM_COMMANDS, "timeout": 10, "alertmanager": am_request})
    assert {name: raw[name]["stdout"] for name in st.SLURM_COMMANDS} == {
        name: recorded(version, f"{name}.txt") for name in st.SLURM_COMMANDS}
    assert handler.seen == [st.ALERTS_PATH]
    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01")
    st.apply_slurm(status, raw, "ctl01")
    st.apply_alerts(status, raw["alertmanager"], "ctl01")
    assert status.complete, status.errors
    assert [(a.name, a.target) for a in status.alerts] == [("NodeDown", "gpu02")]


def test_collector_reports_a_wrong_password_and_a_missing_alertmanager(tmp_path, alertmanager):
    am_request, _ = alertmanager
    raw = st.collect(preflight.LocalSession(30), {"alertmanager": {**am_request, "password": "wrong"}})
    assert "HTTP 401" in raw["alertmanager"]["error"]
    raw = st.collect(preflight.LocalSession(30), {"alertmanager": {**am_request, "password": ""}})
    assert "no password for the monitoring account" in raw["alertmanager"]["error"]
    raw = st.collect(preflight.LocalSession(30), {"alertmanager": {**am_request, "args_file": str(tmp_path / "none")}})
    assert "not set up on this host" in raw["alertmanager"]["error"]


def test_collector_names_a_missing_command():
    raw = st.collect(preflight.LocalSession(30), {"commands": {"squeue": ["deepops-no-such-squeue", "-h"]}})
    assert raw["squeue"]["rc"] == 127 and "deepops-no-such-squeue" in raw["squeue"]["stderr"]


# --------------------------------------------------------------------------
# gather: partial results, never a traceback


def _cluster(tmp_path, monitoring: str | None = None) -> Cluster:
    hosts = {
        "ctl01": Host("ctl01", ("slurm_controller",), "10.0.0.1"),
        "mon01": Host("mon01", ("monitoring",), "10.0.0.2"),
        "gpu01": Host("gpu01", ("slurm_compute",), "10.0.0.3"),
    }
    groups = {"slurm_controller": ["ctl01"], "slurm_compute": ["gpu01"]}
    if monitoring:
        groups["monitoring"] = [monitoring]
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    return Cluster(inventory=inventory, hosts=hosts, groups=groups)


class _Session:
    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def run(self, command, stdin=None):
        self.requests.append(json.loads(stdin))
        return preflight.CommandResult(0, json.dumps(self.answer(self.requests[-1])), "")

    def close(self):
        pass


def test_gather_unreachable_controller_is_partial(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))

    def connect(host, timeout):
        raise preflight.ConnectError(f"unreachable: root@{host.address}:22: Connection refused")

    status = st.gather(_cluster(tmp_path), connect=connect)
    data = status.as_dict()
    assert status.exit_code == st.EXIT_PARTIAL and not data["complete"]
    assert data["nodes"] is None and data["partitions"] is None and data["alerts"] is None
    assert data["errors"] == [{"source": "controller", "host": "ctl01",
                               "message": "Slurm and Alertmanager not read: unreachable: root@10.0.0.1:22: Connection refused"}]
    assert data["runs"] == {"deploy": None, "validate": None}


def test_gather_reads_slurm_from_the_backup_controller_while_the_first_is_away(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    cluster = _cluster(tmp_path)
    cluster.hosts["ctl02"] = Host("ctl02", ("slurm_controller",), "10.0.0.4")
    cluster.groups["slurm_controller"] = ["ctl01", "ctl02"]
    asked = []

    def connect(host, timeout):
        asked.append(host.name)
        if host.name == "ctl01":
            raise preflight.ConnectError("unreachable: root@10.0.0.1:22: No route to host")
        return _Session(lambda request: {name: {"rc": 0, "stdout": recorded("slurm-22.05", f"{name}.txt")
                                                if name in st.SLURM_COMMANDS else "inactive\n", "stderr": ""}
                                         for name in request.get("commands", {})})

    status = st.gather(cluster, connect=connect)
    assert asked == ["ctl01", "ctl02"]
    assert status.controller == "ctl02" and len(status.nodes) == 2 and status.exit_code == st.EXIT_PARTIAL
    assert [(problem.source, problem.host) for problem in status.errors] == [("controller", "ctl01")]
    # slurmrestd is the first controller's: away with it
    assert status.rest_api == {"url": "http://ctl01:6820", "active": False, "token": st.TOKEN_COMMAND}


def test_gather_asks_a_separate_monitoring_host_for_alerts_only(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    sessions = {}

    def connect(host, timeout):
        def answer(request):
            out = {name: {"rc": 0, "stdout": recorded("slurm-22.05", f"{name}.txt") if name in st.SLURM_COMMANDS
                          else "active\n", "stderr": ""}
                   for name in request.get("commands", {})}
            if "alertmanager" in request:
                out["alertmanager"] = {"url": "https://mon01:9093" + st.ALERTS_PATH, "status": 200, "body": "[]"}
            return out

        sessions[host.name] = _Session(answer)
        return sessions[host.name]

    status = st.gather(_cluster(tmp_path, monitoring="mon01"), connect=connect)
    assert status.complete, status.errors
    assert set(sessions["ctl01"].requests[0]) == {"commands", "timeout"}
    assert set(sessions["mon01"].requests[0]) == {"alertmanager", "timeout"}
    assert sessions["mon01"].requests[0]["alertmanager"]["args_file"] == "/etc/default/prometheus-alertmanager"
    assert status.alerts == [] and len(status.nodes) == 2
    # The REST API is on by default: slurmrestd's state is read with the rest.
    assert sessions["ctl01"].requests[0]["commands"]["restd"] == st.RESTD_COMMAND
    assert status.as_dict()["rest_api"] == {"url": "http://ctl01:6820", "active": True, "token": st.TOKEN_COMMAND}


def test_gather_leaves_the_rest_api_out_when_the_inventory_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    cluster = _cluster(tmp_path)
    cluster.hosts["ctl01"] = Host("ctl01", ("slurm_controller",), "10.0.0.1", vars={"slurm_restd_enabled": False})
    sessions = []

    def connect(host, timeout):
        sessions.append(_Session(lambda request: {name: {"rc": 0, "stdout": recorded("slurm-22.05", f"{name}.txt"),
                                                          "stderr": ""} for name in request.get("commands", {})}))
        return sessions[-1]

    status = st.gather(cluster, connect=connect)
    assert "restd" not in sessions[0].requests[0]["commands"]
    assert status.rest_api is None and status.as_dict()["rest_api"] is None


@pytest.mark.parametrize(
    ("listen", "url"),
    [(":6820", "http://ctl01:6820"), ("0.0.0.0:8080", "http://ctl01:8080"), ("[::]:6820", "http://ctl01:6820"),
     ("10.1.0.5:6820", "http://10.1.0.5:6820"), ("[fd00::5]:6820", "http://[fd00::5]:6820"),
     ("unix:/run/slurmrestd/slurmrestd.socket", "unix:/run/slurmrestd/slurmrestd.socket")],
)
def test_rest_api_url(listen, url):
    assert st.rest_api_url(listen, "ctl01") == url


def test_screen_says_how_to_get_a_token():
    from rich.console import Console

    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01",
                       rest_api={"url": "http://ctl01:6820", "active": False, "token": st.TOKEN_COMMAND})
    console = Console(record=True, width=200)
    st.print_status(status, console)
    text = console.export_text()
    assert "REST API: http://ctl01:6820 (slurmrestd not running); a token: scontrol token lifespan=3600" in text
    assert "X-SLURM-USER-NAME and X-SLURM-USER-TOKEN" in text


def test_gather_uses_the_password_beside_the_inventory(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "monitoring_password").write_text("s3cret salt=abc\n")
    request = st.alertmanager_request({}, tmp_path / "inventory.yml")
    assert request["password"] == "s3cret" and request["user"] == "deepops"
    assert request["ca_file"] == "/etc/deepops/monitoring/ca.crt"
    assert request["password_file"] == "/etc/deepops/monitoring/password"
    assert st.alertmanager_request({"monitoring_auth_password": "mine"}, tmp_path / "inventory.yml")["password"] == "mine"


def test_cli_status_json_and_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    cluster = _cluster(tmp_path)
    monkeypatch.setattr(cli, "_load_cluster", lambda inventory: cluster)

    def unreachable(host, timeout):
        raise preflight.ConnectError("unreachable: timed out")

    monkeypatch.setattr(preflight, "default_connect", unreachable)
    result = CliRunner().invoke(cli.main, ["status", "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["schema_version"] == st.SCHEMA_VERSION and data["errors"][0]["source"] == "controller"
    screen = CliRunner().invoke(cli.main, ["status"])
    assert screen.exit_code == 1 and "Not read: controller (ctl01)" in screen.stdout and "Traceback" not in screen.output


def test_jobs_total_counts_each_job_once():
    raw = raw_outputs("slurm-22.05")
    raw["squeue"]["stdout"] = "12|gpu|RUNNING|alice|1|None\n13|gpu,debug|PENDING|bob|1|Resources\n"
    raw["partitions"]["stdout"] = ("PartitionName=gpu Default=YES State=UP TotalNodes=2 Nodes=gpu[01-02]\n"
                                   "PartitionName=debug State=UP TotalNodes=1 Nodes=gpu01\n")
    status = st.Status(inventory="inv", controller="ctl01", monitoring="ctl01")
    st.apply_slurm(status, raw, "ctl01")
    assert status.as_dict()["jobs"] == {"running": 1, "pending": 1, "other": 0}
    assert {p.name: p.pending for p in status.partitions} == {"gpu": 1, "debug": 1}


def test_cli_status_bad_inventory_is_invalid_input(tmp_path):
    result = CliRunner().invoke(cli.main, ["status", "-i", str(tmp_path / "missing.yml")])
    assert result.exit_code == 2 and "does not exist" in result.output
