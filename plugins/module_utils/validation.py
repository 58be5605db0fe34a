"""Acceptance checks of a deployed Slurm cluster (``deepops validate``).

The one list of checks (``CHECKS``) and every verdict. The role
``roles/validate`` runs the commands (sinfo, srun, sbatch, sacct, scontrol,
sacctmgr) and hands their registered results to the filters in
``plugins/filter/validate.py``, which call the functions here; deepops_py
reads ``CHECKS`` for ``--skip`` and the reports. So all parsing of Slurm's
output, and every pass/fail decision, is plain Python with unit tests.

Standard library only, and no Ansible import: the CLI imports this module
while building ``deepops --help``.

A result is a dict recorded with ``set_stats`` under ``validate_<check>``::

    {"check": "gpus", "node": "gpu01", "status": "pass", "passed": True,
     "detail": "srun --gpus=8: CUDA_VISIBLE_DEVICES=0,...,7", "seconds": 0.81}

``status`` is ``pass``, ``fail`` or ``not_applicable`` (the detail says why the
check cannot apply, e.g. a node without GPUs); ``passed`` is ``status == "pass"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "DATA_PREFIX",
    "ERROR_CHECK",
    "ERROR_KEY",
    "FAIL",
    "NOT_APPLICABLE",
    "OPT_IN_CHECKS",
    "PASS",
    "SKIPPABLE_CHECKS",
    "STATUSES",
    "Check",
    "ValidationInputError",
    "ansible_delta_seconds",
    "error_result",
    "gpus_results",
    "gres_gpu_by_type",
    "gres_gpu_count",
    "hostname_result",
    "mig_results",
    "mpi_result",
    "nodes_results",
    "parse_job_fields",
    "parse_key_values",
    "parse_qos",
    "parse_sbatch_job_id",
    "parse_scontrol_config",
    "parse_sinfo_nodes",
    "preemption_result",
    "preemption_settings",
    "result",
    "sacct_result",
    "selected_checks",
    "slurm_duration_seconds",
    "survey",
]

PASS = "pass"
FAIL = "fail"
NOT_APPLICABLE = "not_applicable"
STATUSES = (PASS, FAIL, NOT_APPLICABLE)


@dataclass(frozen=True)
class Check:
    """One acceptance check: ``roles/validate/tasks/check_<name>.yml`` runs it."""

    name: str
    description: str  # what passing means, one line (deepops validate --help)
    skippable: bool = True
    opt_in: bool = False  # runs only when asked for (burnin: deepops validate --burn-in)


# The checks, in the order they run and are reported. Adding one means a
# task file roles/validate/tasks/check_<name>.yml, a result function here, and
# a row in README's table (tests/unit/test_validate_checks.py holds all three
# to this list).
CHECKS: tuple[Check, ...] = (
    Check("nodes", "every compute node is in Slurm, idle, mixed or planned, GRES = its GPUs", skippable=False),
    Check("hostname", "srun -N<all computes> reaches every compute node"),
    Check("mpi", "an MPI job, one rank per compute node (srun --mpi=pmix), sums the ranks right with allreduce"),
    Check("gpus", "on each node, srun --gpus=<n> sees exactly n CUDA_VISIBLE_DEVICES"),
    Check("mig", "on each node with MIG devices, a job per MIG profile (--gres=gpu:<profile>:1) gets exactly one device"),
    Check("dcgm", "on each GPU node, dcgmi diag -r <validate_dcgm_level> fails no test on any GPU"),
    Check(
        "nccl",
        "all_reduce_perf (correctness check on) reaches its GPU model's and interconnect's bus bandwidth on each "
        "node, and runs correctly across all nodes; pair tests name a node at fault",
    ),
    Check(
        "burnin",
        "opt-in (--burn-in MINUTES): DCGM's stress tests hold each GPU to its model's peaks, without throttling",
        opt_in=True,
    ),
    Check("sacct", "a GPU job shows in sacct, COMPLETED, with its gres/gpu TRES"),
    Check(
        "preemption",
        "a high-QOS job on GPUs full of low-QOS jobs starts within validate_preemption_bound seconds; "
        "the low job is requeued",
    ),
)
CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)
SKIPPABLE_CHECKS: tuple[str, ...] = tuple(check.name for check in CHECKS if check.skippable)
OPT_IN_CHECKS: tuple[str, ...] = tuple(check.name for check in CHECKS if check.opt_in)

# set_stats key of a check's results is DATA_PREFIX + check name; a step that
# could not run at all is recorded under ERROR_KEY as the check ERROR_CHECK.
DATA_PREFIX = "validate_"
ERROR_KEY = DATA_PREFIX + "error"
ERROR_CHECK = "validate"

# Node states (sinfo %T) in which a test job starts at once. "planned" is an
# idle node the backfill scheduler set aside for a pending job; the flag stays
# until its next cycle (bf_interval) even after that job left the queue, so a
# validation right after another (whose preemption check left a job pending
# there a moment) finds it so.
USABLE_STATES = ("idle", "mixed", "planned")
# What ``systemctl is-active munge`` says when munged serves no credentials.
MUNGE_STOPPED_STATES = ("inactive", "failed", "activating", "deactivating")
# Job states in which a high-QOS job counts as started; "" (left the queue) is FINISHED.
STARTED_STATES = ("RUNNING", "COMPLETING", "FINISHED")
DETAIL_LIMIT = 300
TIMEOUT_RC = 124  # timeout(1) killed the command

_GRES_GPU = re.compile(r"gpu:(?:([^:,()]+):)?([0-9]+)")
_SLURM_DURATION = re.compile(r"^(?:([0-9]+)-)?(?:([0-9]+):)?([0-9]+):([0-9]+)$")
_JOB_ID = re.compile(r"^[0-9]+(?:_[0-9]+)?$")


class ValidationInputError(ValueError):
    """Input the checks cannot work with (an unknown check name, a malformed argument)."""


# --------------------------------------------------------------------------
# the check list


def selected_checks(skip: Iterable[str] | None = None, opt_in: Iterable[str] | None = None) -> list[str]:
    """The checks to run, in order, leaving out ``skip`` and the opt-in checks not in ``opt_in``.

    Unknown or unskippable names raise.
    """
    skip = list(skip or []) + [name for name in OPT_IN_CHECKS if name not in (opt_in or [])]
    unknown = sorted(set(skip) - set(CHECK_NAMES))
    if unknown:
        raise ValidationInputError(f"not a check: {', '.join(unknown)}; choose from {', '.join(SKIPPABLE_CHECKS)}")
    fixed = sorted(set(skip) - set(SKIPPABLE_CHECKS))
    if fixed:
        raise ValidationInputError(f"cannot be skipped: {', '.join(fixed)}; choose from {', '.join(SKIPPABLE_CHECKS)}")
    return [name for name in CHECK_NAMES if name not in skip]


def result(check: str, node: str, status: str, detail: str, seconds: float = 0.0) -> dict[str, Any]:
    """One recorded result."""
    if status not in STATUSES:
        raise ValidationInputError(f"status {status!r}: expected one of {', '.join(STATUSES)}")
    return {
        "check": check,
        "node": node,
        "status": status,
        "passed": status == PASS,
        "detail": " ".join(str(detail).split()),
        "seconds": round(float(seconds), 2),
    }


def _verdict(passed: bool) -> str:
    return PASS if passed else FAIL


# --------------------------------------------------------------------------
# parsing command output


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _truncate(text: Any, limit: int = DETAIL_LIMIT) -> str:
    text = " ".join(_text(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def ansible_delta_seconds(delta: Any) -> float:
    """``0:00:01.234567`` (a command result's ``delta``) -> 1.23; anything else -> 0.0."""
    parts = _text(delta).strip().split(":")
    if len(parts) != 3:
        return 0.0
    try:
        return round(int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2]), 2)
    except ValueError:
        return 0.0


