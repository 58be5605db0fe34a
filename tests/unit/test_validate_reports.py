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
        "simulated": False, "measurements": {},
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
                          "detail": "no GPUs in Slurm's GRES ((null))", "seconds": 0.0,
                          "simulated": False, "measurements": {}}


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


SIMULATED_DATA = {
    "validate_nodes": NA_DATA["validate_nodes"],
    "validate_nccl": [
        {"check": "nccl", "node": "gpu01", "status": "pass", "detail": "busbw 370 GB/s", "simulated": True, "seconds": 30,
         "measurements": {"busbw_gbps": "370.5", "threshold_gbps": 300, "curve": [[1048576, 50.0], [8, 0.1]],
                          "gpus": 8, "model": "H100", "interconnect": "NVLink"}},
    ],
    "validate_versions": {"slurm": "22.05.8", "nodes": {"gpu01": {"driver": "535.104.05", "cuda": "12.2", "nccl": None}}},
}


def test_simulated_and_measurements_are_read_and_checked():
    report = reports.report_from_run(run_result(SIMULATED_DATA))
    nccl = next(c for c in report.checks if c.check == "nccl")
    assert nccl.simulated is True and [c.check for c in report.simulated] == ["nccl"]
    assert nccl.measurements["busbw_gbps"] == 370.5  # a templated number arrives as text
    assert nccl.measurements["curve"] == [[8, 0.1], [1048576, 50.0]]  # by message size
    assert all(c.simulated is False and c.measurements == {} for c in report.checks if c.check == "nodes")
    assert "versions" not in {c.check for c in report.checks}  # validate_versions is not a check
    assert report.versions == {"slurm": "22.05.8", "nodes": {"gpu01": {"driver": "535.104.05", "cuda": "12.2", "nccl": None}}}


def test_malformed_measurements_are_dropped_and_the_verdict_kept():
    bad = [
        "text",
        {"busbw_gbps": 1.0, "curve": [[8, -1.0]]},
        {"busbw_gbps": 1.0, "curve": [[8, float("inf")]]},
        {"busbw_gbps": True, "curve": []},
        {"busbw_gbps": 1.0, "curve": [[0, 1.0]]},
        {"busbw_gbps": 1.0, "curve": [[8]]},
        {"busbw_gbps": 1.0, "curve": "8:1"},
    ]
    checks = reports.checks_from_data({"validate_nccl": [
        {"check": "nccl", "node": f"n{i}", "status": "pass", "simulated": "maybe", "measurements": m} for i, m in enumerate(bad)
    ]})
    assert [(c.status, c.simulated, c.measurements) for c in checks] == [("pass", False, {})] * len(bad)
    dcgm = reports.checks_from_data({"validate_dcgm": [
        {"check": "dcgm", "node": "a", "status": "pass", "measurements": {"level": 3, "tests": {"pcie": {"0": "exploded"}}}},
        {"check": "dcgm", "node": "b", "status": "pass", "measurements": {"level": "3", "tests": {"pcie": {"1": "PASS", "0": "warn"}}}},
    ]})
    assert dcgm[0].measurements == {}
    assert dcgm[1].measurements == {"level": 3, "tests": {"pcie": {"0": "warn", "1": "pass"}}}
    burnin = reports.checks_from_data({"validate_burnin": [
        {"check": "burnin", "node": "a", "status": "pass", "measurements": {"gpus": [{"index": 0, "tflops": 1.0}]}},
        {"check": "burnin", "node": "b", "status": "pass", "measurements": {"gpus": [
            {"index": 1, "tflops": None, "peak_tflops": 989.4, "mem_bw_gbps": 10, "peak_mem_bw_gbps": 20, "throttle": ["hw"]}]}},
    ]})
    assert burnin[0].measurements == {}  # no peak
    assert burnin[1].measurements["gpus"][0] == {"index": 1, "tflops": None, "peak_tflops": 989.4, "mem_bw_gbps": 10.0,
                                                 "peak_mem_bw_gbps": 20.0, "throttle": ["hw"]}
    # measurements of a check without a known shape are not carried
    (other,) = reports.checks_from_data({"validate_gpus": [{"check": "gpus", "node": "a", "status": "pass", "measurements": {"x": 1}}]})
    assert other.measurements == {}


