"""dcgmi diag -j parsing on the recorded outputs, and the recorded dcgm and burnin results.

Recorded: the DCGM 3.1 level-1 output of NVIDIA/DCGM's own test data, and the DCGM 4 "diagnostic"
test published in NVIDIA/DCGM issue #215 (a fragment: the tests place it in the document shape of
NVIDIA/DCGM's dcgm_diag_schema.json). Documents built here for shapes no recording was found of
(failures, throttling, memory bandwidth) follow that schema and are marked as built.
"""

from __future__ import annotations

import json

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import dcgm_diag as dcgm
from gpu_fixtures import FIXTURES

from deepops_py import reports

LEVEL1 = "dcgmi-diag-r1-dcgm3.1-x8-pass-dcgm-jsonresulttests.txt"
LEVEL3_FRAGMENT = "dcgmi-diag-r3-dcgm4-diagnostic-test-fragment-dcgm-issue215.txt"
H100 = "NVIDIA H100 80GB HBM3"


def level3_document(*extra_tests: dict) -> str:
    """The recorded DCGM 4 test, in the document it came from (plus any tests built here)."""
    test = json.loads((FIXTURES / LEVEL3_FRAGMENT).read_text().strip().rstrip(","))
    tests = [test, *extra_tests]
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": tests}]},
                       "metadata": {"version": "4.1.1", "Driver Version Detected": "570.86.15"}})


def gpu_result(gpu: int, status: str, **extra) -> dict:
    return {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status, **extra}


# --------------------------------------------------------------------------
# the recorded outputs


def test_dcgm31_level1_with_its_quirks():
    run = dcgm.parse_diag((FIXTURES / LEVEL1).read_text())  # "WARNING" line first, nulls, PASS
    assert run["version"] == "3.1.0" and run["gpus"] == list(range(8))
    assert [test["name"] for test in run["tests"]][:2] == ["Denylist", "NVML Library"]
    assert len(run["tests"]) == 10 and {test["status"] for test in run["tests"]} == {"pass"}
    assert run["by_test"]["Denylist"] == {str(gpu): "pass" for gpu in range(8)}  # "0,...,7" in one result
    assert run["by_test"]["software"]["7"] == "pass"  # one result per GPU, integer ids
    assert run["tests"][-1]["category"] == "Custom"
    assert run["ok"] and run["failures"] == [] and not run["simulated"]


def test_dcgm4_diagnostic_figures():
    run = dcgm.parse_diag(level3_document())
    assert (run["version"], run["driver"]) == ("4.1.1", "570.86.15")
    assert run["gpus"] == list(range(8)) and run["tests"][0]["status"] == "pass"
    # DCGM 4 dropped the info of GPUs 2-7 (the bug): only 0 and 1 have figures
    assert run["figures"] == {gpu: {"diag_gflops": 859.08, "stress_gflops": None, "mem_bw_gbps": None, "throttle": []}
                              for gpu in (0, 1)}


@pytest.mark.parametrize("text", ["", "Error: Unable to connect to host engine", "{not json", "[1, 2]",
                                  '{"something": "else"}'])
def test_not_a_diag_document_raises(text):
    with pytest.raises(dcgm.DcgmParseError):
        dcgm.parse_diag(text)


def test_simulated_marks():
    text = (FIXTURES / LEVEL1).read_text()
    assert dcgm.parse_diag(dcgm.SIMULATED_MARKER + " stand-in\n" + text)["simulated"]
    document = json.loads(level3_document()) | {"deepops": {"simulated": True}}
    assert dcgm.parse_diag(json.dumps(document))["simulated"]


# --------------------------------------------------------------------------
# statuses (built documents: DCGM 4 schema shape)


def test_failed_gpu_and_test_are_named():
    failing = {"name": "memory", "results": [gpu_result(0, "Pass"), gpu_result(
        1, "Fail", warnings=[{"error_category": 4, "error_id": 84, "error_severity": 2,
                              "warning": "Uncorrectable ECC error detected on GPU 1"}])],
        "test_summary": {"status": "Fail"}}
    run = dcgm.parse_diag(level3_document(failing))
    assert run["failures"] == [{"test": "memory", "gpu": 1, "message": "Uncorrectable ECC error detected on GPU 1"}]
    entry = dcgm.dcgm_result("gpu01", run, level=3, seconds=1.5)
    assert entry["status"] == "fail" and entry["check"] == "dcgm"
    assert entry["detail"] == "dcgmi diag -r 3: GPU 1 memory: Uncorrectable ECC error detected on GPU 1"
    assert entry["measurements"]["tests"]["memory"] == {"0": "pass", "1": "fail"}


@pytest.mark.parametrize(("status", "expected"), [
    ("Pass", "pass"), ("PASS", "pass"), ("Warn", "warn"), ("Skip", "skip"), ("Not Run", "skip"),
    ("Fail", "fail"), ("Inconclusive", "fail"), ("", "fail"),
])
def test_statuses_never_turn_unknown_into_pass(status, expected):
    run = dcgm.parse_diag(json.dumps({"DCGM Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "software", "results": [gpu_result(0, status)]}]}]}}))
    assert run["by_test"]["software"] == {"0": expected}


def test_result_without_gpu_applies_to_every_gpu_and_other_entities_are_left_out():
    document = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "Denylist", "results": [{"status": "Warn", "warnings": "Blacklisted driver"}]},
        {"name": "software", "results": [{"gpu_id": "0", "status": "Pass"}, {"gpu_id": "1", "status": "Pass"},
                                         {"entity_group": "CPU", "entity_id": 0, "status": "Fail"}]}]}]}}
    run = dcgm.parse_diag(json.dumps(document))
    assert run["by_test"] == {"Denylist": {"0": "warn", "1": "warn"}, "software": {"0": "pass", "1": "pass"}}
    entry = dcgm.dcgm_result("gpu01", run)
    assert entry["status"] == "pass" and entry["detail"].endswith("warnings: Denylist")


