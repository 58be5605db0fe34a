"""The Slurm exporter shipped by roles/slurm_exporter: parsing, timeouts, caching, exposition."""

from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

import pytest
from by_path import load_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "slurm_exporter" / "files" / "deepops_slurm_exporter.py"


exporter = load_module("deepops_slurm_exporter", SCRIPT)

# Shapes of Slurm 22.05 output (Debian 12), trimmed.
NODES = """\
NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=2 CPUEfctv=2 CPUTot=2 CPULoad=0.10 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8(S:0) NodeAddr=gpu01 NodeHostName=gpu01 Version=22.05.8 OS=Linux RealMemory=3000 AllocMem=0 FreeMem=1000 Sockets=2 Boards=1 State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=all,h100 CfgTRES=cpu=2,mem=3000M,billing=2,gres/gpu=8,gres/gpu:h100=8 AllocTRES=cpu=2,gres/gpu=3,gres/gpu:h100=3 CapWatts=n/a CurrentWatts=0 AveWatts=0
NodeName=gpu02 Arch=x86_64 CPUTot=2 Gres=gpu:a100:4 State=IDLE+DRAIN ThreadsPerCore=1 Partitions=all,a100 CfgTRES=cpu=2,mem=3000M,billing=2,gres/gpu=4 AllocTRES= Reason=disk check failed [root@2024-01-01T00:00:00]
NodeName=gpu03 Arch=x86_64 CPUTot=2 Gres=(null) State=DOWN*+NOT_RESPONDING ThreadsPerCore=1 Partitions=all CfgTRES=cpu=2,mem=3000M AllocTRES=
NodeName=gpu04 State=ALLOCATED+DRAIN CfgTRES=cpu=2,gres/gpu:a100=4 AllocTRES=cpu=2,gres/gpu:a100=4
NodeName=gpu05 Arch=x86_64 CPUTot=2 Gres=gpu:h100:1(S:0),gpu:1g.10gb:7(S:0) State=MIXED ThreadsPerCore=1 Partitions=all,h100 CfgTRES=cpu=2,mem=3000M,billing=2,gres/gpu=8,gres/gpu:1g.10gb=7,gres/gpu:h100=1 AllocTRES=cpu=1,gres/gpu=2,gres/gpu:1g.10gb=2
"""

JOBS = """\
JobId=41 JobName=train UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority=1 Nice=0 Account=physics QOS=normal JobState=RUNNING Reason=None Dependency=(null) Partition=all AllocNode:Sid=ctl01:100 NodeList=gpu01 BatchHost=gpu01 NumNodes=1 NumCPUs=2 TRES=cpu=2,mem=100M,node=1,billing=2,gres/gpu=3 AllocTRES=cpu=2,mem=100M,node=1,billing=2,gres/gpu=3
JobId=42 JobName=wait UserId=bob(1002) Account=chem JobState=PENDING Reason=Resources Partition=all NodeList=(null) AllocTRES=(null) TresPerJob=gres:gpu:8
JobId=43 JobName=wait UserId=bob(1002) Account=chem JobState=PENDING Reason=Priority Partition=all NodeList=(null)
JobId=44 JobName=cpu UserId=root(0) Account=root JobState=RUNNING Partition=h100 NodeList=gpu[01-02] AllocTRES=cpu=4,node=2
JobId=40 JobName=old UserId=alice(1001) Account=physics JobState=COMPLETED Partition=all NodeList=gpu01 AllocTRES=cpu=2,gres/gpu=1
"""

SDIAG = """\
*******************************************************
sdiag output at Thu Nov 30 10:00:00 2026 (1701338400)
Data since      Thu Nov 30 09:00:00 2026 (1701334800)
*******************************************************
Server thread count:  1
Agent queue size:     0
Agent count:          0
Agent thread count:   0
DBD Agent queue size: 0

Jobs submitted: 12
Jobs started:   10
Jobs completed: 9
Jobs canceled:  1
Jobs failed:    0

Job states ts:  Thu Nov 30 10:00:00 2026 (1701338400)
Jobs pending:   2
Jobs running:   1

Main schedule statistics (microseconds):
	Last cycle:   1500
	Max cycle:    25000
	Total cycles: 120
	Mean cycle:   2000
	Mean depth cycle:  3
	Cycles per minute: 2
	Last queue length: 2

Backfilling stats
	Total backfilled jobs (since last slurm start): 4
	Total backfilled jobs (since last stats cycle start): 4
	Total backfilled heterogeneous job components: 0
	Total cycles: 30
	Last cycle when: Thu Nov 30 09:59:30 2026 (1701338370)
	Last cycle: 800
	Max cycle:  9000
	Mean cycle: 700
	Last depth cycle: 2
	Last depth cycle (try sched): 2
	Depth Mean: 1
	Depth Mean (try depth): 1
	Last queue length: 2
	Queue length mean: 1

Latency for 1000 calls to gettimeofday(): 20 microseconds

Remote Procedure Call statistics by message type
	REQUEST_PARTITION_INFO                  ( 2009) count:10 ave_time:100 total_time:1000
	Last cycle: 999999
"""

