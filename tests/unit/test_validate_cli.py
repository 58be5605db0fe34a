"""deepops validate through click's CliRunner, with the runner replaced: request, exit codes, outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from deepops_py import runner
from deepops_py.cli import main
from deepops_py.run_results import RunResult

from ansible_collections.deepops.cluster.plugins.module_utils.validation import SKIPPABLE_CHECKS

pytestmark = pytest.mark.usefixtures("test_specs")

PASSING = {
    "validate_nodes": [{"check": "nodes", "node": "gpu01", "passed": True, "detail": "idle", "seconds": 0}],
    "validate_preemption": [{"check": "preemption", "node": "gpu01", "passed": True, "detail": "ok", "seconds": 9.5}],
}


class FakeRunner:
    def __init__(self, data=None, status="ok"):
        self.data, self.status, self.requests = data, status, []

    def __call__(self, request, json_output=False, **kwargs):
        self.requests.append(request)
        return RunResult(
            run_id="r1", command=request.command, playbook=request.playbook, inventory=str(request.inventory),
            start="s", artifacts="/tmp/a", status=self.status, data=self.data or {},
        )


@pytest.fixture
def fake(monkeypatch):
    def install(data=None, status="ok"):
        runs = FakeRunner(data, status)
        monkeypatch.setattr(runner, "run_playbook", runs)
        return runs

    return install


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_passing_run_exits_0_with_json(write_inventory, fake):
    runs = fake(PASSING)
    result = invoke("validate", "-i", str(write_inventory()), "--json", "-e", "validate_preemption_bound=90")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["run_id"] == "r1" and data["summary"]["checks"] == 2
    (request,) = runs.requests
    assert request.playbook == "validate.yml" and request.command == "validate" and request.limit is None
    assert request.extra_vars == {"validate_preemption_bound": 90, "validate_skip": []}


def test_failed_check_exits_1_and_junit_is_written(write_inventory, fake, tmp_path):
    data = {**PASSING, "validate_gpus": [{"check": "gpus", "node": "gpu02", "passed": False, "detail": "rc=1", "seconds": 1}]}
    fake(data)
    junit = tmp_path / "out" / "validate.xml"
    junit.parent.mkdir()
    result = invoke("validate", "-i", str(write_inventory()), "--junit", str(junit))
    assert result.exit_code == 1
    assert "FAIL" in result.stdout and "gpu02" in result.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1" and suite.get("tests") == "3"


def test_not_applicable_checks_exit_0_and_show_in_json_and_junit(write_inventory, fake, tmp_path):
    data = {**PASSING, "validate_gpus": [
        {"check": "gpus", "node": "gpu01", "status": "not_applicable", "passed": False, "detail": "no GPUs in Slurm's GRES ((null))"},
    ]}
    fake(data)
    junit = tmp_path / "validate.xml"
    result = invoke("validate", "-i", str(write_inventory()), "--json", "--junit", str(junit))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["ok"] and out["summary"]["not_applicable"] == 1 and out["summary"]["failed"] == 0
    assert [c["status"] for c in out["checks"]] == ["pass", "not_applicable", "pass"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    assert suite.find("testcase/skipped").get("message") == "no GPUs in Slurm's GRES ((null))"


def test_not_applicable_shows_in_the_table(write_inventory, fake):
    fake({**PASSING, "validate_sacct": [{"check": "sacct", "node": "", "status": "not_applicable", "detail": "no compute node has GPUs"}]})
    result = invoke("validate", "-i", str(write_inventory()))
    assert result.exit_code == 0, result.output
    assert "n/a" in result.stdout and "no compute node has GPUs" in result.stdout and "FAIL" not in result.stdout


def test_failed_run_exits_1_even_with_passing_checks(write_inventory, fake):
    fake(PASSING, status="failed")
    result = invoke("validate", "-i", str(write_inventory()), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["checks"][-1]["check"] == "playbook"


def test_skip_is_passed_as_validate_skip(write_inventory, fake):
    runs = fake(PASSING)
    result = invoke("validate", "-i", str(write_inventory()), "--skip", "preemption", "--skip", "sacct", "--json")
    assert result.exit_code == 0, result.output
    assert runs.requests[0].extra_vars["validate_skip"] == ["preemption", "sacct"]
    # burnin is opt-in: left out unless --burn-in asks for it
    assert json.loads(result.stdout)["summary"]["skipped"] == ["burnin", "sacct", "preemption"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--skip", "nodes"], ["--skip", "nodes", *SKIPPABLE_CHECKS]),
        (["--skip", "bogus"], ["bogus"]),
        (["-e", "not a var"], ["not a var"]),
        (["--junit", "/nonexistent-dir/x.xml"], ["does not exist"]),
        (["--report", "/nonexistent-dir/report.html"], ["--report", "/nonexistent-dir", "does not exist"]),
        (["--report", "."], ["--report", "is a directory"]),
        (["--junit", "same.out", "--report", "same.out"], ["--report", "--junit writes the same file"]),
    ],
)
def test_bad_options_exit_2_and_run_nothing(write_inventory, fake, args, words):
    runs = fake(PASSING)
    result = invoke("validate", "-i", str(write_inventory()), *args)
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.output
    assert runs.requests == []


def test_invalid_inventory_exits_2_and_runs_nothing(write_inventory, fake):
    runs = fake(PASSING)
    result = invoke("validate", "-i", str(write_inventory("all:\n  children:\n    slurm_compute:\n      hosts:\n        gpu01:\n")))
    assert result.exit_code == 2
    assert "slurm_controller" in result.output
    assert runs.requests == []


SIMULATED_NCCL = {
    "validate_nccl": [{
        "check": "nccl", "node": "gpu01", "status": "fail", "passed": False, "detail": "busbw 10 < 300", "simulated": True,
        "measurements": {"busbw_gbps": 10.0, "threshold_gbps": 300.0, "curve": [[8, 0.1], [1048576, 10.0]],
                         "gpus": 2, "model": "H100", "interconnect": "NVLink"},
    }],
    "validate_versions": {"slurm": "22.05.8", "nodes": {"gpu01": {"driver": "535.104.05"}}},
}


def test_report_is_written_whatever_the_verdict(write_inventory, fake, tmp_path):
    fake({**PASSING, **SIMULATED_NCCL})
    report = tmp_path / "acceptance.html"
    junit = tmp_path / "validate.xml"
    result = invoke("validate", "-i", str(write_inventory()), "--report", str(report), "--junit", str(junit), "--json")
    assert result.exit_code == 1, result.output  # the nccl check failed: the report is written all the same
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "r1" in page and "22.05.8" in page
    assert page.count('data-plot="nccl"') == 1 and 'data-node="gpu01"' in page and 'id="simulated"' in page
    out = json.loads(result.stdout)
    (nccl,) = [check for check in out["checks"] if check["check"] == "nccl"]
    assert out["simulated"] is True and nccl["simulated"] is True and nccl["measurements"]["busbw_gbps"] == 10.0
    assert ET.parse(junit).getroot().find("testsuite/testcase[@name='nccl[gpu01]']/properties/property").get("name") == "simulated"


def test_report_of_a_passing_run(write_inventory, fake, tmp_path):
    fake(PASSING)
    report = tmp_path / "acceptance.html"
    result = invoke("validate", "-i", str(write_inventory()), "--report", str(report))
    assert result.exit_code == 0, result.output
    page = report.read_text(encoding="utf-8")
    assert 'class="verdict pass" id="verdict">PASS<' in page and 'id="simulated"' not in page
    assert "No NCCL bandwidth was measured." in page


def test_report_that_cannot_be_written_is_a_user_error(write_inventory, fake, tmp_path, monkeypatch):
    from pathlib import Path

    fake(PASSING)
    real_write = Path.write_text

    def refuse(self, *args, **kwargs):
        if self.suffix == ".html":
            raise PermissionError(13, "Permission denied")
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refuse)
    result = invoke("validate", "-i", str(write_inventory()), "--report", str(tmp_path / "r.html"))
    assert result.exit_code == 2
    assert "--report" in result.output and "cannot write: Permission denied" in result.output
