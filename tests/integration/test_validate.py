"""deepops validate on the deployed virtual cluster: it passes, and it can fail."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.deepops.cluster.plugins.module_utils.validation import CHECK_NAMES, SKIPPABLE_CHECKS


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.deepops("deploy", timeout=3600, check=True)  # idempotent: cheap when an earlier test deployed
    return cluster


def _computes(cluster) -> list[str]:
    nodes = cluster.deepops("virtual", "status", "--json", check=True).json()["nodes"]
    return sorted(node["name"] for node in nodes if node["role"] == "compute")


def _leftover_jobs(cluster) -> str:
    return cluster.ssh("ctl01", "squeue --noheader --name=deepops-validate --format=%i").stdout.strip()


def test_validate_passes_on_a_deployed_cluster(deployed, tmp_path):
    junit = tmp_path / "validate.xml"
    result = deployed.deepops("validate", "--json", "--junit", str(junit), timeout=1200)
    data = result.json()
    failed = [check for check in data["checks"] if check["status"] != "pass"]
    assert result.rc == 0 and not failed, failed or result.stderr
    assert data["ok"] and data["summary"]["failed"] == 0 and data["summary"]["not_applicable"] == 0
    # every check ran, in the list's order: the virtual cluster's nodes all have (simulated) GPUs
    assert list(dict.fromkeys(check["check"] for check in data["checks"])) == list(CHECK_NAMES)
    computes = _computes(deployed)
    assert sorted(c["node"] for c in data["checks"] if c["check"] == "gpus") == computes
    assert sorted(c["node"] for c in data["checks"] if c["check"] == "nodes") == computes
    preemption = next(c for c in data["checks"] if c["check"] == "preemption")
    assert "requeued (Restarts=" in preemption["detail"]

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == "deepops-validate"
    assert suite.get("failures") == "0" and suite.get("skipped") == "0" and int(suite.get("tests")) == len(data["checks"])
    assert not _leftover_jobs(deployed), "validation left jobs behind"
    # the run is in the history, and its results with it
    shown = deployed.deepops("runs", "show", data["run_id"], "--json", check=True).json()
    assert shown["data"]["validate_preemption"][0]["status"] == "pass"


def test_validate_fails_on_an_impossible_preemption_bound(deployed, tmp_path):
    junit = tmp_path / "validate.xml"
    skipped = [name for name in SKIPPABLE_CHECKS if name != "preemption"]
    result = deployed.deepops(
        "validate", "--json", "--junit", str(junit), *(arg for name in skipped for arg in ("--skip", name)),
        "-e", "validate_preemption_bound=0", timeout=900,
    )
    assert result.rc == 1, result.stdout + result.stderr
    data = result.json()
    assert not data["ok"] and data["summary"]["skipped"] == skipped
    assert {check["check"] for check in data["checks"]} == {"nodes", "preemption"}
    [failed] = [check for check in data["checks"] if check["status"] != "pass"]
    assert failed["status"] == "fail" and not failed["passed"]
    assert failed["check"] == "preemption" and "bound 0 s" in failed["detail"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    assert suite.find("testcase/failure").get("message") == failed["detail"]
    assert not _leftover_jobs(deployed), "a failed validation must still cancel its jobs"
