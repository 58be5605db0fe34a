#!/usr/bin/python3
"""deepops Slurm exporter: Slurm's state as Prometheus metrics.

Runs on the Slurm controller as a systemd service (installed by the
slurm_exporter role) under the system Python with Debian's
python3-prometheus-client. Every Slurm command runs in its own background
thread, under a timeout, and its last result is cached: a scrape only reads
the cache, so a hung slurmctld or slurmdbd never blocks a scrape.

Metrics (all gauges):
  slurm_node_state{node,state}             1 for the node's current state (idle, mixed, allocated,
                                           drained, draining, down, ...)
  slurm_node_responding{node}              0 when Slurm marks the node NOT_RESPONDING
  slurm_node_gpus_total{node}              GPU GRES configured (CfgTRES gres/gpu); a MIG device counts one
  slurm_node_gpus_allocated{node}          GPU GRES allocated to jobs (AllocTRES gres/gpu)
  slurm_node_gres_gpu_total{node,type}     GPU GRES configured, per type: GPU models (h100) and MIG
                                           profiles (1g.10gb); the types AccountingStorageTRES tracks
                                           (CfgTRES gres/gpu:<type>; the slurm role tracks every type)
  slurm_node_gres_gpu_allocated{node,type} GPU GRES allocated to jobs, per type (AllocTRES gres/gpu:<type>)
  slurm_queue_jobs{partition,state}        jobs by partition and state
  slurm_job_gpus{job_id,user,account,partition,nodes}  GPUs of each running job
  slurm_scheduler_*                        sdiag: main and backfill cycle statistics
  slurm_slurmctld_up{host}                 scontrol ping answers UP
  slurm_slurmdbd_up                        sacctmgr reaches slurmdbd
  slurm_exporter_command_success{command}  1 when the command's last run succeeded
  slurm_exporter_command_age_seconds{command}  age of the cached result

With --web-config-file (the monitoring account's web configuration, roles/
monitoring_auth: JSON with basic_auth_users {user: bcrypt hash}), every
request must carry one of those users' passwords (HTTP basic auth); bcrypt
comes from Debian's python3-bcrypt.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Sample = tuple[str, dict[str, str], float]  # (metric name, labels, value)

HELP = {
    "slurm_node_state": "1 for the node's current Slurm state (label state), derived like sinfo's long form",
    "slurm_node_responding": "0 when Slurm marks the node NOT_RESPONDING",
    "slurm_node_gpus_total": "GPU GRES configured on the node, a MIG device counting one (CfgTRES gres/gpu)",
    "slurm_node_gpus_allocated": "GPU GRES allocated to jobs on the node (AllocTRES gres/gpu)",
    "slurm_node_gres_gpu_total": "GPU GRES configured on the node per type, GPU model or MIG profile "
                                 "(CfgTRES gres/gpu:<type>)",
    "slurm_node_gres_gpu_allocated": "GPU GRES allocated to jobs on the node per type, GPU model or MIG profile "
                                     "(AllocTRES gres/gpu:<type>)",
    "slurm_queue_jobs": "Jobs known to slurmctld, by partition and state",
    "slurm_job_gpus": "GPUs allocated to each running job",
    "slurm_slurmctld_up": "1 when scontrol ping reports the slurmctld UP",
    "slurm_slurmdbd_up": "1 when sacctmgr reaches slurmdbd",
    "slurm_exporter_command_success": "1 when the command's last run succeeded within its timeout",
    "slurm_exporter_command_age_seconds": "Seconds since the command's cached result was taken",
    "slurm_exporter_command_duration_seconds": "How long the command's last run took",
}

# sdiag line -> (metric, scale). Cycle times are microseconds in sdiag, seconds here.
SDIAG_MAIN = {
    "Last cycle": ("slurm_scheduler_last_cycle_seconds", 1e-6),
    "Max cycle": ("slurm_scheduler_max_cycle_seconds", 1e-6),
    "Mean cycle": ("slurm_scheduler_mean_cycle_seconds", 1e-6),
    "Total cycles": ("slurm_scheduler_cycles", 1.0),
    "Cycles per minute": ("slurm_scheduler_cycles_per_minute", 1.0),
    "Mean depth cycle": ("slurm_scheduler_mean_depth_cycle", 1.0),
    "Last queue length": ("slurm_scheduler_last_queue_length", 1.0),
}
SDIAG_BACKFILL = {
    "Total backfilled jobs (since last slurm start)": ("slurm_scheduler_backfilled_jobs_since_start", 1.0),
    "Total cycles": ("slurm_scheduler_backfill_cycles", 1.0),
    "Last cycle": ("slurm_scheduler_backfill_last_cycle_seconds", 1e-6),
    "Max cycle": ("slurm_scheduler_backfill_max_cycle_seconds", 1e-6),
    "Mean cycle": ("slurm_scheduler_backfill_mean_cycle_seconds", 1e-6),
    "Last depth cycle": ("slurm_scheduler_backfill_last_depth_cycle", 1.0),
    "Last queue length": ("slurm_scheduler_backfill_last_queue_length", 1.0),
}
SDIAG_TOP = {
    "Server thread count": ("slurm_scheduler_threads", 1.0),
    "Agent queue size": ("slurm_scheduler_agent_queue_size", 1.0),
    "Jobs submitted": ("slurm_scheduler_jobs_submitted", 1.0),
    "Jobs started": ("slurm_scheduler_jobs_started", 1.0),
    "Jobs completed": ("slurm_scheduler_jobs_completed", 1.0),
    "Jobs failed": ("slurm_scheduler_jobs_failed", 1.0),
}
for _metric, _help in [*SDIAG_MAIN.values(), *SDIAG_BACKFILL.values(), *SDIAG_TOP.values()]:
    HELP.setdefault(_metric, "sdiag: " + _metric.removeprefix("slurm_scheduler_").replace("_", " "))


# --------------------------------------------------------------------------
# parsing (pure functions, unit-tested on recorded outputs)


def parse_oneliners(text: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show node|job`` -> one dict per record (Key=Value pairs)."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not line or "=" not in line:
            continue
        record: dict[str, str] = {}
        # Values may contain spaces only in a few keys (Reason=..., Comment=...); a token
        # without "=" belongs to the value before it.
        key = None
        for token in line.split(" "):
            match = re.match(r"^([A-Za-z][A-Za-z0-9_:/]*)=(.*)$", token)
            if match:
                key = match.group(1)
                record[key] = match.group(2)
            elif key is not None and token:
                record[key] += " " + token
        records.append(record)
    return records


def tres_gpus(tres: str) -> int:
    """``cpu=4,mem=1G,gres/gpu=2,gres/gpu:h100=2`` -> 2 (the untyped gres/gpu count)."""
    typed = 0
    for item in (tres or "").split(","):
        name, _sep, value = item.partition("=")
        if name == "gres/gpu":
            return _int(value)
        if name.startswith("gres/gpu:"):
            typed += _int(value)
    return typed


def tres_gpus_by_type(tres: str) -> dict[str, int]:
    """``gres/gpu=11,gres/gpu:h100=4,gres/gpu:1g.10gb=7`` -> {"h100": 4, "1g.10gb": 7} (typed entries only)."""
    counts: dict[str, int] = {}
    for item in (tres or "").split(","):
        name, _sep, value = item.partition("=")
        if name.startswith("gres/gpu:") and len(name) > len("gres/gpu:"):
            gpu_type = name[len("gres/gpu:"):]
            counts[gpu_type] = counts.get(gpu_type, 0) + _int(value)
    return counts


def _int(text: str) -> int:
    match = re.match(r"\d+", text or "")
    return int(match.group(0)) if match else 0


def node_state(state: str) -> tuple[str, bool]:
    """Slurm's ``State=IDLE+DRAIN`` -> ("drained", responding). Names follow sinfo's long form."""
    parts = [part.upper() for part in (state or "UNKNOWN").split("+") if part]
    base = parts[0].rstrip("*~#!%$@^-") if parts else "UNKNOWN"
    flags = set(parts[1:])
    responding = "NOT_RESPONDING" not in flags and not (parts and parts[0].endswith("*"))
    if "DRAIN" in flags:
        derived = "drained" if base in ("IDLE", "DOWN") else "draining"
    elif "FAIL" in flags:
        derived = "fail" if base in ("IDLE", "DOWN") else "failing"
    elif "MAINTENANCE" in flags or "MAINT" in flags:
        derived = "maint"
    elif "REBOOT_REQUESTED" in flags or "REBOOT_ISSUED" in flags:
        derived = "reboot"
    elif "COMPLETING" in flags and base in ("IDLE", "MIXED", "ALLOCATED"):
        derived = "completing"
    elif "PLANNED" in flags and base == "IDLE":
        derived = "planned"
    else:
        derived = base.lower()
    return derived, responding


def node_samples(text: str) -> list[Sample]:
    samples: list[Sample] = []
    for record in parse_oneliners(text):
        name = record.get("NodeName")
        if not name:
            continue
        state, responding = node_state(record.get("State", ""))
        samples.append(("slurm_node_state", {"node": name, "state": state}, 1.0))
        samples.append(("slurm_node_responding", {"node": name}, 1.0 if responding else 0.0))
        samples.append(("slurm_node_gpus_total", {"node": name}, float(tres_gpus(record.get("CfgTRES", "")))))
        samples.append(("slurm_node_gpus_allocated", {"node": name}, float(tres_gpus(record.get("AllocTRES", "")))))
        # A tracked type is in CfgTRES; AllocTRES leaves out the types no job holds.
        allocated = tres_gpus_by_type(record.get("AllocTRES", ""))
        for gpu_type, total in tres_gpus_by_type(record.get("CfgTRES", "")).items():
            labels = {"node": name, "type": gpu_type}
            samples.append(("slurm_node_gres_gpu_total", labels, float(total)))
            samples.append(("slurm_node_gres_gpu_allocated", dict(labels), float(allocated.get(gpu_type, 0))))
    return samples


def _user(text: str) -> str:
    """``UserId=alice(1000)`` -> alice."""
    return (text or "").split("(", 1)[0]


def job_samples(text: str) -> list[Sample]:
    queue: dict[tuple[str, str], int] = {}
    samples: list[Sample] = []
    for record in parse_oneliners(text):
        if "JobId" not in record:
            continue
        state = record.get("JobState", "UNKNOWN").lower()
        partition = record.get("Partition", "")
        queue[(partition, state)] = queue.get((partition, state), 0) + 1
        if state == "running":
            # Slurm 22.05's scontrol names a job's allocation TRES=; later releases AllocTRES=.
            gpus = tres_gpus(record.get("AllocTRES") or record.get("TRES", ""))
            labels = {"job_id": record["JobId"], "user": _user(record.get("UserId", "")),
                      "account": record.get("Account", ""), "partition": partition,
                      "nodes": record.get("NodeList", "")}
            samples.append(("slurm_job_gpus", labels, float(gpus)))
    for (partition, state), count in sorted(queue.items()):
        samples.append(("slurm_queue_jobs", {"partition": partition, "state": state}, float(count)))
    return samples


def sdiag_samples(text: str) -> list[Sample]:
    samples: list[Sample] = []
    section = "top"
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Main schedule statistics"):
            section = "main"
            continue
        if line.startswith("Backfilling stats"):
            section = "backfill"
            continue
        if line.startswith(("Latency for", "Remote Procedure Call", "Pending RPC")):
            section = "other"
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        table = {"top": SDIAG_TOP, "main": SDIAG_MAIN, "backfill": SDIAG_BACKFILL}.get(section)
        if not table or key.strip() not in table:
            continue
        match = re.match(r"\s*(-?\d+(?:\.\d+)?)", value)
        if match:
            metric, scale = table[key.strip()]
            samples.append((metric, {}, float(match.group(1)) * scale))
    return samples


def ping_samples(text: str) -> list[Sample]:
    """``Slurmctld(primary) at ctl01 is UP`` lines -> slurm_slurmctld_up{host}."""
    samples: list[Sample] = []
    for match in re.finditer(r"Slurmctld\((\w+)\) at (\S+) is (\w+)", text):
        samples.append(("slurm_slurmctld_up", {"host": match.group(2), "role": match.group(1)},
                        1.0 if match.group(3).upper() == "UP" else 0.0))
    return samples


# --------------------------------------------------------------------------
# commands: timeout, cache, background refresh


@dataclass
class CommandResult:
    ok: bool
    stdout: str = ""
    error: str = ""
    taken_at: float = 0.0  # time.monotonic() when the run ended
    duration: float = 0.0


def run_command(argv: list[str], timeout: float) -> CommandResult:
    """Run ARGV in its own process group; on timeout the whole group is killed."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env={**os.environ, "LC_ALL": "C"})
    except OSError as error:
        return CommandResult(False, error=str(error), taken_at=time.monotonic(), duration=0.0)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        end = time.monotonic()
        return CommandResult(False, error=f"timed out after {timeout:g} s", taken_at=end, duration=end - start)
    end = time.monotonic()
    if proc.returncode != 0:
        return CommandResult(False, stdout=stdout, error=(stderr.strip() or f"exit {proc.returncode}")[:500],
                             taken_at=end, duration=end - start)
    return CommandResult(True, stdout=stdout, taken_at=end, duration=end - start)