PING = "Slurmctld(primary) at ctl01 is UP\nSlurmctld(backup) at ctl02 is DOWN\n"


def _by_name(samples):
    found = {}
    for name, labels, value in samples:
        found.setdefault(name, {})[tuple(sorted(labels.items()))] = value
    return found


def test_node_states_and_gpus():
    metrics = _by_name(exporter.node_samples(NODES))
    states = {dict(labels)["node"]: dict(labels)["state"] for labels in metrics["slurm_node_state"]}
    assert states == {"gpu01": "mixed", "gpu02": "drained", "gpu03": "down", "gpu04": "draining", "gpu05": "mixed"}
    assert metrics["slurm_node_responding"][(("node", "gpu03"),)] == 0.0
    assert metrics["slurm_node_responding"][(("node", "gpu01"),)] == 1.0
    total = {dict(labels)["node"]: value for labels, value in metrics["slurm_node_gpus_total"].items()}
    allocated = {dict(labels)["node"]: value for labels, value in metrics["slurm_node_gpus_allocated"].items()}
    assert total == {"gpu01": 8, "gpu02": 4, "gpu03": 0, "gpu04": 4, "gpu05": 8}  # gpu04: typed gres only
    assert allocated == {"gpu01": 3, "gpu02": 0, "gpu03": 0, "gpu04": 4, "gpu05": 2}


def test_gres_per_type_counts_mig_profiles_apart_from_gpu_models():
    metrics = _by_name(exporter.node_samples(NODES))

    def per_type(metric):
        return {(dict(labels)["node"], dict(labels)["type"]): value for labels, value in metrics[metric].items()}

    # gpu02 and gpu03 track no typed TRES: no per-type series rather than wrong zeros.
    assert per_type("slurm_node_gres_gpu_total") == {
        ("gpu01", "h100"): 8, ("gpu04", "a100"): 4, ("gpu05", "1g.10gb"): 7, ("gpu05", "h100"): 1,
    }
    assert per_type("slurm_node_gres_gpu_allocated") == {
        ("gpu01", "h100"): 3, ("gpu04", "a100"): 4, ("gpu05", "1g.10gb"): 2, ("gpu05", "h100"): 0,
    }
    assert exporter.tres_gpus_by_type("cpu=1,gres/gpu=9,gres/gpu:2g.20gb+me=1,gres/gpu:3g.40gb=2,gres/gpu:=5") == {
        "2g.20gb+me": 1, "3g.40gb": 2,
    }
    assert exporter.tres_gpus_by_type("(null)") == exporter.tres_gpus_by_type("") == {}


def test_reason_with_spaces_stays_in_its_field():
    (record,) = exporter.parse_oneliners(NODES.splitlines()[1])
    assert record["Reason"] == "disk check failed [root@2024-01-01T00:00:00]"


@pytest.mark.parametrize(
    ("state", "derived", "responding"),
    [
        ("IDLE", "idle", True),
        ("MIXED+DRAIN", "draining", True),
        ("IDLE+DRAIN", "drained", True),
        ("DOWN+DRAIN+NOT_RESPONDING", "drained", False),
        ("DOWN*", "down", False),
        ("IDLE+COMPLETING", "completing", True),
        ("ALLOCATED", "allocated", True),
        ("FUTURE", "future", True),
        ("", "unknown", True),
    ],
)
def test_node_state_names(state, derived, responding):
    assert exporter.node_state(state) == (derived, responding)