def slurm_duration_seconds(text: Any) -> int:
    """A Slurm duration (``[D-]HH:MM:SS`` or ``MM:SS``) in seconds; ``-1``, ``N/A``, ``""`` and junk are 0."""
    match = _SLURM_DURATION.match(_text(text).strip())
    if not match:
        return 0
    days, hours, minutes, seconds = (int(group) if group else 0 for group in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def gres_gpu_count(gres: Any) -> int:
    """GPUs in a GRES string: ``gpu:h100:8(S:0-1),gpu:a100:2`` -> 10; ``(null)`` -> 0.

    A MIG device is one GRES: ``gpu:h100:4,gpu:1g.10gb:7`` -> 11.
    """
    return sum(int(count) for _type, count in _GRES_GPU.findall(_text(gres)))


def gres_gpu_by_type(gres: Any) -> dict[str, int]:
    """GPU GRES per type: ``gpu:h100:4(S:0-1),gpu:1g.10gb:7(S:0)`` -> {h100: 4, 1g.10gb: 7}; untyped under ``""``."""
    counts: dict[str, int] = {}
    for gpu_type, count in _GRES_GPU.findall(_text(gres)):
        counts[gpu_type] = counts.get(gpu_type, 0) + int(count)
    return {gpu_type: count for gpu_type, count in counts.items() if count}


def _type_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{gpu_type or 'untyped'}:{count}" for gpu_type, count in sorted(counts.items())) or "none"


def parse_sinfo_nodes(stdout: Any) -> dict[str, dict[str, Any]]:
    """``sinfo --noheader --Node --format='%N %T %G'`` -> {node: {state, gres, gpus}}.

    A node in several partitions is listed once per partition; the lines agree.
    """
    nodes: dict[str, dict[str, Any]] = {}
    for line in _text(stdout).splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        gres = fields[2] if len(fields) > 2 else "(null)"
        nodes[fields[0]] = {"state": fields[1], "gres": gres, "gpus": gres_gpu_count(gres)}
    return nodes


def _split_lines(stdout: Any, separator: str) -> dict[str, str]:
    """``key<separator>value`` lines -> dict, split at the first separator; other lines are left out."""
    values: dict[str, str] = {}
    for line in _text(stdout).splitlines():
        key, sep, value = line.partition(separator)
        if sep and key.strip():
            values[key.strip()] = value.strip()
    return values


def parse_key_values(stdout: Any) -> dict[str, str]:
    """``key=value`` lines (what the role's scripts print) -> dict; the value may contain ``=``."""
    return _split_lines(stdout, "=")


def parse_scontrol_config(stdout: Any) -> dict[str, str]:
    """``scontrol show config``: ``PreemptType             = preempt/qos`` lines -> dict."""
    return _split_lines(stdout, " = ")


def parse_job_fields(text: Any) -> dict[str, str]:
    """``scontrol --oneliner show job``: ``JobId=201 JobState=PENDING Restarts=1 ...`` -> dict.

    Only space-free values are reliable (Command= or WorkDir= with spaces come out cut), which
    covers every field the checks read.
    """
    fields: dict[str, str] = {}
    for token in _text(text).split():
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def parse_sbatch_job_id(output: Any) -> str:
    """``sbatch --parsable`` output (``101`` or ``101;cluster``) -> ``101``; ``""`` when it is not a job id."""
    lines = _text(output).strip().splitlines()
    job = lines[-1].split(";", 1)[0].strip() if lines else ""
    return job if _JOB_ID.match(job) else ""


def parse_qos(stdout: Any) -> dict[str, dict[str, str]]:
    """``sacctmgr --noheader --parsable2 show qos format=Name,GraceTime,Preempt`` -> {name: {grace_time, preempt}}."""
    qos: dict[str, dict[str, str]] = {}
    for line in _text(stdout).splitlines():
        fields = line.strip().split("|")
        if not fields[0]:
            continue
        fields += [""] * (3 - len(fields))
        qos[fields[0]] = {"grace_time": fields[1], "preempt": fields[2]}
    return qos


# --------------------------------------------------------------------------
# the cluster as Slurm and the nodes see it


def _gres_expected(node_facts: Any) -> dict[str, int] | None:
    """The GPU GRES per type the node's ``deepops_gpus`` fact implies; None without it (not reached).

    ``gres_by_type`` counts a GPU in MIG mode as its MIG devices, by profile.
    Facts without it give their GPU count untyped (under ``""``).
    """
    facts = node_facts.get("deepops_gpus") if isinstance(node_facts, Mapping) else None
    if not isinstance(facts, Mapping):
        return None
    if not facts.get("present"):
        return {}
    typed = facts.get("gres_by_type")
    try:
        if isinstance(typed, Mapping):
            return {str(gpu_type): int(count) for gpu_type, count in typed.items() if int(count)}
        count = int(facts.get("count") or 0)
    except (TypeError, ValueError):
        return {}
    return {"": count} if count else {}


def _mig_profiles(node_facts: Any) -> list[str]:
    """The MIG profiles of the node's GPUs that are in MIG mode now (its ``deepops_gpus`` fact), sorted."""
    facts = node_facts.get("deepops_gpus") if isinstance(node_facts, Mapping) else None
    gpus = facts.get("gpus") if isinstance(facts, Mapping) else None
    profiles = set()
    for gpu in gpus if isinstance(gpus, list) else []:
        if isinstance(gpu, Mapping) and (gpu.get("mig_mode") or {}).get("current") == "Enabled":
            profiles.update(str(mig["profile"]) for mig in gpu.get("mig_devices") or []
                            if isinstance(mig, Mapping) and mig.get("profile"))
    return sorted(profiles)


def _munge_problem(node: str, run: Any) -> str | None:
    """Why munge on the node cannot vouch for slurmd, from ``files/munge.sh``'s result there; None when it can.

    The script prints ``active`` (``systemctl is-active munge``),
    ``credential_rc`` and ``credential_err`` (``munge -n | unmunge`` under
    timeout(1)). No result (the node was not reached), or one without these
    lines, gives no verdict: the nodes check judges the node as before.
    """
    if not _ran(run):
        return None
    out = parse_key_values(run.get("stdout"))
    consequence = "slurmd cannot authenticate to slurmctld"
    active = out.get("active", "")
    if active in MUNGE_STOPPED_STATES:
        return f"munge is not running on {node} (systemctl is-active: {active}): {consequence}"
    rc = out.get("credential_rc", "0")
    if rc != "0":
        timed_out = " (timed out)" if rc == str(TIMEOUT_RC) else ""
        said = _truncate(out.get("credential_err"))
        return (f"munge on {node} cannot encode and decode a credential (munge -n | unmunge: rc={rc}{timed_out}"
                f"{': ' + said if said else ''}): {consequence}")
    return None


def survey(
    sinfo_stdout: Any,
    computes: Sequence[str],
    node_facts: Mapping[str, Any] | None = None,
    preemption_node: str = "",
    node_munge: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What every check starts from: Slurm's nodes, the usable ones, and the node of the sacct and preemption checks.

    ``node_facts`` maps each compute node to its ``ansible_facts`` (empty, or
    without ``deepops_gpus``, when the node was not reached), ``node_munge``
    to the result of ``files/munge.sh`` there. A node is usable when Slurm
    knows it, it is idle, mixed or planned, and its munge works: jobs start there,
    elsewhere they would only wait (or, munge down, hang while slurmctld still
    shows the node idle). The target is ``preemption_node`` if given, else the
    first usable node with GPUs.
    """
    computes = [str(node) for node in computes]
    node_facts = node_facts or {}
    node_munge = node_munge or {}
    slurm = parse_sinfo_nodes(sinfo_stdout)
    problems = {node: _munge_problem(node, node_munge.get(node)) for node in computes}
    munge = {node: problem for node, problem in problems.items() if problem}
    usable = [node for node in computes
              if node in slurm and slurm[node]["state"] in USABLE_STATES and node not in munge]
    expected = {node: _gres_expected(node_facts.get(node)) for node in computes}
    # GPU GRES the node's facts imply (a MIG device counts one); None: no facts
    counted = {node: None if gres is None else sum(gres.values()) for node, gres in expected.items()}
    preemption_node = _text(preemption_node).strip()
    if preemption_node:
        target = preemption_node
    else:
        target = next((node for node in usable if slurm[node]["gpus"] > 0), "")
    return {
        "computes": computes,
        "slurm": slurm,
        "usable": usable,
        # {node: why its munge cannot authenticate slurmd}, for the nodes whose munge does not work
        "munge_problems": munge,
        "counted": counted,
        "expected_gres": expected,
        # usable nodes that Slurm gives GPUs: where the gpus check runs jobs
        "gpu_nodes": [node for node in usable if slurm[node]["gpus"] > 0],
        "gpus": {node: slurm[node]["gpus"] for node in computes if node in slurm},
        "target": target,
        "target_chosen": bool(preemption_node),
        # GPUs Slurm gives the target: its jobs ask for all of them; 0 when they cannot run
        "target_gpus": slurm[target]["gpus"] if target in slurm and target not in munge else 0,
        # MIG profiles on each node, by its facts: the mig check runs a job per (node, profile)
        "mig_jobs": [{"node": node, "profile": profile} for node in computes for profile in _mig_profiles(node_facts.get(node))],
        # GPUs anywhere, by Slurm's GRES or by nvidia-smi on a node
        "any_gpus": any(slurm[node]["gpus"] > 0 for node in computes if node in slurm)
        or any((count or 0) > 0 for count in counted.values()),
    }


def _target_problem(cluster: Mapping[str, Any]) -> tuple[str, str] | None:
    """Why the sacct and preemption checks cannot run on the target: (status, reason), or None when they can."""
    target, slurm = cluster["target"], cluster["slurm"]
    if cluster["target_chosen"]:
        if target not in slurm:
            return FAIL, f"not run: validate_preemption_node {target} is not known to Slurm (sinfo)"
        if slurm[target]["gpus"] <= 0:
            return FAIL, f"not run: validate_preemption_node {target} has no GPUs in Slurm (GRES {slurm[target]['gres']})"
        if target in cluster.get("munge_problems", {}):
            return FAIL, f"not run: {cluster['munge_problems'][target]}"
        return None
    if target:
        return None
    if not cluster["any_gpus"]:
        return NOT_APPLICABLE, "no compute node has GPUs (Slurm's GRES and nvidia-smi agree)"
    return FAIL, "not run: no usable node with GPUs"


# --------------------------------------------------------------------------
# the checks


def nodes_results(cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every compute node: known to Slurm, munge working, idle, mixed or planned, and GRES GPUs = what nvidia-smi reports on it.

    With typed facts (``gres_by_type``) every type must match, MIG profiles
    included; otherwise the GPU counts must. A node whose munge does not work
    fails naming munge, whatever state Slurm shows (slurmctld notices only
    after SlurmdTimeout).
    """
    results = []
    munge = cluster.get("munge_problems", {})
    for node in cluster["computes"]:
        slurm = cluster["slurm"].get(node)
        counted = cluster["counted"].get(node)
        if slurm is None:
            passed, detail = False, "not known to Slurm (sinfo): missing from slurm.conf, or slurmctld not reconfigured"
        elif node in munge:
            passed, detail = False, f"{munge[node]}; Slurm shows the node {slurm['state']}"
        elif slurm["state"] not in USABLE_STATES:
            passed, detail = False, f"state {slurm['state']}, expected {', '.join(USABLE_STATES)}"
        elif counted is None:
            passed, detail = False, f"GRES {slurm['gres']}, but no GPU facts from the node (unreachable?)"
        elif _typed(cluster.get("expected_gres", {}).get(node)):
            expected, seen = cluster["expected_gres"][node], gres_gpu_by_type(slurm["gres"])
            passed = seen == expected
            if passed:
                detail = f"{slurm['state']}, GRES {slurm['gres']}, {_type_counts(expected)} on the node"
            else:
                detail = (
                    f"GRES {slurm['gres']} counts {slurm['gpus']} GPUs ({_type_counts(seen)}), nvidia-smi on the "
                    f"node reports {counted} ({_type_counts(expected)}; a GPU in MIG mode counts its MIG devices)"
                )
        elif counted != slurm["gpus"]:
            passed = False
            detail = f"GRES {slurm['gres']} counts {slurm['gpus']} GPUs, nvidia-smi on the node reports {counted}"
        else:
            passed, detail = True, f"{slurm['state']}, GRES {slurm['gres']}, {counted} GPUs on the node"
        results.append(result("nodes", node, _verdict(passed), detail))
    return results


def _typed(expected: Any) -> bool:
    """Whether facts give GRES types to compare (not just an untyped count, nor no GPUs)."""
    return isinstance(expected, Mapping) and bool(expected) and "" not in expected


def _ran(run: Any) -> bool:
    """Whether a registered command result is from a command that ran (not skipped)."""
    return isinstance(run, Mapping) and run.get("rc") is not None and not run.get("skipped")


def _rc(run: Mapping[str, Any]) -> int:
    try:
        return int(run.get("rc"))
    except (TypeError, ValueError):
        return -1


def _failed_command(what: str, run: Mapping[str, Any]) -> str:
    rc = _rc(run)
    timed_out = " (timed out)" if rc == TIMEOUT_RC else ""
    return f"{what} failed, rc={rc}{timed_out}: {_truncate(run.get('stderr') or run.get('msg'))}"


def hostname_result(run: Any, cluster: Mapping[str, Any]) -> dict[str, Any]:
    """One srun task per compute node: every node answers (``SLURMD_NODENAME hostname`` lines)."""
    computes = cluster["computes"]
    node = ",".join(computes)
    if not _ran(run):
        unusable = [name for name in computes if name not in cluster["usable"]]
        return result("hostname", node, FAIL, f"not run: nodes not usable: {', '.join(unusable)}")
    lines = [line for line in _text(run.get("stdout")).splitlines() if line.strip()]
    seen = sorted({line.split()[0] for line in lines})
    seconds = ansible_delta_seconds(run.get("delta"))
    if _rc(run) == 0 and seen == sorted(computes):
        return result("hostname", node, PASS, f"{len(seen)} nodes answered: {'; '.join(lines)}", seconds)
    rc = _rc(run)
    detail = (
        f"rc={rc}{' (timed out)' if rc == TIMEOUT_RC else ''}; expected {','.join(sorted(computes))}, "
        f"got {','.join(seen) or 'nothing'}; {_truncate(run.get('stderr'))}"
    )
    return result("hostname", node, FAIL, detail, seconds)


def mpi_result(run: Any, cluster: Mapping[str, Any], plugin: str = "pmix") -> dict[str, Any]:
    """One MPI rank per compute node: the JSON line rank 0 printed shows every node and the right sum.

    The program is roles/validate/files/mpi_allreduce.py: ``size``, the
    allreduce(SUM) of the ranks (``sum``, which must be size*(size-1)/2),
    every rank's ``hosts`` and the MPI ``library``.
    """
    computes = cluster["computes"]
    node = ",".join(computes)
    if not _ran(run):
        unusable = [name for name in computes if name not in cluster["usable"]]
        return result("mpi", node, FAIL, f"not run: nodes not usable: {', '.join(unusable)}")
    seconds = ansible_delta_seconds(run.get("delta"))
    report = _last_json_line(run.get("stdout"))
    if _rc(run) != 0 or report is None:
        rc = _rc(run)
        detail = (
            f"srun --mpi={plugin} rc={rc}{' (timed out)' if rc == TIMEOUT_RC else ''}: "
            f"{_truncate(run.get('stderr')) or _truncate(run.get('stdout')) or 'no output'}"
        )
        return result("mpi", node, FAIL, detail, seconds)
    size, total, hosts = report.get("size"), report.get("sum"), report.get("hosts")
    expected_sum = len(computes) * (len(computes) - 1) // 2
    seen = sorted({str(host).split(".", maxsplit=1)[0] for host in hosts}) if isinstance(hosts, list) else []
    figures = f"{size} ranks, allreduce sum {total} (expected {expected_sum}) on {','.join(seen) or 'no hosts'}"
    if size == len(computes) and total == expected_sum and seen == sorted(computes):
        library = _text(report.get("library")).split(",", maxsplit=1)[0].strip("\x00 ")  # "Open MPI v4.1.4, package: ..."
        return result("mpi", node, PASS, f"srun --mpi={plugin}: {figures}; {_truncate(library, 80)}", seconds)
    return result("mpi", node, FAIL, f"srun --mpi={plugin}: {figures}; expected {len(computes)} ranks on {node}", seconds)


def _last_json_line(stdout: Any) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object (MPI libraries may print warnings before it)."""
    for line in reversed(_text(stdout).splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def gpus_results(runs: Any, cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """On each usable node with GPUs, ``srun --gpus=<n> printenv CUDA_VISIBLE_DEVICES`` shows n devices.

    ``runs`` are the loop results (each with ``item``, the node). Nodes Slurm
    gives no GPUs are not applicable; unusable nodes fail (the nodes check says why).
    """
    by_node = {
        str(run.get("item")): run for run in (runs or []) if isinstance(run, Mapping) and run.get("item") is not None
    }
    results = []
    for node in cluster["computes"]:
        if node not in cluster["usable"]:
            results.append(result("gpus", node, FAIL, "not run: the node is not usable (see the nodes check)"))
            continue
        want = cluster["gpus"][node]
        if want <= 0:
            reason = f"no GPUs in Slurm's GRES ({cluster['slurm'][node]['gres']})"
            results.append(result("gpus", node, NOT_APPLICABLE, reason))
            continue
        run = by_node.get(node)
        if not _ran(run):
            results.append(result("gpus", node, FAIL, f"not run: srun --gpus={want} was not started on the node"))
            continue
        seconds = ansible_delta_seconds(run.get("delta"))
        if _rc(run) != 0:
            results.append(result("gpus", node, FAIL, _failed_command(f"srun --gpus={want}", run), seconds))
            continue
        seen = _text(run.get("stdout")).strip()
        devices = {device for device in seen.split(",") if device.strip()}
        detail = f"srun --gpus={want}: CUDA_VISIBLE_DEVICES={seen}"
        if len(devices) != want:
            detail += f" ({len(devices)} devices, expected {want})"
        results.append(result("gpus", node, _verdict(len(devices) == want), detail, seconds))
    return results


def mig_results(runs: Any, cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per node with MIG devices: ``srun --gres=gpu:<profile>:1 printenv CUDA_VISIBLE_DEVICES`` shows one device, per profile.

    ``runs`` are the loop results (each ``item`` one of the survey's
    ``mig_jobs``). A node passes when every profile's job did. No MIG device
    anywhere: one not-applicable result.
    """
    jobs = cluster.get("mig_jobs") or []
    if not jobs:
        return [result("mig", "", NOT_APPLICABLE, "no GPU is in MIG mode (the compute nodes' GPU facts)")]
    by_job = {
        (str(run["item"].get("node")), str(run["item"].get("profile"))): run
        for run in (runs or []) if isinstance(run, Mapping) and isinstance(run.get("item"), Mapping)
    }
    results = []
    for node in dict.fromkeys(job["node"] for job in jobs):
        profiles = [job["profile"] for job in jobs if job["node"] == node]
        if node not in cluster["usable"]:
            results.append(result("mig", node, FAIL, "not run: the node is not usable (see the nodes check)"))
            continue
        verdicts = [_mig_job_verdict(by_job.get((node, profile)), profile) for profile in profiles]
        seconds = round(sum(verdict.seconds for verdict in verdicts), 2)
        status = _verdict(all(verdict.passed for verdict in verdicts))
        results.append(result("mig", node, status, "; ".join(verdict.detail for verdict in verdicts), seconds))
    return results


@dataclass(frozen=True)
class _JobVerdict:
    passed: bool
    detail: str
    seconds: float = 0.0


def _mig_job_verdict(run: Any, profile: str) -> _JobVerdict:
    """One profile's job on one node."""
    request = f"--gres=gpu:{profile}:1"
    if not _ran(run):
        return _JobVerdict(False, f"{request}: not run")
    seconds = ansible_delta_seconds(run.get("delta"))
    if _rc(run) != 0:
        return _JobVerdict(False, _failed_command(request, run), seconds)
    seen = _text(run.get("stdout")).strip()
    devices = [device for device in seen.split(",") if device.strip()]
    detail = f"{request}: CUDA_VISIBLE_DEVICES={seen}"
    if len(devices) != 1:
        detail += f" ({len(devices)} devices, expected 1)"
    return _JobVerdict(len(devices) == 1, detail, seconds)


def sacct_result(run: Any, cluster: Mapping[str, Any], sacct_wait: Any) -> dict[str, Any]:
    """A GPU job run to completion shows in sacct as COMPLETED with ``gres/gpu=<n>`` in its AllocTRES.

    ``run`` is the result of ``files/sacct.sh``: ``sbatch_rc``, ``sbatch_out``,
    ``sbatch_err`` and ``record`` (sacct's ``State|AllocTRES``) lines.
    """
    target = cluster["target"]
    problem = _target_problem(cluster)
    if problem is not None:
        return result("sacct", target, *problem)
    if not _ran(run):
        return result("sacct", target, FAIL, "not run: the job was not submitted")
    seconds = ansible_delta_seconds(run.get("delta"))
    if _rc(run) != 0:
        return result("sacct", target, FAIL, _failed_command("the sacct check's script", run), seconds)
    out = parse_key_values(run.get("stdout"))
    want = cluster["gpus"].get(target, 0)
    job = parse_sbatch_job_id(out.get("sbatch_out"))
    if not job:
        detail = f"sbatch failed, rc={out.get('sbatch_rc', '?')}: {_truncate(out.get('sbatch_err') or out.get('sbatch_out'))}"
        return result("sacct", target, FAIL, detail, seconds)
    record = out.get("record", "")
    state, _separator, tres = record.partition("|")
    if state == "COMPLETED" and f"gres/gpu={want}" in tres.split(","):
        return result("sacct", target, PASS, f"job {job}: {record}", seconds)
    if not record:
        detail = f"job {job} (sbatch rc={out.get('sbatch_rc', '?')}) has no accounting record after {sacct_wait} s"
    else:
        detail = f"job {job}: expected COMPLETED with gres/gpu={want} in AllocTRES, sacct says {_truncate(record)}"
    return result("sacct", target, FAIL, detail, seconds)


def preemption_settings(config_stdout: Any, qos_stdout: Any, qos_low: str, bound: Any) -> dict[str, Any]:
    """PreemptType/Mode from ``scontrol show config``; the bound plus PreemptExemptTime and the low QOS's GraceTime.

    A job inside PreemptExemptTime cannot be preempted yet, and a preempted
    job gets its QOS's GraceTime to end: the high job may wait for both.
    """
    config = parse_scontrol_config(config_stdout)
    low = parse_qos(qos_stdout).get(_text(qos_low), {})
    try:
        base = int(bound)
    except (TypeError, ValueError) as error:
        raise ValidationInputError(f"validate_preemption_bound {bound!r}: expected whole seconds") from error
    extra = slurm_duration_seconds(config.get("PreemptExemptTime")) + slurm_duration_seconds(low.get("grace_time"))
    return {
        "type": config.get("PreemptType", "unknown"),
        "mode": config.get("PreemptMode", "unknown"),
        "extra_s": extra,
        "bound_s": base + extra,
        "bound_ms": (base + extra) * 1000,
    }


def preemption_result(
    run: Any,
    cluster: Mapping[str, Any],
    settings: Mapping[str, Any],
    qos_low: str,
    qos_high: str,
    job_timeout: Any,
) -> dict[str, Any]:
    """The high-QOS job started within the bound on the GPUs the low-QOS job held, and the low job was requeued.

    ``run`` is the result of ``files/preemption.sh``: ``low_sbatch_rc``,
    ``low_sbatch``, ``low_start_state``, ``high_sbatch_rc``, ``high_sbatch``,
    ``high_state`` ("" when the job already left the queue), ``waited_ms`` and
    ``low_job`` (``scontrol --oneliner show job`` of the low job) lines, as
    far as it got.
    """
    target = cluster["target"]
    if settings.get("type") == "preempt/none":
        return result("preemption", target, FAIL, "not run: PreemptType is preempt/none (expected preempt/qos)")
    problem = _target_problem(cluster)
    if problem is not None:
        return result("preemption", target, *problem)
    if not _ran(run):
        return result("preemption", target, FAIL, "not run: the jobs were not submitted")
    seconds = ansible_delta_seconds(run.get("delta"))
    if _rc(run) != 0:
        return result("preemption", target, FAIL, _failed_command("the preemption check's script", run), seconds)
    out = parse_key_values(run.get("stdout"))
    low = parse_sbatch_job_id(out.get("low_sbatch"))
    if out.get("low_sbatch_rc") != "0" or not low:
        return result("preemption", target, FAIL, f"sbatch of the low job failed: {_truncate(out.get('low_sbatch'))}", seconds)
    if out.get("low_start_state") != "RUNNING":
        state = out.get("low_start_state") or "gone"
        detail = f"the low job {low} did not start within {job_timeout} s (state {state})"
        return result("preemption", target, FAIL, detail, seconds)
    high = parse_sbatch_job_id(out.get("high_sbatch"))
    if out.get("high_sbatch_rc") != "0" or not high:
        return result("preemption", target, FAIL, f"sbatch of the high job failed: {_truncate(out.get('high_sbatch'))}", seconds)
    if "high_state" not in out or "waited_ms" not in out:
        return result("preemption", target, FAIL, f"the high job {high} was not followed: {_truncate(run.get('stderr'))}", seconds)
    high_state = out["high_state"] or "FINISHED"
    try:
        waited = round(int(out["waited_ms"]) / 1000, 1)
    except ValueError:
        waited = float("inf")
    started = high_state in STARTED_STATES
    in_time = started and waited <= settings["bound_s"]
    low_job = parse_job_fields(out.get("low_job"))
    try:
        restarts = int(low_job.get("Restarts") or 0)
    except ValueError:
        restarts = 0
    requeued = restarts > 0
    extra = f", with {settings['extra_s']} s of PreemptExemptTime and GraceTime" if settings["extra_s"] > 0 else ""
    low_state = " ".join(
        part for part in (low_job.get("JobState", ""), f"Reason={low_job['Reason']}" if "Reason" in low_job else "") if part
    )
    detail = (
        f"{qos_high} job {high} {f'started after {waited} s' if started else f'still {high_state} after {waited} s'} "
        f"(bound {settings['bound_s']} s{extra}); "
        f"{qos_low} job {low} {'requeued' if requeued else 'NOT requeued'} (Restarts={restarts}, {low_state or 'no record'}); "
        f"{settings['type']}, PreemptMode={settings['mode']}"
    )
    return result("preemption", target, _verdict(in_time and requeued), detail, seconds)


def error_result(task_name: Any, failed_result: Any, host: str) -> dict[str, Any]:
    """A step that could not run at all (the role's rescue): which task, and what it said."""
    failed_result = failed_result if isinstance(failed_result, Mapping) else {}
    message = f"{_text(failed_result.get('msg'))} {_text(failed_result.get('stderr'))}".strip()
    detail = f"{_text(task_name) or '?'}: {_truncate(message, 500)}"
    return result(ERROR_CHECK, host, FAIL, detail)
