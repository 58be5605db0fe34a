"""Validation reports: the check results of a run as a table, JSON and JUnit XML.

Pure data and rendering; no Ansible or ansible-runner import. The checks come
from what the validation playbook recorded with ``set_stats`` (the run's
``data``, one ``validate_<check>`` list per check), never from its output.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Any

from deepops_py.run_results import RunResult

# Check names, in report order. "nodes" always runs; the rest can be skipped.
CHECKS = ("nodes", "hostname", "gpus", "sacct", "preemption")
SKIPPABLE_CHECKS = CHECKS[1:]
# set_stats key of each check's results; "error" holds a step that could not run at all.
DATA_PREFIX = "validate_"
_EXTRA_KEYS = ("error",)
JUNIT_SUITE = "deepops-validate"


@dataclass(frozen=True)
class CheckResult:
    """One check on one node (or on the cluster, for cluster-wide checks)."""

    check: str
    node: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: Any, check: str) -> CheckResult:
        """From one recorded entry; anything malformed becomes a failed check that says so."""
        if not isinstance(data, dict):
            return cls(check=check, node="", passed=False, detail=f"malformed result recorded by the playbook: {data!r}")
        try:
            seconds = float(data.get("seconds") or 0.0)
        except (TypeError, ValueError):
            seconds = 0.0
        passed = data.get("passed")
        if isinstance(passed, str):  # a templated boolean can arrive as text
            passed = passed.strip().lower() in ("true", "yes", "1")
        return cls(
            check=str(data.get("check") or check),
            node=str(data.get("node") or ""),
            passed=passed is True,
            detail=" ".join(str(data.get("detail") or "").split()),
            seconds=round(seconds, 2),
        )


@dataclass
class ValidationReport:
    """Every check of one ``deepops validate`` run, and how the run itself ended."""

    run_id: str
    run_status: str
    checks: list[CheckResult] = field(default_factory=list)
    skipped: tuple[str, ...] = ()
    artifacts: str = ""

    @property
    def failed(self) -> list[CheckResult]:
        return [check for check in self.checks if not check.passed]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.failed and self.run_status == "ok"

    @property
    def seconds(self) -> float:
        return round(sum(check.seconds for check in self.checks), 2)

    def summary(self) -> dict[str, Any]:
        return {
            "checks": len(self.checks),
            "passed": len(self.checks) - len(self.failed),
            "failed": len(self.failed),
            "skipped": list(self.skipped),
            "ok": self.ok,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_status": self.run_status,
            "artifacts": self.artifacts,
            "ok": self.ok,
            "summary": self.summary(),
            "checks": [check.as_dict() for check in self.checks],
        }


def checks_from_data(data: dict[str, Any]) -> list[CheckResult]:
    """The recorded checks in report order: known checks first, then anything else the playbook recorded."""
    results: list[CheckResult] = []
    known = [f"{DATA_PREFIX}{name}" for name in (*CHECKS, *_EXTRA_KEYS)]
    others = sorted(key for key in data if key.startswith(DATA_PREFIX) and key not in known)
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
    report = ValidationReport(
        run_id=result.run_id,
        run_status=result.status,
        checks=checks_from_data(result.data or {}),
        skipped=tuple(skipped),
        artifacts=result.artifacts,
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
        report.checks.append(CheckResult("playbook", "", False, " ".join(detail.split())[:2000]))
    elif not report.checks:
        report.checks.append(CheckResult("playbook", "", False, "the validation playbook recorded no check results"))
    return report


# --------------------------------------------------------------------------
# rendering


def to_junit(report: ValidationReport) -> str:
    """One testsuite, one testcase per check result, a <failure> for each failed one."""
    suite = ET.Element(
        "testsuite",
        {
            "name": JUNIT_SUITE,
            "tests": str(len(report.checks)),
            "failures": str(len(report.failed)),
            "errors": "0",
            "skipped": "0",
            "time": f"{report.seconds:.2f}",
        },
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "run_id", "value": report.run_id})
    ET.SubElement(properties, "property", {"name": "run_status", "value": report.run_status})
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
        if check.passed:
            if check.detail:
                ET.SubElement(case, "system-out").text = check.detail
        else:
            failure = ET.SubElement(case, "failure", {"message": check.detail or "failed", "type": "CheckFailed"})
            failure.text = check.detail
    suites = ET.Element("testsuites", {"name": JUNIT_SUITE, "tests": suite.get("tests"), "failures": suite.get("failures")})
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def print_table(report: ValidationReport, console=None) -> None:
    """check | node | result | detail | seconds, then one summary line."""
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
    for check in report.checks:
        table.add_row(
            escape(check.check),
            escape(check.node or "-"),
            "[green]pass[/green]" if check.passed else "[red]FAIL[/red]",
            escape(check.detail),
            f"{check.seconds:.1f}",
        )
    console.print(table)
    summary = report.summary()
    skipped = f", skipped: {', '.join(report.skipped)}" if report.skipped else ""
    outcome = "[green]all checks passed[/green]" if report.ok else f"[red]{summary['failed']} failed[/red]"
    console.print(
        f"{summary['passed']}/{summary['checks']} passed, {outcome}{escape(skipped)}. "
        f"Run {escape(report.run_id)}, artifacts: {escape(report.artifacts)}",
        highlight=False,
        soft_wrap=True,  # keep the path on one line so it can be copied
    )
