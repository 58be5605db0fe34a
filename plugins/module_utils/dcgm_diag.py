"""``dcgmi diag -r N -j`` for ``deepops validate dcgm`` and ``burnin``: the JSON parsed into per-test,
per-GPU verdicts, burn-in figures picked out, and the recorded results built.

The document's shape moved between DCGM releases, and parsing takes all of them:

- 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_ids": "0,1,..." | 7, or "gpu_id": "0", "status": "Pass", "info",
  "warnings"}]}]}], "version"}}``; the one recorded 3.1 output (NVIDIA/DCGM's own
  test data) has ``null`` between tests, ``PASS`` in capitals and a warning line
  before the JSON.
- 4.x: ``{"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group":
  "GPU", "entity_id": 0, "status", "info": [...], "warnings": [{"warning", "error_id",
  ...}]}], "test_summary": {"status"}}]}, "entity_groups": [...], "metadata":
  {"version", "Driver Version Detected"}}`` (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json).

A result without a GPU applies to every GPU of the run. Statuses are read
case-blind; one that is not pass/fail/warn/skip counts as a failure, so a
renamed status never turns a node green.

Burn-in figures come from the tests' info and warning texts: the Diagnostic
test's "GPU 0 calculated at approximately 859.08 gigaflops" (mixed FP64/FP32/
FP16 GEMM, recorded but not the tensor peak), Targeted Stress's "relative
stress level" (gflops), memory bandwidth figures, and clock-throttling
warnings. Dense tensor TFLOPS comparable to the datasheet peak come from
``dcgmproftester`` (``parse_proftester``).

Standard library only, and no Ansible import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import gpu_performance
from ansible_collections.deepops.cluster.plugins.module_utils.validation import (
    FAIL,
    NOT_APPLICABLE,
    PASS,
    result,
)

__all__ = [
    "BURNIN_CHECK",
    "DCGM_CHECK",
    "DEFAULT_LEVEL",
    "SIMULATED_MARKER",
    "STRESS_TESTS",
    "DcgmParseError",
    "burnin_result",
    "dcgm_result",
    "parse_diag",
    "parse_proftester",
]

DCGM_CHECK = "dcgm"
BURNIN_CHECK = "burnin"
DEFAULT_LEVEL = 1  # dcgmi diag -r 1: the quick deployment checks, seconds
SIMULATED_MARKER = "# deepops: SIMULATED"
RESULTS = ("pass", "fail", "warn", "skip")
_STATUS = {
    "pass": "pass", "passed": "pass",
    "fail": "fail", "failed": "fail",
    "warn": "warn", "warning": "warn",
    "skip": "skip", "skipped": "skip", "not run": "skip", "notrun": "skip", "n/a": "skip",
}
# Tests that load the GPUs (levels 3 and 4), by their 3.x and 4.x names, lower-cased.
STRESS_TESTS = frozenset({
    "diagnostic", "targeted stress", "targeted_stress", "targeted power", "targeted_power",
    "memory bandwidth", "memory_bandwidth", "sm stress", "sm_stress", "pulse test", "pulse_test",
    "eud test", "eud", "memtest", "nvbandwidth",
})
_MEMORY_BANDWIDTH_TESTS = frozenset({"memory bandwidth", "memory_bandwidth"})
_DIAG_GFLOPS = re.compile(r"GPU\s+(\d+)\s+calculated at approximately\s+([0-9.]+)\s+gigaflops", re.I)
_STRESS_GFLOPS = re.compile(r"GPU\s+(\d+)\s+relative stress level\s+([0-9.]+)", re.I)
_BANDWIDTH = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(TB/s|GB/s|MB/s)", re.I)
_GPU_IN_TEXT = re.compile(r"\bGPU\s+(\d+)\b", re.I)
# DCGM's clock-throttling wording (DCGM_FR_CLOCK_THROTTLE*, "clocks event" since 4.x)
# and violation counters; the reason is the first word group that names it.
_THROTTLE = re.compile(r"throttl|clocks? event|thermal violation|power violation", re.I)
_THROTTLE_REASONS = (("thermal", re.compile(r"thermal|temperature|slowdown", re.I)),
                     ("power", re.compile(r"power", re.I)))
_PROFTESTER = re.compile(r"Worker\s+(\d+):(\d+)\[(\d+)\].*?\(\s*([0-9.]+)\s*gflops\)", re.I)
TENSOR_ACTIVE_FIELD = 1004  # dcgmproftester -t 1004: tensor pipes (FP16) active


class DcgmParseError(ValueError):
    """The output holds no ``dcgmi diag`` JSON document; the message says what was there instead."""


# --------------------------------------------------------------------------
# parsing


def parse_diag(text: Any) -> dict[str, Any]:
    """``dcgmi diag -j`` output -> ``{"version", "driver", "simulated", "runtime_error", "gpus",
    "tests": [{category, name, status, results: [{gpus, status, raw_status, messages, info}]}],
    "by_test": {test: {gpu: status}}, "failures": [{test, gpu, message}], "figures":
    {gpu: {diag_gflops, stress_gflops, mem_bw_gbps, throttle}}, "ok"}``.

    Text before the document (dcgmi's banners, a simulated marker) is skipped.
    ``ok``: at least one test reported, no failed result, no runtime error.
    """
    raw = str(text or "")
    document = _document(raw)
    root = _root(document)
    tests = [_test(category, test) for category, test in _raw_tests(root)]
    gpus = _all_gpus(tests, document)
    for test in tests:
        for entry in test["results"]:
            entry["gpus"] = entry["gpus"] if entry["gpus"] is not None else list(gpus)
    failures = [
        {"test": test["name"], "gpu": gpu, "message": "; ".join(entry["messages"]) or entry["raw_status"]}
        for test in tests for entry in test["results"] if entry["status"] == "fail"
        for gpu in (entry["gpus"] or [None])
    ]
    runtime_error = str(root.get("runtime_error") or document.get("runtime_error") or "").strip()
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    return {
        "version": str(root.get("version") or metadata.get("version") or "") or None,
        "driver": str(metadata.get("Driver Version Detected") or root.get("driver_version") or "") or None,
        "simulated": _simulated(raw, document),
        "runtime_error": runtime_error or None,
        "gpus": gpus,
        "tests": tests,
        "by_test": _by_test(tests),
        "failures": failures,
        "figures": _figures(tests),
        "ok": bool(tests) and not failures and not runtime_error,
    }


def _document(raw: str) -> dict[str, Any]:
    start = raw.find("{")
    if start < 0:
        raise DcgmParseError(f"no JSON document in the dcgmi output: {_excerpt(raw)}")
    try:
        document, _end = json.JSONDecoder().raw_decode(raw[start:])
    except ValueError as exc:
        raise DcgmParseError(f"dcgmi printed malformed JSON: {exc}") from None
    if not isinstance(document, dict):
        raise DcgmParseError("the dcgmi JSON is not an object")
    return document


def _excerpt(raw: str) -> str:
    return " ".join(raw.split())[:200] or "(nothing)"


def _root(document: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
        if isinstance(document.get(key), Mapping):
            return document[key]
    if "test_categories" in document or "tests" in document:
        return document
    raise DcgmParseError(f"not a dcgmi diag document: keys {', '.join(sorted(map(str, document))) or 'none'}")


def _raw_tests(root: Mapping[str, Any]) -> Iterable[tuple[str | None, Mapping[str, Any]]]:
    for category in root.get("test_categories") or []:
        if isinstance(category, Mapping):
            for test in category.get("tests") or []:
                if isinstance(test, Mapping):  # the 3.1 capture has nulls between tests
                    yield category.get("category"), test
    for test in root.get("tests") or []:  # tests hoisted to the top, no category
        if isinstance(test, Mapping):
            yield None, test


def _test(category: Any, test: Mapping[str, Any]) -> dict[str, Any]:
    results = [_result(entry) for entry in test.get("results") or [] if isinstance(entry, Mapping)]
    results = [entry for entry in results if entry is not None]
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), Mapping) else {}
    statuses = [entry["status"] for entry in results]
    if summary.get("status") is not None:
        statuses.append(_status(summary.get("status")))
    return {
        "category": str(category) if category is not None else None,
        "name": " ".join(str(test.get("name") or "unnamed test").split()),
        "status": _worst(statuses),
        "results": results,
        "summary_info": _texts(summary.get("info")),
    }


def _result(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    group = str(entry.get("entity_group") or "GPU").upper()
    if group != "GPU":  # CPU, NVSwitch or link entities: not a GPU verdict
        return None
    raw_status = " ".join(str(entry.get("status") or "").split())
    return {
        "gpus": _gpu_ids(entry),
        "status": _status(raw_status),
        "raw_status": raw_status,
        "messages": _texts(entry.get("warnings")) + _texts(entry.get("error")),
        "info": _texts(entry.get("info")),
    }


def _gpu_ids(entry: Mapping[str, Any]) -> list[int] | None:
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        if key in entry and entry[key] is not None:
            value = entry[key]
            if isinstance(value, bool):
                return None
            if isinstance(value, int):
                return [value]
            ids = [part.strip() for part in str(value).split(",")]
            return [int(part) for part in ids if part.isdigit()] or None
    return None


def _status(raw: Any) -> str:
    word = " ".join(str(raw or "").split()).lower()
    return _STATUS.get(word, "fail")  # unknown: never a pass


def _worst(statuses: Sequence[str]) -> str:
    for status in ("fail", "warn", "pass", "skip"):
        if status in statuses:
            return status
    return "skip"


def _texts(value: Any) -> list[str]:
    """Warnings and info as strings: a string, a list of strings, or 4.x ``{"warning": ...}`` objects."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    texts = []
    for item in items:
        if isinstance(item, Mapping):
            item = item.get("warning") or item.get("message") or item.get("info") or ""
        text = " ".join(str(item).split())
        if text:
            texts.append(text)
    return texts


def _all_gpus(tests: Sequence[Mapping[str, Any]], document: Mapping[str, Any]) -> list[int]:
    gpus = {gpu for test in tests for entry in test["results"] for gpu in entry["gpus"] or []}
    for group in document.get("entity_groups") or []:
        if isinstance(group, Mapping) and str(group.get("entity_group") or "").upper() == "GPU":
            gpus.update(e["entity_id"] for e in group.get("entities") or []
                        if isinstance(e, Mapping) and isinstance(e.get("entity_id"), int))
    return sorted(gpus)


def _simulated(raw: str, document: Mapping[str, Any]) -> bool:
    marker = document.get("deepops")
    return SIMULATED_MARKER in raw[: raw.find("{")] or (isinstance(marker, Mapping) and marker.get("simulated") is True)


def _by_test(tests: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per test, per GPU: the worst result reported for it (a test may be listed twice)."""
    table: dict[str, dict[int, list[str]]] = {}
    for test in tests:
        cells = table.setdefault(test["name"], {})
        for entry in test["results"]:
            for gpu in entry["gpus"]:
                cells.setdefault(gpu, []).append(entry["status"])
    return {name: {str(gpu): _worst(statuses) for gpu, statuses in sorted(cells.items())}
            for name, cells in table.items() if cells}


def _figures(tests: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    figures: dict[int, dict[str, Any]] = {}

    def cell(gpu: int) -> dict[str, Any]:
        return figures.setdefault(gpu, {"diag_gflops": None, "stress_gflops": None, "mem_bw_gbps": None,
                                        "throttle": []})

    for test in tests:
        memory_test = test["name"].lower() in _MEMORY_BANDWIDTH_TESTS
        for entry in test["results"]:
            for text in entry["info"] + entry["messages"]:
                _read_figure(text, entry["gpus"], memory_test, cell)
    return dict(sorted(figures.items()))


def _read_figure(text: str, gpus: Sequence[int], memory_test: bool, cell: Any) -> None:
    for pattern, key in ((_DIAG_GFLOPS, "diag_gflops"), (_STRESS_GFLOPS, "stress_gflops")):
        for gpu, value in pattern.findall(text):
            target = cell(int(gpu))
            target[key] = max(float(value), target[key] or 0.0)
    named = [int(gpu) for gpu in _GPU_IN_TEXT.findall(text)]
    owners = named or list(gpus)
    if memory_test:
        bandwidth = _bandwidth_gbps(text)
        if bandwidth is not None:
            for gpu in owners:
                cell(gpu)["mem_bw_gbps"] = max(bandwidth, cell(gpu)["mem_bw_gbps"] or 0.0)
    if _THROTTLE.search(text):
        reason = next((name for name, pattern in _THROTTLE_REASONS if pattern.search(text)), "other")
        for gpu in owners:
            if reason not in cell(gpu)["throttle"]:
                cell(gpu)["throttle"].append(reason)


def _bandwidth_gbps(text: str) -> float | None:
    match = _BANDWIDTH.search(text)
    if not match:
        return None
    scale = {"TB/S": 1000.0, "GB/S": 1.0, "MB/S": 0.001}[match.group(2).upper()]
    return float(match.group(1)) * scale


def parse_proftester(text: Any, field: int = TENSOR_ACTIVE_FIELD) -> dict[int, float]:
    """``dcgmproftester -t 1004`` output -> the best dense tensor TFLOPS per GPU.

    Reads ``Worker <gpu>:<worker>[<field>]: ... (<N> gflops)`` lines. DCGM 3.3.7
    and 4.2.3 no longer print the gflops figure (NVIDIA/DCGM issue #239): then
    the result is empty and burn-in judges no throughput. No recorded line with
    the figure was found, so the pattern follows the issue's description.
    """
    best: dict[int, float] = {}
    for line in str(text or "").splitlines():
        match = _PROFTESTER.search(line)
        if match and int(match.group(3)) == field:
            gpu, tflops = int(match.group(1)), float(match.group(4)) / 1000.0
            best[gpu] = max(tflops, best.get(gpu, 0.0))
    return dict(sorted(best.items()))


# --------------------------------------------------------------------------
# results


def _record(check: str, node: str, status: str, detail: str, seconds: float, simulated: bool,
            measurements: dict[str, Any] | None) -> dict[str, Any]:
    entry = result(check, node, status, detail, seconds)
    entry["simulated"] = bool(simulated)
    entry["measurements"] = measurements or {}
    return entry


def _failure_text(failures: Sequence[Mapping[str, Any]], limit: int = 3) -> str:
    shown = [f"GPU {f['gpu'] if f['gpu'] is not None else '?'} {f['test']}: {f['message']}" for f in failures[:limit]]
    more = f" (+{len(failures) - limit} more)" if len(failures) > limit else ""
    return "; ".join(shown) + more


def dcgm_result(
    node: str,
    parsed: Mapping[str, Any] | None,
    level: int = DEFAULT_LEVEL,
    seconds: float = 0.0,
    error: str = "",
) -> dict[str, Any]:
    """The recorded dcgm result of one node: ``dcgmi diag -r <level>``, every GPU.

    Fails on any failed test result (naming the GPU and the test) or a runtime
    error; ``not_applicable`` when DCGM skipped every test; passes otherwise
    (warnings are listed in the detail).
    """
    if not parsed:
        return _record(DCGM_CHECK, node, FAIL, f"no dcgmi diag result: {error or 'no output'}", seconds, False, None)
    measurements = {"level": int(level), "tests": {name: dict(cells) for name, cells in parsed["by_test"].items()}}
    simulated = bool(parsed.get("simulated"))
    if parsed.get("runtime_error"):
        detail = f"dcgmi diag -r {level}: runtime error: {parsed['runtime_error']}"
        return _record(DCGM_CHECK, node, FAIL, detail, seconds, simulated, measurements)
    if parsed["failures"]:
        detail = f"dcgmi diag -r {level}: {_failure_text(parsed['failures'])}"
        return _record(DCGM_CHECK, node, FAIL, detail, seconds, simulated, measurements)
    tests = parsed["tests"]
    if not tests:
        return _record(DCGM_CHECK, node, FAIL, f"dcgmi diag -r {level}: no test results", seconds, simulated,
                       measurements)
    if all(test["status"] == "skip" for test in tests):
        detail = f"dcgmi diag -r {level}: DCGM skipped all {len(tests)} tests on this node"
        return _record(DCGM_CHECK, node, NOT_APPLICABLE, detail, seconds, simulated, measurements)
    warned = [test["name"] for test in tests if test["status"] == "warn"]
    detail = f"dcgmi diag -r {level}: {len(tests)} tests, {len(parsed['gpus'])} GPUs, no failure"
    if warned:
        detail += f"; warnings: {', '.join(warned)}"
    return _record(DCGM_CHECK, node, PASS, detail, seconds, simulated, measurements)


def burnin_result(
    node: str,
    parsed: Mapping[str, Any] | None,
    gpu_models: Any,
    tflops: Mapping[Any, Any] | None = None,
    seconds: float = 0.0,
    tflops_fraction: float = gpu_performance.BURNIN_TFLOPS_FRACTION,
    mem_bw_fraction: float = gpu_performance.BURNIN_MEM_BW_FRACTION,
    error: str = "",
) -> dict[str, Any]:
    """The recorded burnin result of one node: a ``dcgmi diag -r 3|4`` run, judged per GPU.

    ``gpu_models``: each GPU's product name, as a list by index, a mapping
    index -> name, or one name for all (the node's ``deepops_gpus`` facts give
    them). ``tflops``: dense tensor TFLOPS per GPU where measured
    (``parse_proftester``). A GPU fails on a failed stress test, throughput
    under ``tflops_fraction`` or memory bandwidth under ``mem_bw_fraction`` of
    its datasheet peak, or thermal/power throttling. GPUs of a model without
    peaks are left out; with none left the result is ``not_applicable``.
    """
    if not parsed:
        return _record(BURNIN_CHECK, node, FAIL, f"no dcgmi diag result: {error or 'no output'}", seconds, False,
                       None)
    simulated = bool(parsed.get("simulated"))
    stress = [test for test in parsed["tests"] if test["name"].lower() in STRESS_TESTS]
    if parsed.get("runtime_error"):
        return _record(BURNIN_CHECK, node, FAIL, f"runtime error: {parsed['runtime_error']}", seconds, simulated,
                       None)
    if not stress:
        return _record(BURNIN_CHECK, node, FAIL, "no stress test in the dcgmi diag output (needs -r 3 or 4)",
                       seconds, simulated, None)
    measured = {int(gpu): float(value) for gpu, value in (tflops or {}).items() if value is not None}
    gpus, problems, unknown = [], [], []
    for index in parsed["gpus"]:
        peaks = gpu_performance.gpu_peaks(_model_of(gpu_models, index))
        if peaks is None:
            unknown.append(index)
            continue
        entry = _burnin_gpu(index, peaks, parsed, measured.get(index))
        gpus.append(entry)
        problems.extend(_gpu_problems(entry, stress, tflops_fraction, mem_bw_fraction))
    measurements = {"gpus": gpus} if gpus else None
    if not gpus:
        detail = f"no datasheet peaks for GPU {', '.join(map(str, unknown)) or '(none reported)'}: " \
                 f"model {_model_of(gpu_models, unknown[0] if unknown else 0) or 'unknown'}"
        return _record(BURNIN_CHECK, node, NOT_APPLICABLE, detail, seconds, simulated, measurements)
    if problems:
        return _record(BURNIN_CHECK, node, FAIL, "; ".join(problems[:4]) + (" ..." if len(problems) > 4 else ""),
                       seconds, simulated, measurements)
    return _record(BURNIN_CHECK, node, PASS, _burnin_summary(gpus, stress, tflops_fraction, mem_bw_fraction),
                   seconds, simulated, measurements)


def _model_of(gpu_models: Any, index: int) -> str:
    if isinstance(gpu_models, Mapping):
        return str(gpu_models.get(index, gpu_models.get(str(index), "")) or "")
    if isinstance(gpu_models, (list, tuple)):
        return str(gpu_models[index]) if 0 <= index < len(gpu_models) else ""
    return str(gpu_models or "")


def _burnin_gpu(index: int, peaks: Mapping[str, Any], parsed: Mapping[str, Any], tflops: float | None) -> dict:
    figures = parsed["figures"].get(index, {})
    return {
        "index": index,
        "tflops": tflops,
        "peak_tflops": float(peaks["tflops"]),
        "mem_bw_gbps": figures.get("mem_bw_gbps"),
        "peak_mem_bw_gbps": float(peaks["mem_bw_gbps"]),
        "throttle": list(figures.get("throttle") or []),
    }


def _gpu_problems(entry: Mapping[str, Any], stress: Sequence[Mapping[str, Any]], tflops_fraction: float,
                  mem_bw_fraction: float) -> list[str]:
    index, problems = entry["index"], []
    for test in stress:
        for result_entry in test["results"]:
            if index in result_entry["gpus"] and result_entry["status"] == "fail":
                why = "; ".join(result_entry["messages"]) or result_entry["raw_status"]
                problems.append(f"GPU {index} {test['name']}: {why}")
    if entry["tflops"] is not None and entry["tflops"] < tflops_fraction * entry["peak_tflops"]:
        problems.append(f"GPU {index} {entry['tflops']:g} TFLOPS < {tflops_fraction:.0%} of {entry['peak_tflops']:g}")
    if entry["mem_bw_gbps"] is not None and entry["mem_bw_gbps"] < mem_bw_fraction * entry["peak_mem_bw_gbps"]:
        problems.append(f"GPU {index} memory {entry['mem_bw_gbps']:g} GB/s < {mem_bw_fraction:.0%} of "
                        f"{entry['peak_mem_bw_gbps']:g}")
    throttled = [reason for reason in entry["throttle"] if reason in ("thermal", "power")]
    if throttled:
        problems.append(f"GPU {index} {'/'.join(throttled)} throttling")
    return problems


def _burnin_summary(gpus: Sequence[Mapping[str, Any]], stress: Sequence[Mapping[str, Any]], tflops_fraction: float,
                    mem_bw_fraction: float) -> str:
    judged = []
    if any(gpu["tflops"] is not None for gpu in gpus):
        judged.append(f"TFLOPS >= {tflops_fraction:.0%} of peak")
    if any(gpu["mem_bw_gbps"] is not None for gpu in gpus):
        judged.append(f"memory bandwidth >= {mem_bw_fraction:.0%} of peak")
    figures = ", ".join(judged) or "no throughput figures in the output"
    names = ", ".join(sorted({test["name"] for test in stress}))
    return f"{len(gpus)} GPUs passed {names}; {figures}; no thermal/power throttling"