@dataclass
class Source:
    """One Slurm command, its parser, and its cached result."""

    name: str
    argv: list[str]
    parse: Callable[[CommandResult], list[Sample]]
    # On failure: True keeps the last good samples (with success=0 showing they are stale).
    keep_stale: bool = True
    last: CommandResult | None = None
    samples: list[Sample] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, timeout: float) -> None:
        result = run_command(self.argv, timeout)
        try:
            samples = self.parse(result)
        except Exception as error:  # a parser bug must not kill the refresh thread
            result = CommandResult(False, result.stdout, f"parse error: {error}", result.taken_at, result.duration)
            samples = self.samples if self.keep_stale else []
        with self.lock:
            self.last = result
            if result.ok or not self.keep_stale:
                self.samples = samples

    def snapshot(self) -> tuple[CommandResult | None, list[Sample]]:
        with self.lock:
            return self.last, list(self.samples)


def _on_success(parser: Callable[[str], list[Sample]]) -> Callable[[CommandResult], list[Sample]]:
    return lambda result: parser(result.stdout) if result.ok else []


def _ping(result: CommandResult) -> list[Sample]:
    samples = ping_samples(result.stdout)
    return samples or [("slurm_slurmctld_up", {"host": "", "role": "primary"}, 0.0)]


def _dbd(result: CommandResult) -> list[Sample]:
    return [("slurm_slurmdbd_up", {}, 1.0 if result.ok else 0.0)]


