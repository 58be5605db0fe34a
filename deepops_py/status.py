"""`deepops status`: the whole cluster on one screen, read-only and fast.

No playbook runs (ansible-runner's start alone takes longer than the whole
command may). One SSH session to the first controller, opened the way
``deepops check`` opens it (``preflight.default_connect``: the inventory's
address, port, user, key and ssh arguments, known hosts honoured), runs
``COLLECTOR``, a small Python program, once: it runs the read-only Slurm
commands of ``SLURM_COMMANDS`` (at the same time) and queries Alertmanager's v2 API, and prints
their raw outputs as one JSON document. When the monitoring host (the
``monitoring`` group, defaulting to the first controller:
``module_utils/cluster_groups.py``) is another host, a second session to it,
in parallel, queries Alertmanager only. Everything is parsed here, on this
machine, by the functions below (unit-tested on recorded outputs of Slurm
22.05 and 24.11).

Alertmanager is found from what the deploy wrote on the monitoring host: the
listen address and port in the arguments file of the alertmanager role
(``_alertmanager_defaults_file``), HTTPS with the monitoring account when
those arguments name a web configuration file (roles/monitoring_auth). The
account's password is the one beside the inventory
(``secrets/monitoring_password``, or ``monitoring_auth_password`` when the
inventory sets it in plain text), sent on the session's standard input,
never on a command line; without it, the collector reads the copy the deploy
put on the host, which needs root there.

Nothing here fails on what it cannot read: each source that could not be
read becomes an entry in ``errors`` and the rest is still shown (exit 1).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_groups, mig_profiles
from deepops_py import paths

# Exit codes of `deepops status` (besides 2, invalid input).
EXIT_COMPLETE = 0  # every source was read
EXIT_PARTIAL = 1  # something could not be read: see "errors"

SCHEMA_VERSION = 1

# The read-only commands, each with an explicit output format that Slurm
# 22.05 and 24.11 print alike. sinfo gives the node states and reasons in its
# own words (what admins read every day); scontrol -d gives GRES and GresUsed.
SINFO_FIELDS = ("%N", "%T", "%u", "%H", "%E")  # the reason last: it is free text
SQUEUE_FIELDS = ("%i", "%P", "%T", "%u", "%D", "%r")
SLURM_COMMANDS: dict[str, list[str]] = {
    "version": ["sinfo", "--version"],
    "sinfo": ["sinfo", "--noheader", "--all", "--Node", "--format", "|".join(SINFO_FIELDS)],
    "nodes": ["scontrol", "--oneliner", "--details", "show", "node"],
    "partitions": ["scontrol", "--oneliner", "show", "partition"],
    "squeue": ["squeue", "--noheader", "--all", "--format", "|".join(SQUEUE_FIELDS)],
}
# The REST API (the slurm role's slurm_restd_*): whether slurmrestd runs on the
# controller, and how a user gets a token for it.
RESTD_COMMAND = ["systemctl", "is-active", "slurmrestd.service"]
TOKEN_COMMAND = "scontrol token lifespan=3600"
TOKEN_HEADERS = ("X-SLURM-USER-NAME", "X-SLURM-USER-TOKEN")

# Only the alerts that notify: active, neither silenced nor inhibited.
ALERTS_PATH = "/api/v2/alerts?active=true&silenced=false&inhibited=false"

# Runs on the controller (and the monitoring host) with the host's python3,
# which Ansible needs there anyway (3.8 or later: no newer syntax here). Reads
# one JSON request on stdin, prints one JSON document; changes nothing.
COLLECTOR = r'''
import base64, json, os, shlex, ssl, subprocess, sys, threading, urllib.error, urllib.request
request = json.loads(sys.stdin.read() or "{}")
timeout = float(request.get("timeout", 5))
out = {}
env = dict(os.environ, LC_ALL="C")
def run(name, argv):
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env)
        out[name] = {"rc": done.returncode, "stdout": done.stdout.decode("utf-8", "replace"),
                     "stderr": done.stderr.decode("utf-8", "replace")[-2000:]}
    except OSError as error:
        out[name] = {"rc": 127, "stdout": "", "stderr": "%s: %s" % (argv[0], error.strerror)}
    except subprocess.TimeoutExpired:
        out[name] = {"rc": 124, "stdout": "", "stderr": "%s: no answer within %ss" % (argv[0], timeout)}
threads = [threading.Thread(target=run, args=item) for item in sorted(request.get("commands", {}).items())]
for thread in threads:
    thread.start()
am = request.get("alertmanager")
if am:
    result = out["alertmanager"] = {}
    try:
        with open(am["args_file"]) as handle:
            text = handle.read()
    except OSError as error:
        result["error"] = "Alertmanager is not set up on this host (%s: %s)" % (am["args_file"], error.strerror)
    else:
        args = []
        for line in text.splitlines():
            if line.strip().startswith("ARGS="):
                args = shlex.split(shlex.split(line.strip()[5:])[0] if line.strip()[5:] else "")
        listen = [a.split("=", 1)[1] for a in args if a.startswith("--web.listen-address=")]
        tls = any(a.startswith("--web.config.file=") for a in args)
        where = listen[-1] if listen else ":9093"
        host, _, port = where.rpartition(":")
        host = host.strip("[]")
        if host in ("", "0.0.0.0", "::"):
            host = "localhost"
        if ":" in host:
            host = "[%s]" % host
        url = "%s://%s:%s%s" % ("https" if tls else "http", host, port, am["path"])
        result["url"] = url
        headers = {"Accept": "application/json"}
        context = None
        if tls:
            password = am.get("password") or ""
            if not password:
                try:
                    with open(am["password_file"]) as handle:
                        password = handle.read().strip()
                except OSError as error:
                    result["error"] = ("no password for the monitoring account: none beside the inventory, "
                                       "and %s: %s" % (am["password_file"], error.strerror))
            token = base64.b64encode(("%s:%s" % (am["user"], password)).encode()).decode()
            headers["Authorization"] = "Basic " + token
            try:
                context = ssl.create_default_context(cafile=am["ca_file"])
            except (OSError, ssl.SSLError) as error:
                result["error"] = "cannot use the CA %s: %s" % (am["ca_file"], error)
        if "error" not in result:
            try:
                reply = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout,
                                               context=context)
                result["status"] = reply.status
                result["body"] = reply.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as error:
                result["error"] = "%s answered HTTP %s %s" % (url, error.code, error.reason)
            except (urllib.error.URLError, OSError) as error:
                result["error"] = "%s: %s" % (url, getattr(error, "reason", error))
for thread in threads:
    thread.join()
sys.stdout.write(json.dumps(out))
'''


# --------------------------------------------------------------------------
# parsing Slurm's outputs


_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_:/.]*)=")


def parse_oneliner(line: str) -> dict[str, str]:
    """One line of ``scontrol --oneliner show ...`` as key -> value.

    Values can hold spaces (``OS=Linux 6.1.0 #1 SMP ...``, ``Reason=...``):
    a value runs up to the next `` Key=``. ``Reason`` is the last field of a
    node in every version here, so it is taken whole, whatever it holds.
    """
    line = line.strip()
    reason = None
    position = line.find(" Reason=")
    if position >= 0:
        line, reason = line[:position], line[position + len(" Reason="):]
    matches = list(_KEY.finditer(line))
    fields: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end():end].strip()
    if reason is not None:
        fields["Reason"] = reason.strip()
    return fields


def _split_outside_parentheses(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def parse_gpu_gres(text: str | None) -> dict[str, int]:
    """The GPUs of a ``Gres=`` or ``GresUsed=`` value, per type.

    ``gpu:h100:8(S:0-1),gpu:1g.10gb:2(IDX:0-1)`` -> ``{"h100": 8, "1g.10gb": 2}``;
    an untyped ``gpu:4`` (or Slurm's ``gpu:(null):4``) counts as type "" and is
    dropped when typed entries say the same; other GRES (``mps``, ``shard``)
    are left out; ``(null)`` and ``N/A`` mean none.
    """
    counts: dict[str, int] = {}
    for entry in _split_outside_parentheses(text or ""):
        entry = entry.replace("(null)", "").split("(", 1)[0]
        pieces = entry.split(":")
        if pieces[0] != "gpu" or len(pieces) < 2:
            continue
        gpu_type, count = ("", pieces[1]) if len(pieces) == 2 else (pieces[1], pieces[-1])
        match = re.fullmatch(r"(\d+)([KMG]?)", count)
        if not match:
            continue
        scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2)]
        counts[gpu_type] = counts.get(gpu_type, 0) + int(match.group(1)) * scale
    typed = {name: count for name, count in counts.items() if name}
    if typed:
        return typed
    return counts


def _tres(text: str | None) -> dict[str, str]:
    values = {}
    for item in (text or "").split(","):
        key, sep, value = item.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _int(text: Any, default: int = 0) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        return default


def slurm_version(text: str) -> str | None:
    """``slurm-wlm 22.05.8`` or ``slurm 24.11.5`` -> the version."""
    match = re.search(r"(\d+\.\d+\.\d+\S*)", text or "")
    return match.group(1) if match else None


@dataclass
class GpuCount:
    total: int = 0
    allocated: int = 0
    mig: bool = False  # this type is a MIG profile (a slice of a GPU), not a whole GPU

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Node:
    name: str
    state: str  # sinfo's word: idle, mixed, allocated, drained, draining, down*, ...
    reason: str | None = None
    reason_user: str | None = None
    reason_time: str | None = None
    partitions: list[str] = field(default_factory=list)
    cpus_total: int = 0
    cpus_allocated: int = 0
    gpus: dict[str, GpuCount] = field(default_factory=dict)  # per GRES type
    slurm_state: str | None = None  # scontrol's State= (IDLE+DRAIN, ...)

    @property
    def gpus_total(self) -> int:
        return sum(count.total for count in self.gpus.values())

    @property
    def gpus_allocated(self) -> int:
        return sum(count.allocated for count in self.gpus.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "slurm_state": self.slurm_state,
            "reason": self.reason,
            "reason_user": self.reason_user,
            "reason_time": self.reason_time,
            "partitions": self.partitions,
            "cpus": {"total": self.cpus_total, "allocated": self.cpus_allocated},
            "gpus": {
                "total": self.gpus_total,
                "allocated": self.gpus_allocated,
                "types": {name: count.as_dict() for name, count in sorted(self.gpus.items())},
            },
        }


def _no_value(text: str | None) -> str | None:
    text = (text or "").strip()
    return None if text in ("", "none", "(null)", "N/A", "Unknown") else text


def parse_sinfo_nodes(text: str) -> dict[str, dict[str, Any]]:
    """``sinfo --Node --format %N|%T|%u|%H|%E`` -> node -> state and reason (a node in two partitions is listed twice)."""
    nodes: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", len(SINFO_FIELDS) - 1)
        if len(parts) != len(SINFO_FIELDS):
            continue
        name, state, user, when, reason = (part.strip() for part in parts)
        reason = _no_value(reason)  # without a reason, sinfo still prints a user (slurm's) and "Unknown"
        nodes.setdefault(name, {"state": state, "reason": reason, "reason_user": _no_value(user) if reason else None,
                                "reason_time": _no_value(when) if reason else None})
    return nodes


def parse_nodes(sinfo_text: str, scontrol_text: str) -> list[Node]:
    """Nodes from sinfo (state, reason) and ``scontrol -d -o show node`` (CPUs, GRES, GresUsed), by name."""
    states = parse_sinfo_nodes(sinfo_text)
    nodes: dict[str, Node] = {}
    for line in scontrol_text.splitlines():
        if not line.startswith("NodeName="):
            continue
        fields = parse_oneliner(line)
        name = fields["NodeName"]
        known = states.get(name, {})
        node = Node(
            name=name,
            state=known.get("state") or fields.get("State", "unknown").lower(),
            reason=known.get("reason", _no_value(fields.get("Reason"))),
            reason_user=known.get("reason_user"),
            reason_time=known.get("reason_time"),
            partitions=[part for part in (fields.get("Partitions") or "").split(",") if part],
            cpus_total=_int(fields.get("CPUTot")),
            cpus_allocated=_int(fields.get("CPUAlloc")),
            slurm_state=fields.get("State"),
        )
        configured = parse_gpu_gres(fields.get("Gres"))
        used = parse_gpu_gres(fields.get("GresUsed"))
        if not used and configured:  # no GresUsed (not asked with --details): the allocated TRES say it
            allocated = _tres(fields.get("AllocTRES"))
            used = {gpu_type: _int(allocated.get(f"gres/gpu:{gpu_type}" if gpu_type else "gres/gpu"))
                    for gpu_type in configured}
        for gpu_type in sorted(set(configured) | set(used)):
            node.gpus[gpu_type] = GpuCount(
                total=configured.get(gpu_type, 0),
                allocated=used.get(gpu_type, 0),
                mig=bool(mig_profiles.PROFILE_NAME.fullmatch(gpu_type)),
            )
        nodes[name] = node
    for name, known in states.items():  # in sinfo but not in scontrol's answer (should not happen): still shown
        nodes.setdefault(name, Node(name=name, state=known["state"], reason=known["reason"],
                                    reason_user=known["reason_user"], reason_time=known["reason_time"]))
    return [nodes[name] for name in sorted(nodes)]


@dataclass
class Partition:
    name: str
    state: str
    default: bool
    nodes: str
    total_nodes: int
    running: int = 0
    pending: int = 0
    other: int = 0  # completing, suspended, configuring, ...

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "default": self.default, "nodes": self.nodes,
                "total_nodes": self.total_nodes, "jobs": {"running": self.running, "pending": self.pending,
                                                          "other": self.other}}


def parse_partitions(text: str) -> list[Partition]:
    partitions = []
    for line in text.splitlines():
        if not line.startswith("PartitionName="):
            continue
        fields = parse_oneliner(line)
        partitions.append(Partition(
            name=fields["PartitionName"],
            state=(fields.get("State") or "unknown").lower(),
            default=fields.get("Default") == "YES",
            nodes=_no_value(fields.get("Nodes")) or "",
            total_nodes=_int(fields.get("TotalNodes")),
        ))
    return partitions


@dataclass(frozen=True)
class Job:
    id: str
    partitions: tuple[str, ...]
    state: str
    user: str
    nodes: int
    reason: str | None


def parse_squeue(text: str) -> list[Job]:
    """``squeue --format %i|%P|%T|%u|%D|%r``; a pending job may name several partitions (``a,b``)."""
    jobs = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) != len(SQUEUE_FIELDS):
            continue
        job_id, partitions, state, user, node_count, reason = parts
        jobs.append(Job(job_id, tuple(filter(None, partitions.split(","))), state.upper(), user, _int(node_count),
                        _no_value(reason)))
    return jobs


def _job_class(state: str) -> str:
    return {"RUNNING": "running", "PENDING": "pending"}.get(state, "other")


def count_jobs(partitions: list[Partition], jobs: Iterable[Job]) -> None:
    """Add each job to its partitions' counts (a partition no longer configured gets a row of its own)."""
    by_name = {partition.name: partition for partition in partitions}
    for job in jobs:
        for name in job.partitions:
            partition = by_name.get(name)
            if partition is None:
                partition = by_name[name] = Partition(name=name, state="unknown", default=False, nodes="", total_nodes=0)
                partitions.append(partition)
            kind = _job_class(job.state)
            setattr(partition, kind, getattr(partition, kind) + 1)


# --------------------------------------------------------------------------
# Alertmanager


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str | None
    target: str | None  # node, else instance
    summary: str | None
    starts_at: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_alerts(body: str) -> list[Alert]:
    """Alertmanager v2 ``/api/v2/alerts``: a JSON list of alerts with labels and annotations."""
    data = json.loads(body)
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of alerts")
    alerts = []
    for item in data:
        if not isinstance(item, Mapping):
            continue
        labels = item.get("labels") if isinstance(item.get("labels"), Mapping) else {}
        annotations = item.get("annotations") if isinstance(item.get("annotations"), Mapping) else {}
        alerts.append(Alert(
            name=str(labels.get("alertname") or "?"),
            severity=labels.get("severity"),
            target=labels.get("node") or labels.get("instance"),
            summary=annotations.get("summary") or annotations.get("description"),
            starts_at=item.get("startsAt"),
        ))
    alerts.sort(key=lambda alert: (alert.severity != "critical", alert.name, alert.target or ""))
    return alerts


# --------------------------------------------------------------------------
# the status


def rest_api_url(listen: str, controller: str) -> str:
    """Where clients reach slurmrestd, from its first slurm_restd_listen entry:
    a socket as it is; an address on every interface as the controller's name."""
    if listen.startswith("unix:"):
        return listen
    host, _sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = controller
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def _rest_api_settings(variables: Mapping[str, Any]) -> tuple[bool, str]:
    """(enabled, first listen entry) from the controller's variables, else the role's defaults."""
    enabled = variables.get("slurm_restd_enabled")
    listen = variables.get("slurm_restd_listen")
    if not isinstance(enabled, bool):
        enabled = bool(paths.role_default("slurm", "slurm_restd_enabled"))
    if not (isinstance(listen, list) and listen and isinstance(listen[0], str) and "{{" not in listen[0]):
        listen = paths.role_default("slurm", "slurm_restd_listen")
    return enabled, listen[0]


@dataclass
class Problem:
    """A source that could not be read."""

    source: str  # "controller", "slurm", "alertmanager"
    host: str | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Status:
    inventory: str
    controller: str | None
    monitoring: str | None
    slurm_version: str | None = None
    nodes: list[Node] | None = None
    partitions: list[Partition] | None = None
    jobs: dict[str, int] | None = None  # running, pending, other: each job once, whatever its partitions
    alerts: list[Alert] | None = None
    alertmanager_url: str | None = None
    rest_api: dict[str, Any] | None = None  # url, active, token: when the inventory enables it
    runs: dict[str, dict | None] = field(default_factory=dict)
    errors: list[Problem] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.errors

    @property
    def exit_code(self) -> int:
        return EXIT_COMPLETE if self.complete else EXIT_PARTIAL

    def gpu_totals(self) -> dict[str, Any] | None:
        if self.nodes is None:
            return None
        types: dict[str, GpuCount] = {}
        for node in self.nodes:
            for name, count in node.gpus.items():
                total = types.setdefault(name, GpuCount(mig=count.mig))
                total.total += count.total
                total.allocated += count.allocated
        return {
            "total": sum(count.total for count in types.values()),
            "allocated": sum(count.allocated for count in types.values()),
            "types": {name: count.as_dict() for name, count in sorted(types.items())},
        }

    def as_dict(self) -> dict[str, Any]:
        partitions = None if self.partitions is None else [partition.as_dict() for partition in self.partitions]
        return {
            "schema_version": SCHEMA_VERSION,
            "inventory": self.inventory,
            "complete": self.complete,
            "controller": self.controller,
            "monitoring": self.monitoring,
            "slurm_version": self.slurm_version,
            "nodes": None if self.nodes is None else [node.as_dict() for node in self.nodes],
            "gpus": self.gpu_totals(),
            "partitions": partitions,
            "jobs": self.jobs,
            "alertmanager": self.alertmanager_url,
            "alerts": None if self.alerts is None else [alert.as_dict() for alert in self.alerts],
            "rest_api": self.rest_api,
            "runs": self.runs,
            "errors": [problem.as_dict() for problem in self.errors],
        }


def _command_problem(name: str, result: Mapping[str, Any], host: str) -> Problem | None:
    if not isinstance(result, Mapping):
        return Problem("slurm", host, f"{' '.join(SLURM_COMMANDS[name])}: no result")
    if result.get("rc") == 0:
        return None
    detail = (str(result.get("stderr") or "").strip().splitlines() or [f"exit status {result.get('rc')}"])[-1]
    return Problem("slurm", host, f"{' '.join(SLURM_COMMANDS[name][:2])}...: {detail}")


def apply_slurm(status: Status, raw: Mapping[str, Any], host: str) -> None:
    """Fill the Slurm part of STATUS from the collector's raw outputs; what fails becomes an error."""
    version = raw.get("version") or {}
    if isinstance(version, Mapping) and version.get("rc") == 0:
        status.slurm_version = slurm_version(str(version.get("stdout")))
    failed = {name: problem for name in SLURM_COMMANDS if (problem := _command_problem(name, raw.get(name), host))}
    if "sinfo" in failed or "nodes" in failed:
        status.errors.append(failed.get("nodes") or failed["sinfo"])
    else:
        try:
            status.nodes = parse_nodes(raw["sinfo"]["stdout"], raw["nodes"]["stdout"])
        except (KeyError, TypeError, ValueError) as error:
            status.errors.append(Problem("slurm", host, f"cannot read the node list: {error}"))
    if "partitions" in failed or "squeue" in failed:
        status.errors.append(failed.get("partitions") or failed["squeue"])
    else:
        try:
            partitions = parse_partitions(raw["partitions"]["stdout"])
            jobs = parse_squeue(raw["squeue"]["stdout"])
            count_jobs(partitions, jobs)
            status.partitions = partitions
            status.jobs = {"running": 0, "pending": 0, "other": 0}
            for job in jobs:
                status.jobs[_job_class(job.state)] += 1
        except (KeyError, TypeError, ValueError) as error:
            status.errors.append(Problem("slurm", host, f"cannot read partitions and jobs: {error}"))


def apply_alerts(status: Status, raw: Mapping[str, Any] | None, host: str) -> None:
    if not isinstance(raw, Mapping):
        status.errors.append(Problem("alertmanager", host, "no answer from the collector"))
        return
    status.alertmanager_url = raw.get("url")
    if raw.get("error"):
        status.errors.append(Problem("alertmanager", host, str(raw["error"])))
        return
    try:
        status.alerts = parse_alerts(str(raw.get("body") or ""))
    except ValueError as error:
        status.errors.append(Problem("alertmanager", host, f"{raw.get('url')}: not the alert list: {error}"))


# --------------------------------------------------------------------------
# reaching the hosts


def _role_vars(role: str) -> dict[str, str]:
    """A role's vars/main.yml with its plain ``{{ name }}`` references to its own values filled in."""
    import yaml

    from deepops_py import paths

    raw = yaml.safe_load((paths.content_dir() / "roles" / role / "vars" / "main.yml").read_text()) or {}
    values = {key: value for key, value in raw.items() if isinstance(value, str)}

    def resolve(value: str, depth: int = 0) -> str:
        return re.sub(
            r"\{\{\s*(\w+)\s*\}\}",
            lambda match: resolve(values[match.group(1)], depth + 1) if match.group(1) in values and depth < 5
            else match.group(0),
            value,
        )

    return {key: resolve(value) for key, value in values.items()}


def alertmanager_request(monitoring_vars: Mapping[str, Any], inventory: Path) -> dict[str, Any]:
    """What the collector needs to query Alertmanager on the monitoring host (the password, when known here)."""
    from ansible_collections.deepops.cluster.plugins.plugin_utils import local_secrets, monitoring_credentials

    alertmanager, auth = _role_vars("alertmanager"), _role_vars("monitoring_auth")
    password = monitoring_vars.get("monitoring_auth_password")
    password = password if isinstance(password, str) and "{{" not in password else ""
    if not password:
        secrets_dir = auth["_monitoring_auth_secrets_dir"].replace("{{ inventory_dir }}", str(inventory.parent))
        try:
            password = local_secrets.read_password(Path(secrets_dir) / monitoring_credentials.PASSWORD_FILE)
        except (OSError, ValueError):
            password = ""
    user = monitoring_vars.get("monitoring_auth_user")
    return {
        "path": ALERTS_PATH,
        "args_file": alertmanager["_alertmanager_defaults_file"],
        "ca_file": auth["_monitoring_auth_ca_file"],
        "password_file": auth["_monitoring_auth_password_file"],
        "user": user if isinstance(user, str) and user else paths.role_default("monitoring_auth", "monitoring_auth_user"),
        "password": password,
    }


def collect(session, request: Mapping[str, Any], interpreter: str = "python3") -> dict[str, Any]:
    """Run the collector once on SESSION's host; its JSON document, or ValueError saying why there is none."""
    result = session.run(f"{shlex.quote(interpreter)} -c {shlex.quote(COLLECTOR)}", stdin=json.dumps(dict(request)))
    if result.rc != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit status {result.rc}"])[-1]
        raise ValueError(f"the status collector failed on the host: {detail}")
    try:
        data = json.loads(result.stdout)
    except ValueError:
        raise ValueError("the status collector printed no JSON document") from None
    if not isinstance(data, dict):
        raise ValueError("the status collector printed no JSON document")
    return data


def last_runs() -> dict[str, dict | None]:
    """The newest deploy and validate runs recorded beside this state (``deepops runs``)."""
    from deepops_py import history

    found: dict[str, dict | None] = {"deploy": None, "validate": None}
    for record in history.list_runs():
        if record.command in found and found[record.command] is None:
            found[record.command] = record.as_dict()
    return found


def gather(cluster, *, timeout: float = 5.0, connect: Callable | None = None) -> Status:
    """The cluster's status; never raises for what it cannot reach or read."""
    from deepops_py import preflight

    connect = connect or preflight.default_connect
    groups = cluster_groups.with_defaults(cluster.groups)
    controller = (groups.get(cluster_groups.CONTROLLER) or [None])[0]
    backups = (groups.get(cluster_groups.CONTROLLER) or [])[1:]  # a backup controller answers while the first is away
    monitoring = (groups.get(cluster_groups.MONITORING) or [None])[0]
    status = Status(inventory=str(cluster.inventory), controller=controller, monitoring=monitoring)
    try:
        status.runs = last_runs()
    except Exception as error:  # a broken runs directory must not hide the cluster
        status.errors.append(Problem("runs", None, f"cannot read the recorded runs: {error}"))

    am_request = alertmanager_request(cluster.hosts[monitoring].vars, Path(cluster.inventory)) if monitoring else None
    jobs: dict[str, dict[str, Any]] = {}
    rest_enabled, rest_listen = _rest_api_settings(cluster.hosts[controller].vars) if controller else (False, "")
    commands = {**SLURM_COMMANDS, "restd": RESTD_COMMAND} if rest_enabled else SLURM_COMMANDS
    if controller:
        jobs[controller] = {"commands": commands, "timeout": timeout}
    if monitoring and am_request is not None:
        jobs.setdefault(monitoring, {"timeout": timeout})["alertmanager"] = am_request

    def run(host_name: str) -> tuple[str, dict[str, Any] | None, str | None]:
        host = cluster.hosts[host_name]
        try:
            session = connect(host, timeout)
        except Exception as error:
            return host_name, None, str(error) or type(error).__name__
        try:
            return host_name, collect(session, jobs[host_name], preflight._python_interpreter(host)), None
        except Exception as error:
            return host_name, None, f"{type(error).__name__}: {error}" if not isinstance(error, ValueError) else str(error)
        finally:
            try:
                session.close()
            except Exception:
                pass

    with ThreadPoolExecutor(max_workers=max(len(jobs), 1), thread_name_prefix="status") as pool:
        answers = {name: (data, error) for name, data, error in pool.map(run, list(jobs))}

    if controller is None:
        status.errors.append(Problem("controller", None, "the inventory has no slurm_controller host"))
    else:
        data, error = answers[controller]
        if data is None:
            what = "Slurm and Alertmanager" if monitoring == controller else "Slurm"
            status.errors.append(Problem("controller", controller, f"{what} not read: {error}"))
            for backup in backups:
                jobs[backup] = {"commands": commands, "timeout": timeout}
                _name, data, _error = run(backup)
                if data is not None:
                    status.controller = backup
                    break
        if data is not None:
            apply_slurm(status, data, status.controller)
            if rest_enabled:
                # slurmrestd runs on the first controller: read from a backup, it is not reachable.
                restd = data.get("restd") if isinstance(data.get("restd"), Mapping) else {}
                status.rest_api = {"url": rest_api_url(rest_listen, controller), "token": TOKEN_COMMAND,
                                   "active": status.controller == controller
                                   and str(restd.get("stdout", "")).strip() == "active"}
    if monitoring is not None:
        data, error = answers[monitoring]
        if data is None:
            if monitoring != controller:
                status.errors.append(Problem("monitoring", monitoring, f"Alertmanager not read: {error}"))
        else:
            apply_alerts(status, data.get("alertmanager"), monitoring)
    return status


# --------------------------------------------------------------------------
# the screen


_BAD_STATES = ("down", "fail", "failing", "inval", "unknown")
_DRAIN_STATES = ("drained", "draining", "drng", "drain", "maint", "reserved", "planned")


def _state_colour(state: str) -> str:
    """Red: down or not responding (sinfo's trailing ``*``); yellow: drained or set aside; green: idle; cyan: busy."""
    base = state.rstrip("*~#!%$@^-+")
    if state.endswith("*") or base in _BAD_STATES:
        return "red"
    if base in _DRAIN_STATES:
        return "yellow"
    return "green" if base == "idle" else "cyan"


def _gpu_text(node: Node) -> str:
    if not node.gpus:
        return "-"
    parts = [f"{count.allocated}/{count.total} {name or 'gpu'}{' (MIG)' if count.mig else ''}"
             for name, count in sorted(node.gpus.items())]
    return ", ".join(parts)


def print_status(status: Status, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(width=max(Console().width, 100))
    version = f", Slurm {status.slurm_version}" if status.slurm_version else ""
    console.print(f"[bold]Cluster[/bold] controller {status.controller or '-'}{version}, "
                  f"monitoring {status.monitoring or '-'}", highlight=False)
    if status.nodes is not None:
        totals = status.gpu_totals() or {}
        table = Table(title=f"Nodes ({len(status.nodes)}); GPUs allocated/total: "
                            f"{totals.get('allocated', 0)}/{totals.get('total', 0)}", title_justify="left")
        for column in ("node", "state", "partitions", "CPUs", "GPUs alloc/total", "reason"):
            table.add_column(column, no_wrap=column != "reason")
        for node in status.nodes:
            colour = _state_colour(node.state)
            reason = ""
            if node.reason:
                who = " ".join(filter(None, (node.reason_user, node.reason_time)))
                reason = escape(node.reason + (f" [{who}]" if who else ""))
            table.add_row(node.name, f"[{colour}]{escape(node.state)}[/{colour}]", ",".join(node.partitions) or "-",
                          f"{node.cpus_allocated}/{node.cpus_total}", escape(_gpu_text(node)), reason)
        console.print(table)
    if status.partitions is not None:
        table = Table(title="Jobs by partition", title_justify="left")
        for column in ("partition", "state", "nodes", "running", "pending", "other"):
            table.add_column(column, no_wrap=True, justify="right" if column in ("running", "pending", "other") else "left")
        for partition in status.partitions:
            name = partition.name + ("*" if partition.default else "")
            table.add_row(name, partition.state, partition.nodes or "-", str(partition.running), str(partition.pending),
                          str(partition.other))
        console.print(table)
    if status.alerts is not None:
        if not status.alerts:
            console.print("[green]Alerts: none firing[/green]")
        else:
            table = Table(title=f"Alerts firing ({len(status.alerts)})", title_justify="left")
            for column in ("alert", "severity", "node", "since", "summary"):
                table.add_column(column, no_wrap=column != "summary")
            for alert in status.alerts:
                colour = "red" if alert.severity == "critical" else "yellow"
                table.add_row(f"[{colour}]{escape(alert.name)}[/{colour}]", alert.severity or "-", alert.target or "-",
                              (alert.starts_at or "-")[:19], escape(alert.summary or ""))
            console.print(table)
    if status.rest_api is not None:
        state = "[green]slurmrestd active[/green]" if status.rest_api["active"] else "[red]slurmrestd not running[/red]"
        console.print(f"REST API: {status.rest_api['url']} ({state}); a token: {status.rest_api['token']}, "
                      f"sent as headers {' and '.join(TOKEN_HEADERS)}", highlight=False)
    for command in ("deploy", "validate"):
        record = status.runs.get(command)
        if record is None:
            console.print(f"Last {command}: none recorded", highlight=False)
        else:
            duration = f", {record['duration']:.0f}s" if isinstance(record.get("duration"), (int, float)) else ""
            colour = {"ok": "green", "failed": "red"}.get(record["result"], "yellow")
            console.print(f"Last {command}: [{colour}]{record['result']}[/{colour}] {record['id']} "
                          f"({record['start'][:19]}{duration})", highlight=False)
    for problem in status.errors:
        where = f" ({problem.host})" if problem.host else ""
        console.print(f"[red]Not read: {problem.source}{where}: {escape(problem.message)}[/red]", highlight=False)
