"""Validation reports: results from set_stats data (through the event collector), table, JSON, JUnit.

DATA records results the way runs before not_applicable did (``passed`` only);
NA_DATA the way the validate role records them now (``status`` and ``passed``).
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console

from deepops_py import reports
from deepops_py.run_results import EventCollector, HostResult, RunResult

DATA = {
    "validate_gpus": [
        {"check": "gpus", "node": "gpu01", "passed": True, "detail": "srun --gpus=8: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "seconds": 0.81},
        {"check": "gpus", "node": "gpu02", "passed": False, "detail": "srun --gpus=4 failed, rc=1: <&\"weird'>", "seconds": "1.5"},
    ],
    "validate_nodes": [
        {"check": "nodes", "node": "gpu01", "passed": True, "detail": "idle, GRES gpu:h100:8", "seconds": 0.0},
        {"check": "nodes", "node": "gpu02", "passed": "True", "detail": "idle,\n  GRES gpu:a100:4", "seconds": 0.0},
    ],
    "validate_hostname": [{"check": "hostname", "node": "gpu01,gpu02", "passed": True, "detail": "2 nodes", "seconds": 1.2}],
    "unrelated": {"x": 1},
}

NA_DATA = {
    "validate_nodes": [
        {"check": "nodes", "node": "gpu01", "status": "pass", "passed": True, "detail": "idle, GRES gpu:h100:8", "seconds": 0.0},
        {"check": "nodes", "node": "cpu01", "status": "pass", "passed": True, "detail": "idle, GRES (null)", "seconds": 0.0},
    ],
    "validate_gpus": [
        {"check": "gpus", "node": "gpu01", "status": "pass", "passed": True, "detail": "srun --gpus=8: ...", "seconds": 0.5},
        {"check": "gpus", "node": "cpu01", "status": "not_applicable", "passed": False,
         "detail": "no GPUs in Slurm's GRES ((null))", "seconds": 0.0},
    ],
}


def run_result(data=None, status="ok", hosts=None, error=None) -> RunResult:
    return RunResult(
        run_id="20261130-101500-validate-ab12", command="validate", playbook="validate.yml", inventory="inv.yml",
        start="2026-11-30T10:15:00+00:00", artifacts="/tmp/runs/x", status=status, data=data or {},
        hosts=hosts or {}, error=error,
    )


def test_checks_come_in_report_order_with_types_fixed():
    checks = reports.checks_from_data(DATA)
    assert [(c.check, c.node) for c in checks] == [
        ("nodes", "gpu01"), ("nodes", "gpu02"), ("hostname", "gpu01,gpu02"), ("gpus", "gpu01"), ("gpus", "gpu02"),
    ]
    assert checks[1].passed is True and checks[1].detail == "idle, GRES gpu:a100:4"
    assert checks[4].passed is False and checks[4].seconds == 1.5


def test_results_travel_from_stats_event_to_report():
    collector = EventCollector()
    collector.handle({"event": "runner_on_ok", "event_data": {"host": "ctl01", "task": "x", "res": {"changed": False}}})
    collector.handle({"event": "playbook_on_stats", "event_data": {"ok": {"ctl01": 9}, "artifact_data": DATA}})
    result = run_result(collector.artifact_data)
    report = reports.report_from_run(result)
    assert report.summary() == {"checks": 5, "passed": 4, "failed": 1, "not_applicable": 0, "skipped": [], "ok": False}
    assert [c.node for c in report.failed] == ["gpu02"]


def test_all_passed_is_ok():
    report = reports.report_from_run(run_result({"validate_nodes": DATA["validate_nodes"]}), skipped=("preemption",))
    assert report.ok and report.summary()["skipped"] == ["preemption"]


def test_malformed_or_missing_results_fail():
    report = reports.report_from_run(run_result({"validate_sacct": ["oops"], "validate_gpus": {"node": "gpu01"}}))
    assert not report.ok and len(report.failed) == 2
    assert "malformed" in report.checks[0].detail or "malformed" in report.checks[1].detail
    empty = reports.report_from_run(run_result({}))
    assert not empty.ok and empty.checks[0].check == "playbook" and "no check results" in empty.checks[0].detail


def test_failed_run_adds_a_failed_check_naming_the_host():
    hosts = {"ctl01": HostResult("ctl01", unreachable=1, failed_task="Gathering Facts", message="ssh: refused")}
    report = reports.report_from_run(run_result({"validate_nodes": DATA["validate_nodes"]}, status="failed", hosts=hosts))
    assert not report.ok
    assert report.checks[-1].check == "playbook" and "ctl01 unreachable at Gathering Facts: ssh: refused" in report.checks[-1].detail


def test_json_has_checks_summary_and_run_id():
    data = json.loads(json.dumps(reports.report_from_run(run_result(DATA)).as_dict()))
    assert data["run_id"] == "20261130-101500-validate-ab12"
    assert data["summary"]["failed"] == 1 and data["ok"] is False
    assert data["checks"][0] == {
        "check": "nodes", "node": "gpu01", "status": "pass", "passed": True, "detail": "idle, GRES gpu:h100:8", "seconds": 0.0,
    }
    assert data["summary"]["not_applicable"] == 0


def test_junit_parses_back_with_one_testcase_per_check():
    report = reports.report_from_run(run_result(DATA))
    root = ET.fromstring(reports.to_junit(report).encode())
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "deepops-validate"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("5", "1", "0", "0")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [
        "nodes[gpu01]", "nodes[gpu02]", "hostname[gpu01,gpu02]", "gpus[gpu01]", "gpus[gpu02]",
    ]
    failures = [case for case in cases if case.find("failure") is not None]
    assert len(failures) == 1
    assert failures[0].find("failure").get("message") == "srun --gpus=4 failed, rc=1: <&\"weird'>"
    assert float(suite.get("time")) == round(0.81 + 1.5 + 1.2, 2)


def test_junit_of_a_clean_run_has_no_failures():
    root = ET.fromstring(reports.to_junit(reports.report_from_run(run_result({"validate_nodes": DATA["validate_nodes"]}))))
    assert root.find("testsuite").get("failures") == "0"
    assert root.find("testsuite").find("testcase/failure") is None


def test_table_shows_every_check_and_the_summary():
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    reports.print_table(reports.report_from_run(run_result(DATA), skipped=("sacct",)), console=console)
    text = out.getvalue()
    for word in ("check", "node", "result", "detail", "seconds", "gpu02", "FAIL", "pass", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"):
        assert word in text
    assert "4/5 passed, 1 failed, skipped: sacct" in text


def test_not_applicable_is_neither_passed_nor_failed_and_does_not_fail_the_run():
    report = reports.report_from_run(run_result(NA_DATA))
    assert report.ok
    assert report.summary() == {"checks": 4, "passed": 3, "failed": 0, "not_applicable": 1, "skipped": [], "ok": True}
    (na,) = report.not_applicable
    assert (na.check, na.node, na.status, na.passed) == ("gpus", "cpu01", "not_applicable", False)
    assert report.failed == []
    json_check = json.loads(json.dumps(report.as_dict()))["checks"][3]
    assert json_check == {"check": "gpus", "node": "cpu01", "status": "not_applicable", "passed": False,
                          "detail": "no GPUs in Slurm's GRES ((null))", "seconds": 0.0}


def test_not_applicable_and_a_failure_together_fail():
    data = {**NA_DATA, "validate_sacct": [{"check": "sacct", "node": "gpu01", "status": "fail", "passed": False, "detail": "x"}]}
    report = reports.report_from_run(run_result(data))
    assert not report.ok and report.summary()["failed"] == 1 and report.summary()["not_applicable"] == 1


def test_status_wins_over_passed_and_an_unknown_status_fails():
    checks = reports.checks_from_data({
        "validate_gpus": [
            {"check": "gpus", "node": "a", "status": "fail", "passed": True},
            {"check": "gpus", "node": "b", "status": "NOT_APPLICABLE", "passed": False},
            {"check": "gpus", "node": "c", "status": "skipped", "passed": True, "detail": "odd"},
        ],
    })
    assert [c.status for c in checks] == ["fail", "not_applicable", "fail"]
    assert "malformed status 'skipped'" in checks[2].detail


def test_junit_marks_not_applicable_as_skipped_with_the_reason():
    root = ET.fromstring(reports.to_junit(reports.report_from_run(run_result(NA_DATA))))
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "0", "1")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    skipped = cases["gpus[cpu01]"].find("skipped")
    assert skipped is not None and skipped.get("message") == "no GPUs in Slurm's GRES ((null))"
    assert cases["gpus[cpu01]"].find("failure") is None
    assert all(case.find("skipped") is None for name, case in cases.items() if name != "gpus[cpu01]")


def test_table_shows_not_applicable():
    out = io.StringIO()
    reports.print_table(reports.report_from_run(run_result(NA_DATA)), console=Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    row = next(line for line in text.splitlines() if "cpu01" in line and "gpus" in line)
    assert "n/a" in row and "FAIL" not in row and "no GPUs in Slurm's GRES" in row
    assert "3/4 passed, 1 not applicable, none failed" in text