def default_sources(bin_dir: str = "") -> list[Source]:
    def tool(name: str) -> str:
        return os.path.join(bin_dir, name) if bin_dir else name

    return [
        Source("nodes", [tool("scontrol"), "--oneliner", "show", "node"], _on_success(node_samples)),
        Source("jobs", [tool("scontrol"), "--all", "--oneliner", "show", "job"], _on_success(job_samples)),
        Source("sdiag", [tool("sdiag")], _on_success(sdiag_samples)),
        Source("ping", [tool("scontrol"), "ping"], _ping, keep_stale=False),
        Source("slurmdbd", [tool("sacctmgr"), "--noheader", "--parsable2", "show", "cluster", "format=Cluster"],
               _dbd, keep_stale=False),
    ]


class Exporter:
    """Refreshes every source in its own thread; ``samples()`` only reads the caches."""

    def __init__(self, sources: list[Source], *, interval: float, timeout: float):
        self.sources = sources
        self.interval = interval
        self.timeout = timeout
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for source in self.sources:
            thread = threading.Thread(target=self._loop, args=(source,), name=f"refresh-{source.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    def _loop(self, source: Source) -> None:
        while not self._stop.is_set():
            source.refresh(self.timeout)
            self._stop.wait(self.interval)

    def samples(self) -> list[Sample]:
        now = time.monotonic()
        out: list[Sample] = []
        for source in self.sources:
            last, samples = source.snapshot()
            out.extend(samples)
            ok = last is not None and last.ok
            out.append(("slurm_exporter_command_success", {"command": source.name}, 1.0 if ok else 0.0))
            if last is not None:
                out.append(("slurm_exporter_command_age_seconds", {"command": source.name}, now - last.taken_at))
                out.append(("slurm_exporter_command_duration_seconds", {"command": source.name}, last.duration))
        return out


def group_samples(samples: Iterable[Sample]) -> dict[str, list[tuple[dict[str, str], float]]]:
    grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in samples:
        grouped.setdefault(name, []).append((labels, value))
    return grouped


class PrometheusCollector:
    """prometheus_client custom collector over an Exporter's cached samples."""

    def __init__(self, exporter: Exporter):
        self.exporter = exporter

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        for name, rows in group_samples(self.exporter.samples()).items():
            label_names = sorted({key for labels, _value in rows for key in labels})
            family = GaugeMetricFamily(name, HELP.get(name, name), labels=label_names)
            for labels, value in rows:
                family.add_metric([labels.get(key, "") for key in label_names], value)
            yield family


def read_web_users(path: str) -> dict[str, str]:
    """basic_auth_users of a web configuration file: {user: bcrypt hash}."""
    with open(path, encoding="utf-8") as handle:
        users = json.load(handle).get("basic_auth_users") or {}
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise ValueError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    return users


def basic_auth(app: Callable, web_config: str, check: Callable[[bytes, bytes], bool]) -> Callable:
    """The WSGI APP behind HTTP basic auth against the users of WEB_CONFIG, read at each request (a
    changed password needs no restart); CHECK(password, hash) is bcrypt's checkpw. A header that
    passed against a hash is remembered with it: bcrypt costs a tenth of a second a check."""
    passed: dict[str, str] = {}

    def guarded(environ, start_response):
        header = environ.get("HTTP_AUTHORIZATION", "")
        user, password = "", ""
        if header.startswith("Basic "):
            try:
                user, _sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user = ""
        hashed = read_web_users(web_config).get(user, "")
        if not hashed or (passed.get(header) != hashed and not check(password.encode(), hashed.encode())):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="deepops"'),
                                                ("Content-Type", "text/plain; charset=utf-8")])
            return [b"Unauthorized\n"]
        passed[header] = hashed
        return app(environ, start_response)

    return guarded