def test_jobs_queue_and_gpus_per_running_job():
    metrics = _by_name(exporter.job_samples(JOBS))
    queue = {(dict(k)["partition"], dict(k)["state"]): v for k, v in metrics["slurm_queue_jobs"].items()}
    assert queue == {("all", "running"): 1, ("all", "pending"): 2, ("h100", "running"): 1, ("all", "completed"): 1}
    jobs = {dict(k)["job_id"]: (dict(k), v) for k, v in metrics["slurm_job_gpus"].items()}
    assert set(jobs) == {"41", "44"}  # running jobs only
    labels, gpus = jobs["41"]
    assert gpus == 3
    assert labels == {"job_id": "41", "user": "alice", "account": "physics", "partition": "all", "nodes": "gpu01"}
    assert jobs["44"][1] == 0 and jobs["44"][0]["nodes"] == "gpu[01-02]"


def test_sdiag():
    metrics = {name: value for name, _, value in exporter.sdiag_samples(SDIAG)}
    assert metrics["slurm_scheduler_last_cycle_seconds"] == pytest.approx(0.0015)
    assert metrics["slurm_scheduler_max_cycle_seconds"] == pytest.approx(0.025)
    assert metrics["slurm_scheduler_mean_cycle_seconds"] == pytest.approx(0.002)
    assert metrics["slurm_scheduler_cycles_per_minute"] == 2
    assert metrics["slurm_scheduler_backfill_last_cycle_seconds"] == pytest.approx(0.0008)
    assert metrics["slurm_scheduler_backfilled_jobs_since_start"] == 4
    assert metrics["slurm_scheduler_threads"] == 1
    assert metrics["slurm_scheduler_jobs_submitted"] == 12
    # the RPC section's "Last cycle" must not overwrite the backfill one
    assert metrics["slurm_scheduler_backfill_last_cycle_seconds"] != pytest.approx(0.999999)


def test_ping():
    metrics = _by_name(exporter.ping_samples(PING))["slurm_slurmctld_up"]
    assert metrics == {(("host", "ctl01"), ("role", "primary")): 1.0, (("host", "ctl02"), ("role", "backup")): 0.0}


