"""Validation reports: the check results of a run as a table, JSON and JUnit XML.

Pure data and rendering; no Ansible or ansible-runner import. The checks come
from what the validate role recorded with ``set_stats`` (the run's ``data``,
one ``validate_<check>`` list per check), never from its output. The list of
checks is the collection's (``plugins/module_utils/validation.py``), the same
one the role runs. A result is pass, fail or not_applicable; only fail fails.

A result may say it is ``simulated`` (it came from the virtual cluster's
stand-in tools) and carry ``measurements`` (nccl, dcgm, burnin: the shapes are
in ``_MEASUREMENTS``). Both come from the cluster, so they are checked here:
measurements that do not have their check's shape are dropped, never trusted.
The role records the versions (Slurm; driver, CUDA and NCCL per node) under
``validate_versions``. Every output marks simulated results.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import validation
from deepops_py.run_results import RunResult

# Check names, in report order. "nodes" always runs; the rest can be skipped.
CHECKS = validation.CHECK_NAMES
SKIPPABLE_CHECKS = validation.SKIPPABLE_CHECKS
OPT_IN_CHECKS = validation.OPT_IN_CHECKS  # run only when asked for (burnin: --burn-in)
PASS, FAIL, NOT_APPLICABLE = validation.PASS, validation.FAIL, validation.NOT_APPLICABLE
# set_stats key of each check's results; validate_error holds a step that could not run at all.
DATA_PREFIX = validation.DATA_PREFIX
_EXTRA_KEYS = (validation.ERROR_KEY[len(DATA_PREFIX):],)
# set_stats key of the versions the role found: {"slurm": ..., "nodes": {node: {"driver", "cuda", "nccl"}}}.
VERSIONS_KEY = f"{DATA_PREFIX}versions"
# set_stats key of the nodes --drain-failed drained: [{"node", "reason"}].
DRAINED_KEY = f"{DATA_PREFIX}drained"
NODE_VERSIONS = ("driver", "cuda", "nccl")
# The checks whose results carry measurements.
NCCL, DCGM, BURNIN = "nccl", "dcgm", "burnin"
DCGM_RESULTS = ("pass", "fail", "warn", "skip")
JUNIT_SUITE = "deepops-validate"
SIMULATED_MARK = "[simulated]"


def _status(data: dict[str, Any]) -> str:
    """A recorded entry's status; entries without one (runs from before not_applicable) have only ``passed``."""
    status = data.get("status")
    if isinstance(status, str) and status.strip().lower() in validation.STATUSES:
        return status.strip().lower()
    if status is not None:
        return ""  # present but unknown: malformed
    passed = data.get("passed")
    if isinstance(passed, str):  # a templated boolean can arrive as text
        passed = passed.strip().lower() in ("true", "yes", "1")
    return PASS if passed is True else FAIL


# --------------------------------------------------------------------------
# measurements: each check's shape, checked field by field


class _Malformed(ValueError):
    """A measurement that does not have its check's shape."""


def _flag(value: Any) -> bool:
    """True only for true (or a templated "true"); anything else is not simulated."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return value is True


def _number(value: Any, *, optional: bool = False) -> float | None:
    """A finite, non-negative number (a templated number can arrive as text)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Malformed(value)
    try:
        number = float(value)
    except ValueError:
        raise _Malformed(value) from None
    if not math.isfinite(number) or number < 0:
        raise _Malformed(value)
    return number


def _integer(value: Any) -> int:
    number = _number(value)
    if number != int(number):
        raise _Malformed(value)
    return int(number)


