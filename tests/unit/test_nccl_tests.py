"""all_reduce_perf parsing on every recorded output, pair testing, and the recorded nccl results.

The recorded outputs and their quirks are described in deepops_py/virtual/fixtures/SOURCES.md.
"""

from __future__ import annotations

import itertools

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import nccl_tests as nccl
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import gpu_facts
from gpu_fixtures import FIXTURES

from deepops_py import reports
from deepops_py.virtual import gpus
from deepops_py.virtual.gpus import GpuSpec

A100_X8 = "nccl-all-reduce-a100-x8-superbench.txt"
H100_2X8 = "nccl-all-reduce-h100-2x8-p5-awsome.txt"
PCIE_X4 = "nccl-all-reduce-rtx5090-x4-pcie-nccl-tests-issue287.txt"
GH200_WRONG = "nccl-all-reduce-gh200-2x1-wrong-nccl-tests-issue369.txt"
GIB = 1 << 30


def parsed(name: str) -> dict:
    return nccl.parse_all_reduce((FIXTURES / name).read_text())


def rendered_facts(model: str, count: int) -> dict:
    spec = GpuSpec(model, count)
    return gpu_facts(gpus.render_query_xml(spec, "gpu01"), gpus.render_topology(spec))


# --------------------------------------------------------------------------
# parsing the recorded outputs


def test_old_layout_a100_without_correctness_check():
    run = parsed(A100_X8)
    assert (run["nthread"], run["ngpus"], run["validation"]) == (1, 8, 0)
    assert [d["device"] for d in run["devices"]] == list(range(8))
    assert run["hosts"] == ["localhost"] and run["gpu_types"] == ["a100"]
    assert len(run["rows"]) == 34 and run["rows"][0]["root"] is None  # no root column
    assert run["rows"][-1]["out_of_place"] == {"time_us": 63896.0, "algbw": 134.44, "busbw": 235.26, "wrong": None}
    assert (run["largest_size"], run["busbw_gbps"], run["avg_busbw_gbps"]) == (8 * GIB, 235.26, 68.4048)
    assert run["curve"][0] == [4, 0.0]  # the two size-0 rows are left out of the curve
    assert len(run["curve"]) == 32
    assert run["unvalidated_rows"] == 68 and not run["validated"]
    assert run["ok"] and not run["simulated"]


def test_srun_labelled_h100_rows_without_header():
    run = parsed(H100_2X8)
    assert run["devices"] == [] and run["ngpus"] is None
    assert len(run["rows"]) == 32 and run["rows"][0]["root"] == -1
    # the better of out-of-place (487.09) and in-place (487.26) at the largest size
    assert (run["largest_size"], run["busbw_gbps"]) == (16 * GIB, 487.26)
    assert dict(map(tuple, run["curve"]))[8 * GIB] == 479.28
    assert run["ok"] and run["validated"] and run["wrong"] == 0 and run["oob_ok"] is None


def test_pcie_run():
    run = parsed(PCIE_X4)
    assert run["hosts"] == ["GENOA-01"] and len(run["devices"]) == 4
    assert run["devices"][3] == {"rank": 3, "host": "GENOA-01", "device": 3, "bus": "0x61",
                                 "model": "NVIDIA GeForce RTX 5090", "gpu_type": "nvidia_geforce_rtx_5090"}
    assert (run["largest_size"], run["busbw_gbps"], run["avg_busbw_gbps"]) == (128 << 20, 27.28, 9.09703)
    assert run["ok"] and run["validated"]


def test_failing_run_with_wrong_results():
    run = parsed(GH200_WRONG)
    assert run["hosts"] == ["gpu-1-1", "gpu-1-7"] and run["gpu_types"] == ["gh200"]
    wrong_row = next(row for row in run["rows"] if row["size"] == 1 << 20)
    assert (wrong_row["out_of_place"]["wrong"], wrong_row["in_place"]["wrong"]) == (96, 32)
    assert run["wrong"] == 128 and (run["out_of_bounds"], run["oob_ok"]) == (4, False)
    assert run["failures"] == [".. gpu-1-1 pid 662195: Test failure common.cu:1189",
                               ".. gpu-1-7 pid 2448661: Test failure common.cu:1189"]
    assert not run["ok"]


def test_open_mpi_tagged_output():
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in (FIXTURES / PCIE_X4).read_text().splitlines())
    assert nccl.parse_all_reduce(tagged)["busbw_gbps"] == 27.28


def test_out_of_place_only_and_float_error_columns():
    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
            "17179869184    4294967296     float     sum      -1  62123.4  276.55  483.96      0\n"
            "     8388608       2097152   float    1248.3    6.72    6.72  4.1943e+06   1189.1    7.05    7.05  0e+00\n")
    run = nccl.parse_all_reduce(text)
    assert [row["in_place"] is None for row in run["rows"]] == [True, False]
    assert run["wrong"] == 1 and not run["ok"]  # the old layout's error column: nonzero is one wrong row