def _fake_tools(tmp_path: Path, *, hang: set[str] = frozenset(), fail: set[str] = frozenset()) -> Path:
    outputs = {"scontrol-node": NODES, "scontrol-job": JOBS, "scontrol-ping": PING, "sdiag": SDIAG, "sacctmgr": "deepops\n"}
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name, text in outputs.items():
        (data / name).write_text(text)
    scripts = {
        "scontrol": 'case "$*" in *node*) k=scontrol-node;; *job*) k=scontrol-job;; *ping*) k=scontrol-ping;; esac',
        "sdiag": "k=sdiag",
        "sacctmgr": "k=sacctmgr",
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool, select in scripts.items():
        body = "#!/bin/sh\n" + select + "\n"
        if tool in hang:
            body += "sleep 300\n"
        if tool in fail:
            body += 'echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1\n'
        body += f'cat "{data}/$k"\n'
        (bin_dir / tool).write_text(body)
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_hung_command_times_out_and_never_blocks_a_scrape(tmp_path):
    bin_dir = _fake_tools(tmp_path, hang={"sacctmgr"})
    ex = exporter.Exporter(exporter.default_sources(str(bin_dir)), interval=0.2, timeout=1.0)
    ex.start()
    try:
        assert _wait_for(lambda: all(source.last is not None for source in ex.sources), timeout=10)
        start = time.monotonic()
        metrics = _by_name(ex.samples())
        assert time.monotonic() - start < 0.5, "a scrape must read the cache only"
        assert metrics["slurm_slurmdbd_up"] == {(): 0.0}
        assert metrics["slurm_exporter_command_success"][(("command", "slurmdbd"),)] == 0.0
        assert metrics["slurm_exporter_command_success"][(("command", "nodes"),)] == 1.0
        slurmdbd = next(source for source in ex.sources if source.name == "slurmdbd")
        assert "timed out" in slurmdbd.last.error
        assert slurmdbd.last.duration < 3.0
    finally:
        ex.stop()


def test_failing_command_keeps_stale_data_and_says_so(tmp_path):
    bin_dir = _fake_tools(tmp_path)
    sources = exporter.default_sources(str(bin_dir))
    for source in sources:
        source.refresh(5)
    assert _by_name(sources[0].samples)["slurm_node_state"]
    _fake_tools(tmp_path, fail={"scontrol"})
    for source in sources:
        source.refresh(5)
    nodes, ping = sources[0], sources[3]
    assert not nodes.last.ok and "Unable to contact" in nodes.last.error
    assert _by_name(nodes.samples)["slurm_node_state"], "stale node data kept"
    assert _by_name(ping.samples)["slurm_slurmctld_up"] == {(("host", ""), ("role", "primary")): 0.0}


def test_missing_binary_is_a_failed_command(tmp_path):
    result = exporter.run_command([str(tmp_path / "nope")], 1)
    assert not result.ok and result.error


def test_http_exposition(tmp_path):
    # prometheus_client is a test dependency: a missing one fails this test, it is not skipped.
    import prometheus_client
    from prometheus_client import CollectorRegistry

    bin_dir = _fake_tools(tmp_path)
    ex = exporter.Exporter(exporter.default_sources(str(bin_dir)), interval=60, timeout=5)
    for source in ex.sources:
        source.refresh(5)
    registry = CollectorRegistry()
    registry.register(exporter.PrometheusCollector(ex))
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        port = server.server_address[1]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        thread.join(5)
    assert 'slurm_job_gpus{account="physics",job_id="41",nodes="gpu01",partition="all",user="alice"} 3.0' in text
    assert 'slurm_node_gpus_total{node="gpu01"} 8.0' in text
    # A MIG profile is a label value like any other, dots and all.
    assert 'slurm_node_gres_gpu_total{node="gpu05",type="1g.10gb"} 7.0' in text
    assert 'slurm_node_gres_gpu_allocated{node="gpu05",type="1g.10gb"} 2.0' in text
    assert 'slurm_node_gres_gpu_allocated{node="gpu05",type="h100"} 0.0' in text
    assert "# HELP slurm_node_gres_gpu_total" in text
    assert 'slurm_slurmctld_up{host="ctl01",role="primary"} 1.0' in text
    assert "slurm_slurmdbd_up 1.0" in text
    assert "# HELP slurm_queue_jobs" in text


def test_main_serves_metrics(tmp_path):
    """The script as systemd runs it: --listen-address, and SIGTERM ends it."""
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bin_dir = _fake_tools(tmp_path)
    proc = subprocess.Popen([sys.executable, str(SCRIPT), f"--listen-address=127.0.0.1:{port}", "--interval=1",
                             "--timeout=2", f"--slurm-bin-dir={bin_dir}"], stderr=subprocess.PIPE, text=True)
    try:
        def scraped():
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                return False
            return 'slurm_node_state{node="gpu02",state="drained"} 1.0' in text

        assert _wait_for(scraped, timeout=15)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


# --------------------------------------------------------------------------
# the monitoring account: --web-config-file


def _web_config(path: Path, password: str) -> Path:
    import json

    from ansible_collections.deepops.cluster.plugins.plugin_utils.monitoring_credentials import bcrypt_hash

    path.write_text(json.dumps({"basic_auth_users": {"deepops": bcrypt_hash(password)}}))
    return path


def _get(url: str, user: str | None = None, password: str = "") -> int:
    import base64
    import urllib.error

    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        return urllib.request.urlopen(request, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0  # nothing answers (yet)


def test_basic_auth_refuses_all_but_the_account_and_rereads_its_file(tmp_path):
    import bcrypt

    config = _web_config(tmp_path / "web.yml", "right")
    calls = []

    def app(environ, start_response):
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok\n"]

    server_port = _free_port()
    exporter.serve(exporter.basic_auth(app, str(config), bcrypt.checkpw), "127.0.0.1", server_port)
    url = f"http://127.0.0.1:{server_port}/metrics"
    assert _wait_for(lambda: _get(url) == 401, timeout=5)
    assert [_get(url, "deepops", "wrong"), _get(url, "root", "right"), _get(url, "deepops", "right")] == [401, 401, 200]
    assert calls == ["/metrics"]  # only the right account reached the exporter
    _web_config(config, "changed")  # a new password takes effect without a restart
    assert [_get(url, "deepops", "right"), _get(url, "deepops", "changed")] == [401, 200]


def test_main_with_a_web_config_serves_metrics_to_the_account_only(tmp_path):
    import subprocess

    port = _free_port()
    config = _web_config(tmp_path / "web.yml", "s3cret")
    proc = subprocess.Popen([sys.executable, str(SCRIPT), f"--listen-address=127.0.0.1:{port}", "--interval=1",
                             "--timeout=2", f"--slurm-bin-dir={_fake_tools(tmp_path)}", f"--web-config-file={config}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: _get(f"http://127.0.0.1:{port}/metrics") == 401, timeout=15)
        assert _get(f"http://127.0.0.1:{port}/metrics", "deepops", "s3cret") == 200
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