def test_each_nodes_nccl_version_is_the_one_its_nccl_run_loaded():
    data = json.loads(json.dumps(SIMULATED_DATA))
    data["validate_nccl"][0]["measurements"]["nccl_version"] = "2.28.3+cuda13.0"
    data["validate_nccl"].append({"check": "nccl", "node": "gpu09", "status": "fail",
                                  "measurements": {"busbw_gbps": 1, "curve": [], "nccl_version": "2.0"}})
    versions = reports.report_from_run(run_result(data)).versions
    assert versions["nodes"] == {"gpu01": {"driver": "535.104.05", "cuda": "12.2", "nccl": "2.28.3+cuda13.0"}}


def test_versions_missing_or_malformed_are_none():
    assert reports.report_from_run(run_result(NA_DATA)).versions == {"slurm": None, "nodes": {}}
    odd = reports.versions_from_data({"slurm": {"v": 1}, "nodes": {"gpu01": "535", "gpu02": {"driver": 535, "cuda": ""}}})
    assert odd == {"slurm": None, "nodes": {"gpu01": {"driver": None, "cuda": None, "nccl": None},
                                             "gpu02": {"driver": "535", "cuda": None, "nccl": None}}}


def test_json_carries_simulated_measurements_and_versions():
    data = json.loads(json.dumps(reports.report_from_run(run_result(SIMULATED_DATA)).as_dict(), allow_nan=False))
    assert data["simulated"] is True and data["versions"]["slurm"] == "22.05.8"
    nccl = next(c for c in data["checks"] if c["check"] == "nccl")
    assert nccl["simulated"] is True and nccl["measurements"]["threshold_gbps"] == 300.0
    assert json.loads(json.dumps(reports.report_from_run(run_result(NA_DATA)).as_dict()))["simulated"] is False


def test_junit_marks_simulated_results_and_carries_versions():
    suite = ET.fromstring(reports.to_junit(reports.report_from_run(run_result(SIMULATED_DATA)))).find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["simulated"] == "true" and properties["version.slurm"] == "22.05.8"
    assert properties["version.gpu01.driver"] == "535.104.05" and properties["version.gpu01.nccl"] == "unknown"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert cases["nccl[gpu01]"].find("properties/property[@name='simulated']").get("value") == "true"
    assert cases["nodes[gpu01]"].find("properties") is None
    real = ET.fromstring(reports.to_junit(reports.report_from_run(run_result(NA_DATA)))).find("testsuite")
    assert "simulated" not in {p.get("name") for p in real.find("properties")}


def test_table_marks_simulated_results():
    out = io.StringIO()
    reports.print_table(reports.report_from_run(run_result(SIMULATED_DATA)), console=Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    row = next(line for line in text.splitlines() if "nccl" in line)
    assert "[simulated] busbw 370 GB/s" in row
    assert not any("[simulated]" in line for line in text.splitlines() if "nodes" in line)
    assert "1 result is [simulated]" in text


def test_drained_nodes_are_carried_and_never_read_as_a_check():
    drained = [{"node": "gpu02", "reason": "deepops validate nccl: busbw 12 GB/s < 360"}, "junk", {"reason": "no node"}]
    report = reports.report_from_run(run_result({**DATA, "validate_drained": drained}))
    assert report.drained == [{"node": "gpu02", "reason": "deepops validate nccl: busbw 12 GB/s < 360"}]
    assert "drained" not in {check.check for check in report.checks}
    assert report.as_dict()["drained"] == report.drained
    out = io.StringIO()
    reports.print_table(report, console=Console(file=out, width=200, color_system=None))
    assert "drained gpu02: deepops validate nccl: busbw 12 GB/s < 360" in out.getvalue()