def test_nccl_version_is_read_from_nccl_debug_version_lines():
    recorded = (FIXTURES / PCIE_X4).read_text()
    assert parsed(PCIE_X4)["nccl_version"] is None  # the captures were made without NCCL_DEBUG=VERSION
    bare = nccl.parse_all_reduce("NCCL version 2.21.5+cuda12.4\n" + recorded)
    prefixed = nccl.parse_all_reduce(recorded + "gpu01:4242:4242 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n")
    assert (bare["nccl_version"], prefixed["nccl_version"]) == ("2.21.5+cuda12.4", "2.28.3+cuda13.0")
    assert bare["busbw_gbps"] == parsed(PCIE_X4)["busbw_gbps"]  # the line is not a row
    result = nccl.node_result("gpu01", bare, rendered_facts("h100", 4))
    assert result["measurements"]["nccl_version"] == "2.21.5+cuda12.4"


def test_simulated_marker_is_detected():
    text = nccl.SIMULATED_MARKER + " stand-in\n" + (FIXTURES / PCIE_X4).read_text()
    assert nccl.parse_all_reduce(text)["simulated"]


@pytest.mark.parametrize("text", ["", "bash: all_reduce_perf: command not found", None])
def test_no_result_raises(text):
    with pytest.raises(nccl.NcclParseError, match="no all_reduce_perf result"):
        nccl.parse_all_reduce(text)


# --------------------------------------------------------------------------
# pair testing


@pytest.mark.parametrize("count", range(0, 10))
def test_pairs_cover_every_node_and_waves_are_disjoint(count):
    nodes = [f"n{i}" for i in range(count)]
    pairs = nccl.plan_pairs(nodes)
    assert {node for pair in pairs for node in pair} == (set(nodes) if count >= 2 else set())
    assert all(a != b for a, b in pairs)
    waves = nccl.pair_waves(pairs)
    assert sorted(pair for wave in waves for pair in wave) == sorted(pairs)
    for wave in waves:
        members = [node for pair in wave for node in pair]
        assert len(members) == len(set(members))
    assert len(waves) <= 2


def run_pairs(pairs, bad):
    return [{"pair": list(pair), "ok": not (set(pair) & bad)} for pair in pairs]


def isolate(nodes, bad, known_bad=(), rounds=4):
    """What the role does: round 1 on planned pairs, then next_pairs until none are left."""
    results = run_pairs(nccl.plan_pairs(nodes), bad)
    verdict = nccl.isolate_faulty(nodes, results, known_bad)
    for _ in range(rounds):
        if not verdict["next_pairs"]:
            break
        results += run_pairs(verdict["next_pairs"], bad)
        verdict = nccl.isolate_faulty(nodes, results, known_bad)
    return verdict


@pytest.mark.parametrize(("count", "position"), [(n, p) for n in range(3, 10) for p in range(n)])
def test_one_bad_node_is_found(count, position):
    nodes = [f"gpu{i:02d}" for i in range(count)]
    verdict = isolate(nodes, {nodes[position]})
    assert verdict["faulty"] == [nodes[position]]
    assert verdict["conclusive"] and verdict["undecided"] == []
    assert nodes[position] in verdict["summary"]


@pytest.mark.parametrize("position", [0, 1])
def test_one_bad_node_of_two_needs_its_own_run(position):
    nodes = ["gpu01", "gpu02"]
    blind = isolate(nodes, {nodes[position]})
    assert not blind["conclusive"] and blind["faulty"] == [] and set(blind["undecided"]) == set(nodes)
    verdict = isolate(nodes, {nodes[position]}, known_bad=[nodes[position]])
    assert verdict["faulty"] == [nodes[position]] and verdict["conclusive"]


@pytest.mark.parametrize(("count", "bad"), [
    (n, pair) for n in range(4, 10) for pair in itertools.combinations(range(n), 2)
])
def test_two_bad_nodes_are_found(count, bad):
    nodes = [f"n{i}" for i in range(count)]
    verdict = isolate(nodes, {nodes[i] for i in bad})
    assert verdict["faulty"] == [nodes[i] for i in bad]
    assert verdict["conclusive"]


def test_all_good_nodes():
    verdict = isolate([f"n{i}" for i in range(5)], set())
    assert verdict["faulty"] == [] and verdict["conclusive"] and verdict["next_pairs"] == []
    assert verdict["summary"] == "no node at fault in the pair tests"