def test_all_skipped_is_not_applicable_and_runtime_error_fails():
    skipped = {"DCGM Diagnostic": {"test_categories": [{"category": "Stress", "tests": [
        {"name": "targeted_stress", "results": [gpu_result(0, "Skip")]}]}]}}
    assert dcgm.dcgm_result("n", dcgm.parse_diag(json.dumps(skipped)))["status"] == "not_applicable"
    broken = {"DCGM Diagnostic": {"runtime_error": "Unable to run diagnostic on unsupported GPU 0.",
                                  "test_categories": []}}
    entry = dcgm.dcgm_result("n", dcgm.parse_diag(json.dumps(broken)))
    assert entry["status"] == "fail" and "unsupported GPU 0" in entry["detail"]
    assert dcgm.dcgm_result("n", None, error="dcgmi: command not found")["status"] == "fail"


def test_dcgm_measurements_have_the_reports_shape():
    entry = dcgm.dcgm_result("gpu01", dcgm.parse_diag((FIXTURES / LEVEL1).read_text()))
    assert entry["status"] == "pass" and entry["measurements"]["level"] == 1
    assert reports._measurements("dcgm", entry["measurements"]) == entry["measurements"]


# --------------------------------------------------------------------------
# burn-in


def test_burnin_passes_the_recorded_level3_run():
    entry = dcgm.burnin_result("gpu01", dcgm.parse_diag(level3_document()), H100)
    assert entry["status"] == "pass" and entry["check"] == "burnin"
    gpus = entry["measurements"]["gpus"]
    assert len(gpus) == 8 and gpus[0] == {"index": 0, "tflops": None, "peak_tflops": 989.5, "mem_bw_gbps": None,
                                          "peak_mem_bw_gbps": 3350.0, "throttle": []}
    assert reports._measurements("burnin", entry["measurements"]) == entry["measurements"]


def test_burnin_fails_on_slow_tensor_throughput_and_memory_bandwidth():
    memory = {"name": "memory_bandwidth", "results": [
        gpu_result(0, "Pass", info=["GPU 0 DRAM bandwidth 3100.50 GB/s"]),
        gpu_result(1, "Pass", info=["GPU 1 DRAM bandwidth 2.1 TB/s"])]}
    run = dcgm.parse_diag(level3_document(memory))
    entry = dcgm.burnin_result("gpu01", run, [H100] * 8, tflops={0: 900.0, "1": 700.0})
    assert entry["status"] == "fail"
    assert entry["detail"] == ("GPU 1 700 TFLOPS < 80% of 989.5; GPU 1 memory 2100 GB/s < 85% of 3350")
    by_index = {gpu["index"]: gpu for gpu in entry["measurements"]["gpus"]}
    assert (by_index[0]["tflops"], by_index[0]["mem_bw_gbps"]) == (900.0, 3100.5)


def test_burnin_fails_on_thermal_throttling_and_failed_stress_test():
    stress = {"name": "targeted_stress", "results": [
        gpu_result(0, "Pass", info=["GPU 0 relative stress level\t24000"]),
        gpu_result(3, "Fail", warnings=[{"error_id": 17, "warning":
                                         "Clocks are being throttled for GPU 3 because of clock throttling starting "
                                         "12.0 seconds into the test. 'HW Thermal Slowdown'"}])]}
    run = dcgm.parse_diag(level3_document(stress))
    assert run["figures"][0]["stress_gflops"] == 24000.0 and run["figures"][3]["throttle"] == ["thermal"]
    entry = dcgm.burnin_result("gpu01", run, {i: H100 for i in range(8)})
    assert entry["status"] == "fail"
    assert entry["detail"].startswith("GPU 3 targeted_stress: Clocks are being throttled for GPU 3")
    assert entry["detail"].endswith("GPU 3 thermal throttling")


def test_burnin_needs_a_stress_test_and_known_peaks():
    level1 = dcgm.parse_diag((FIXTURES / LEVEL1).read_text())
    assert "needs -r 3 or 4" in dcgm.burnin_result("n", level1, H100)["detail"]
    unknown = dcgm.burnin_result("n", dcgm.parse_diag(level3_document()), "NVIDIA GeForce RTX 5090")
    assert unknown["status"] == "not_applicable" and "no datasheet peaks" in unknown["detail"]
    assert unknown["measurements"] == {}


def test_proftester_tensor_lines():
    """Lines as NVIDIA/DCGM issue #239 describes older releases printing them (built, none was recorded)."""
    text = ("Worker 0:0[1004]: TensorEngineActive: target 1.000, dcgm 0.981 (801234.5 gflops)\n"
            "Worker 0:0[1004]: TensorEngineActive: target 1.000, dcgm 0.990 (812000.0 gflops)\n"
            "Worker 1:0[1004]: TensorEngineActive: target 1.000, dcgm 0.990 (640000.0 gflops)\n"
            "Worker 0:0[1007]: Fp32EngineActive: target max, dcgm 0 (41000.0 gflops)\n"
            "Worker 0:0[1007]: Fp32EngineActive: target max, dcgm 0\n")
    assert dcgm.parse_proftester(text) == {0: 812.0, 1: 640.0}