def _text(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise _Malformed(value)
    return " ".join(str(value).split())


def _nccl(raw: Mapping) -> dict[str, Any]:
    if not isinstance(raw.get("curve"), list):
        raise _Malformed(raw)
    curve = []
    for point in raw["curve"]:
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            raise _Malformed(point)
        size, busbw = _integer(point[0]), _number(point[1])
        if size < 1:
            raise _Malformed(point)
        curve.append([size, busbw])
    return {
        "busbw_gbps": _number(raw.get("busbw_gbps")),
        "threshold_gbps": _number(raw.get("threshold_gbps"), optional=True),
        "curve": sorted(curve),
        "gpus": _integer(raw["gpus"]) if raw.get("gpus") is not None else None,
        "model": _text(raw.get("model")),
        "interconnect": _text(raw.get("interconnect")),
        "nccl_version": _text(raw.get("nccl_version")) or None,
    }


def _dcgm(raw: Mapping) -> dict[str, Any]:
    if not isinstance(raw.get("tests"), Mapping):
        raise _Malformed(raw)
    tests: dict[str, dict[str, str]] = {}
    for name, gpus in raw["tests"].items():
        if not isinstance(gpus, Mapping):
            raise _Malformed(gpus)
        cells = {}
        for gpu, outcome in gpus.items():
            outcome = _text(outcome).lower()
            if outcome not in DCGM_RESULTS:
                raise _Malformed(outcome)
            cells[str(_integer(gpu))] = outcome
        tests[_text(name)] = dict(sorted(cells.items(), key=lambda cell: int(cell[0])))
    return {"level": _integer(raw.get("level")), "tests": tests}


def _burnin(raw: Mapping) -> dict[str, Any]:
    if not isinstance(raw.get("gpus"), list):
        raise _Malformed(raw)
    gpus = []
    for gpu in raw["gpus"]:
        if not isinstance(gpu, Mapping):
            raise _Malformed(gpu)
        throttle = gpu.get("throttle") or []
        if not isinstance(throttle, list):
            raise _Malformed(throttle)
        gpus.append({
            "index": _integer(gpu.get("index")),
            "tflops": _number(gpu.get("tflops"), optional=True),
            "peak_tflops": _number(gpu.get("peak_tflops")),
            "mem_bw_gbps": _number(gpu.get("mem_bw_gbps"), optional=True),
            "peak_mem_bw_gbps": _number(gpu.get("peak_mem_bw_gbps")),
            "throttle": [_text(reason) for reason in throttle],
        })
    return {"gpus": sorted(gpus, key=lambda gpu: gpu["index"])}


_MEASUREMENTS = {NCCL: _nccl, DCGM: _dcgm, BURNIN: _burnin}


def _measurements(check: str, raw: Any) -> dict[str, Any]:
    """The measurements in their check's shape, or none: a check without a known shape has none."""
    parse = _MEASUREMENTS.get(check)
    if parse is None or not isinstance(raw, Mapping) or not raw:
        return {}
    try:
        return parse(raw)
    except (_Malformed, TypeError, KeyError, OverflowError):
        return {}


def drained_from_data(data: Any) -> list[dict[str, str]]:
    """``validate_drained`` as ``[{"node", "reason"}]``; malformed entries are left out."""
    entries = data if isinstance(data, list) else []
    return [
        {"node": str(entry["node"]), "reason": " ".join(str(entry.get("reason") or "").split())}
        for entry in entries if isinstance(entry, Mapping) and entry.get("node")
    ]


def versions_from_data(data: Any) -> dict[str, Any]:
    """``validate_versions`` as ``{"slurm": str|None, "nodes": {node: {driver, cuda, nccl: str|None}}}``."""

    def version(value: Any) -> str | None:
        try:
            return _text(value) or None
        except _Malformed:
            return None

    data = data if isinstance(data, Mapping) else {}
    nodes = data.get("nodes") if isinstance(data.get("nodes"), Mapping) else {}
    return {
        "slurm": version(data.get("slurm")),
        "nodes": {
            str(node): {key: version(found.get(key)) if isinstance(found, Mapping) else None for key in NODE_VERSIONS}
            for node, found in sorted(nodes.items(), key=lambda item: str(item[0]))
        },
    }


@dataclass(frozen=True)
class CheckResult:
    """One check on one node (or on the cluster, for cluster-wide checks): pass, fail or not_applicable."""

    check: str
    node: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    simulated: bool = False  # from the virtual cluster's stand-in tools
    measurements: dict[str, Any] = field(default_factory=dict, hash=False)  # nccl, dcgm, burnin: see _MEASUREMENTS

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def failed(self) -> bool:
        return self.status not in (PASS, NOT_APPLICABLE)

    @property
    def not_applicable(self) -> bool:
        return self.status == NOT_APPLICABLE

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``passed`` is kept beside ``status`` for readers of older output."""
        return {
            "check": self.check,
            "node": self.node,
            "status": self.status,
            "passed": self.passed,
            "detail": self.detail,
            "seconds": self.seconds,
            "simulated": self.simulated,
            "measurements": self.measurements,
        }

    @classmethod
    def from_data(cls, data: Any, check: str) -> CheckResult:
        """From one recorded entry; anything malformed becomes a failed check that says so."""
        if not isinstance(data, dict):
            return cls(check=check, node="", status=FAIL, detail=f"malformed result recorded by the playbook: {data!r}")
        try:
            seconds = float(data.get("seconds") or 0.0)
        except (TypeError, ValueError):
            seconds = 0.0
        detail = " ".join(str(data.get("detail") or "").split())
        status = _status(data)
        if not status:
            status, detail = FAIL, f"malformed status {data.get('status')!r} recorded by the playbook: {detail}"
        name = str(data.get("check") or check)
        return cls(
            check=name,
            node=str(data.get("node") or ""),
            status=status,
            detail=detail,
            seconds=round(seconds, 2),
            simulated=_flag(data.get("simulated")),
            measurements=_measurements(name, data.get("measurements")),
        )


def with_nccl_versions(versions: dict[str, Any], checks: list[CheckResult]) -> dict[str, Any]:
    """VERSIONS with each node's NCCL as its nccl run printed it (NCCL_DEBUG=VERSION): the library
    the job loaded, not a package that may sit unused. Nodes the nccl check did not reach keep theirs."""
    for check in checks:
        found = check.measurements.get("nccl_version") if check.check == NCCL else None
        if found and check.node in versions["nodes"]:
            versions["nodes"][check.node]["nccl"] = found
    return versions


@dataclass
class ValidationReport:
    """Every check of one ``deepops validate`` run, and how the run itself ended."""

    run_id: str
    run_status: str
    checks: list[CheckResult] = field(default_factory=list)
    skipped: tuple[str, ...] = ()
    artifacts: str = ""
    versions: dict[str, Any] = field(default_factory=lambda: versions_from_data({}))
    drained: list[dict[str, str]] = field(default_factory=list)  # --drain-failed: [{node, reason}]

    @property
    def failed(self) -> list[CheckResult]:
        return [check for check in self.checks if check.failed]

    @property
    def not_applicable(self) -> list[CheckResult]:
        return [check for check in self.checks if check.not_applicable]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.failed and self.run_status == "ok"

    @property
    def simulated(self) -> list[CheckResult]:
        return [check for check in self.checks if check.simulated]

    @property
    def seconds(self) -> float:
        return round(sum(check.seconds for check in self.checks), 2)

    def summary(self) -> dict[str, Any]:
        return {
            "checks": len(self.checks),
            "passed": sum(1 for check in self.checks if check.passed),
            "failed": len(self.failed),
            "not_applicable": len(self.not_applicable),
            "skipped": list(self.skipped),
            "ok": self.ok,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_status": self.run_status,
            "artifacts": self.artifacts,
            "ok": self.ok,
            "simulated": bool(self.simulated),
            "summary": self.summary(),
            "versions": self.versions,
            "drained": self.drained,
            "checks": [check.as_dict() for check in self.checks],
        }


def checks_from_data(data: dict[str, Any]) -> list[CheckResult]:
    """The recorded checks in report order: known checks first, then anything else the playbook recorded."""
    results: list[CheckResult] = []
    known = [f"{DATA_PREFIX}{name}" for name in (*CHECKS, *_EXTRA_KEYS)]
    others = sorted(key for key in data if key.startswith(DATA_PREFIX) and key not in (*known, VERSIONS_KEY, DRAINED_KEY))
    for key in (*known, *others):
        if key not in data:
            continue
        check = key[len(DATA_PREFIX):]
        entries = data[key]
        for entry in entries if isinstance(entries, list) else [entries]:
            results.append(CheckResult.from_data(entry, check))
    return results


def report_from_run(result: RunResult, skipped: tuple[str, ...] = ()) -> ValidationReport:
    """Build the report; a run that failed, or recorded nothing, is a failed check of its own."""
    data = result.data or {}
    checks = checks_from_data(data)
    report = ValidationReport(
        run_id=result.run_id,
        run_status=result.status,
        checks=checks,
        skipped=tuple(skipped),
        artifacts=result.artifacts,
        versions=with_nccl_versions(versions_from_data(data.get(VERSIONS_KEY)), checks),
        drained=drained_from_data(data.get(DRAINED_KEY)),
    )
    if not result.ok:
        reasons = [
            f"{name} {'unreachable' if host.unreachable else 'failed'} at {host.failed_task or '?'}: {host.message or ''}".strip()
            for name, host in sorted(result.hosts.items())
            if not host.succeeded
        ]
        if result.error:
            reasons.append(result.error)
        detail = "; ".join(reasons) or f"the validation run ended {result.status}"
        report.checks.append(CheckResult("playbook", "", FAIL, " ".join(detail.split())[:2000]))
    elif not report.checks:
        report.checks.append(CheckResult("playbook", "", FAIL, "the validation playbook recorded no check results"))
    return report


# --------------------------------------------------------------------------
# rendering


def to_junit(report: ValidationReport) -> str:
    """One testsuite, one testcase per check result, a <failure> for each failed one, <skipped> for not applicable.

    A simulated result has ``<property name="simulated" value="true"/>``, and so
    does the suite when any result is; the versions are suite properties.
    """
    suite = ET.Element(
        "testsuite",
        {
            "name": JUNIT_SUITE,
            "tests": str(len(report.checks)),
            "failures": str(len(report.failed)),
            "errors": "0",
            "skipped": str(len(report.not_applicable)),
            "time": f"{report.seconds:.2f}",
        },
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "run_id", "value": report.run_id})
    ET.SubElement(properties, "property", {"name": "run_status", "value": report.run_status})
    if report.simulated:
        ET.SubElement(properties, "property", {"name": "simulated", "value": "true"})
    versions = {"version.slurm": report.versions["slurm"]}
    for node, found in report.versions["nodes"].items():
        versions.update({f"version.{node}.{key}": value for key, value in found.items()})
    for name, value in versions.items():
        ET.SubElement(properties, "property", {"name": name, "value": value or "unknown"})
    for check in report.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"{JUNIT_SUITE}.{check.check}",
                "name": f"{check.check}[{check.node}]" if check.node else check.check,
                "time": f"{check.seconds:.2f}",
            },
        )
        if check.simulated:
            ET.SubElement(ET.SubElement(case, "properties"), "property", {"name": "simulated", "value": "true"})
        if check.passed:
            if check.detail:
                ET.SubElement(case, "system-out").text = check.detail
        elif check.not_applicable:
            ET.SubElement(case, "skipped", {"message": check.detail or "not applicable"})
        else:
            failure = ET.SubElement(case, "failure", {"message": check.detail or "failed", "type": "CheckFailed"})
            failure.text = check.detail
    suites = ET.Element("testsuites", {"name": JUNIT_SUITE, "tests": suite.get("tests"), "failures": suite.get("failures")})
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def print_table(report: ValidationReport, console=None) -> None:
    """check | node | result (pass, n/a, FAIL) | detail | seconds, then one summary line."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"validate {report.run_id}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("node", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("seconds", justify="right")
    results = {PASS: "[green]pass[/green]", NOT_APPLICABLE: "[yellow]n/a[/yellow]"}
    for check in report.checks:
        table.add_row(
            escape(check.check),
            escape(check.node or "-"),
            results.get(check.status, "[red]FAIL[/red]"),
            escape(f"{SIMULATED_MARK} {check.detail}".strip() if check.simulated else check.detail),
            f"{check.seconds:.1f}",
        )
    console.print(table)
    summary = report.summary()
    skipped = f", skipped: {', '.join(report.skipped)}" if report.skipped else ""
    not_applicable = f"{summary['not_applicable']} not applicable, " if summary["not_applicable"] else ""
    if not report.ok:
        outcome = f"[red]{summary['failed']} failed[/red]"
    else:
        outcome = "[green]none failed[/green]" if not_applicable else "[green]all checks passed[/green]"
    console.print(
        f"{summary['passed']}/{summary['checks']} passed, {not_applicable}{outcome}{escape(skipped)}. "
        f"Run {escape(report.run_id)}, artifacts: {escape(report.artifacts)}",
        highlight=False,
        soft_wrap=True,  # keep the path on one line so it can be copied
    )
    for entry in report.drained:
        console.print(f"[red]drained {escape(entry['node'])}[/red]: {escape(entry['reason'])}", highlight=False)
    if report.simulated:
        console.print(
            f"[yellow]{len(report.simulated)} {'result is' if len(report.simulated) == 1 else 'results are'} "
            f"{escape(SIMULATED_MARK)}: from the virtual cluster's stand-in tools, not real GPUs.[/yellow]",
            highlight=False,
        )