def serve(app: Callable, host: str, port: int) -> None:
    """APP on HOST:PORT in a daemon thread, a thread per request, without request logs."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *_args) -> None:
            pass

    httpd = make_server(host or "0.0.0.0", port, app, Server, handler_class=Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--listen-address", default="0.0.0.0:9341", help="HOST:PORT to serve /metrics on")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between refreshes of each command")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds any one Slurm command may take")
    parser.add_argument("--slurm-bin-dir", default="", help="directory of scontrol/sdiag/sacctmgr (default: PATH)")
    parser.add_argument("--web-config-file", default="", help="web configuration with basic_auth_users (JSON)")
    args = parser.parse_args(argv)

    from prometheus_client import REGISTRY, make_wsgi_app

    host, _sep, port = args.listen_address.rpartition(":")
    app = make_wsgi_app(REGISTRY)
    if args.web_config_file:
        import bcrypt

        read_web_users(args.web_config_file)  # fail at start on a broken file
        app = basic_auth(app, args.web_config_file, bcrypt.checkpw)
    exporter = Exporter(default_sources(args.slurm_bin_dir), interval=args.interval, timeout=args.timeout)
    REGISTRY.register(PrometheusCollector(exporter))
    exporter.start()
    serve(app, host, int(port))
    print(f"deepops-slurm-exporter listening on {args.listen_address}", file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    exporter.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
