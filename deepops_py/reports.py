"""Validation reports: the check results of a run as a table, JSON and JUnit XML.

Pure data and rendering; no Ansible or ansible-runner import. The checks come
from what the validate role recorded with ``set_stats`` (the run's ``data``,
one ``validate_<check>`` list per check), never from its output. The list of
checks is the collection's (``plugins/module_utils/validation.py``), the same
one the role runs. A result is pass, fail or not_applicable; only fail fails.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import validation
from deepops_py.run_results import RunResult

# Check names, in report order. "nodes" always runs; the rest can be skipped.
CHECKS = validation.CHECK_NAMES
SKIPPABLE_CHECKS = validation.SKIPPABLE_CHECKS
PASS, FAIL, NOT_APPLICABLE = validation.PASS, validation.FAIL, validation.NOT_APPLICABLE
# set_stats key of each check's results; validate_error holds a step that could not run at all.
DATA_PREFIX = validation.DATA_PREFIX
_EXTRA_KEYS = (validation.ERROR_KEY[len(DATA_PREFIX):],)
JUNIT_SUITE = "deepops-validate"


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


@dataclass(frozen=True)
class CheckResult:
    """One check on one node (or on the cluster, for cluster-wide checks): pass, fail or not_applicable."""

    check: str
    node: str
    status: str
    detail: str = ""
    seconds: float = 0.0

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
        return cls(
            check=str(data.get("check") or check),
            node=str(data.get("node") or ""),
            status=status,
            detail=detail,
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
        return [check for check in self.checks if check.failed]

    @property
    def not_applicable(self) -> list[CheckResult]:
        return [check for check in self.checks if check.not_applicable]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.failed and self.run_status == "ok"

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
        report.checks.append(CheckResult("playbook", "", FAIL, " ".join(detail.split())[:2000]))
    elif not report.checks:
        report.checks.append(CheckResult("playbook", "", FAIL, "the validation playbook recorded no check results"))
    return report


# --------------------------------------------------------------------------
# rendering


def to_junit(report: ValidationReport) -> str:
    """One testsuite, one testcase per check result, a <failure> for each failed one, <skipped> for not applicable."""
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
            escape(check.detail),
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