def test_second_round_pairs_suspects_with_known_good_nodes():
    results = [("a", "b", False), ("c", "d", True), ("e", "f", True)]
    verdict = nccl.isolate_faulty("abcdef", results)
    assert verdict["undecided"] == ["a", "b"] and verdict["good"] == ["c", "d", "e", "f"]
    assert verdict["next_pairs"] == [("a", "c"), ("b", "d")]


def test_pair_outcomes_flag_wrong_slow_and_missing_runs():
    good = {"ok": True, "busbw_gbps": 40.0}
    entries = [(("a", "b"), good), (("c", "d"), good), (("e", "f"), {"ok": True, "busbw_gbps": 12.0}),
               (("g", "h"), {"ok": False, "busbw_gbps": 40.0, "wrong": 3}), (("i", "j"), None)]
    outcomes = nccl.pair_outcomes(entries)
    assert [o["ok"] for o in outcomes] == [True, True, False, False, False]
    assert "median" in outcomes[2]["why"] and outcomes[3]["why"] == "#wrong 3" and outcomes[4]["why"] == "no result"
    with_mark = nccl.pair_outcomes(entries, threshold_gbps=45.0)
    assert not with_mark[0]["ok"] and "< 45" in with_mark[0]["why"]


# --------------------------------------------------------------------------
# recorded results


def test_node_result_passes_over_the_threshold():
    entry = nccl.node_result("gpu01", parsed(H100_2X8), rendered_facts("h100", 8), seconds=12.345)
    assert entry["status"] == "pass" and entry["passed"]
    assert entry["detail"] == "busbw 487.26 GB/s at 16 GiB >= 360 (h100, nvswitch)"
    assert entry["seconds"] == 12.35 and entry["simulated"] is False
    measurements = entry["measurements"]
    assert measurements["busbw_gbps"] == 487.26 and measurements["threshold_gbps"] == 360.0
    assert (measurements["model"], measurements["interconnect"]) == ("h100", "nvswitch")
    assert measurements["curve"][-1] == [16 * GIB, 487.26]
    assert reports._measurements("nccl", measurements)["busbw_gbps"] == 487.26  # the shape the reports read


def test_node_result_fails_under_an_overridden_threshold():
    entry = nccl.node_result("gpu01", parsed(PCIE_X4), rendered_facts("l40s", 4), {"l40s/pcie": 30})
    assert entry["status"] == "fail"
    assert entry["detail"] == "busbw 27.28 GB/s at 128 MiB < 30 (l40s, pcie)"


def test_node_result_without_a_threshold_is_not_applicable():
    entry = nccl.node_result("gpu01", parsed(PCIE_X4), {"present": True, "gpu_count": 4, "types": ["l40s"]})
    assert entry["status"] == "not_applicable" and not entry["passed"]
    assert "topology unknown" in entry["detail"]
    entry = nccl.node_result("gpu01", parsed(PCIE_X4), rendered_facts("l40s", 4) | {"types": ["rtx5090"]})
    assert entry["status"] == "not_applicable" and "no NCCL threshold for rtx5090 on pcie" in entry["detail"]


def test_node_result_fails_without_correctness_check_or_with_wrong_results():
    unchecked = nccl.node_result("gpu01", parsed(A100_X8), rendered_facts("a100", 8))
    assert unchecked["status"] == "fail" and "correctness check" in unchecked["detail"]
    wrong = nccl.node_result("gpu01", parsed(GH200_WRONG), {})
    assert wrong["status"] == "fail" and wrong["detail"] == "all_reduce_perf failed: #wrong 128"
    missing = nccl.node_result("gpu01", None, error="srun: error: Unable to create step")
    assert missing["status"] == "fail" and "Unable to create step" in missing["detail"]
    assert missing["measurements"] == {}


def test_cluster_result_names_the_node_at_fault():
    isolation = nccl.isolate_faulty(["a", "b", "c", "d"], [("a", "b", True), ("c", "d", False),
                                                           ("c", "a", True), ("d", "b", False)])
    entry = nccl.cluster_result(["a", "b", "c", "d"], parsed(GH200_WRONG), isolation)
    assert entry["node"] == "all" and entry["status"] == "fail"
    assert entry["detail"] == "4 nodes: all_reduce_perf failed: #wrong 128; at fault: d"


def test_cluster_result_pass_and_threshold():
    run = parsed(H100_2X8)
    passed = nccl.cluster_result(["n1", "n2"], run)
    assert passed["status"] == "pass" and "no cross-node threshold" in passed["detail"]
    assert passed["measurements"]["interconnect"] == "internode"
    slow = nccl.cluster_result(["n1", "n2"], run, threshold_gbps=500)
    assert slow["status"] == "fail" and "487.26 GB/s at 16 GiB < 500; pair tests not run" in slow["detail"]
    assert nccl.cluster_result(["n1"], run)["status"] == "not_applicable"
