"""nccl-tests ``all_reduce_perf`` for ``deepops validate nccl``: its output parsed, pair tests planned,
the node at fault named, and the recorded results built.

The role runs ``all_reduce_perf`` (correctness check on, ``-c 1``) once per
node over all its GPUs and once across every compute node (one rank per
node, ``srun --mpi=pmix``). When the cross-node run fails, it tests pairs of
nodes to find the one at fault:

1. ``plan_pairs(nodes)``: disjoint pairs, run side by side (``pair_waves``);
2. ``isolate_faulty(nodes, results)``: which nodes are good, at fault or still
   undecided, and ``next_pairs``: each undecided node with a known-good one
   (or, with none known, with another undecided one it has not met);
3. run ``next_pairs``, call ``isolate_faulty`` again with all results, until
   ``next_pairs`` is empty (two rounds in the usual case).

Outputs differ across nccl-tests versions: the oldest have no ``redop`` or
``root`` column and an ``error`` (largest error) column in place of ``#wrong``, some print
only the out-of-place half, launchers prefix lines (``srun -l``'s ``0: ``,
Open MPI's ``[1,0]<stdout>:``) and NCCL log lines interleave with the table.
The parser reads what it can and says what it did not find.

All functions are pure (no I/O). Standard library only, and no Ansible import.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import gpu_performance
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import normalize_gpu_type
from ansible_collections.deepops.cluster.plugins.module_utils.validation import (
    FAIL,
    NOT_APPLICABLE,
    PASS,
    result,
)

__all__ = [
    "CHECK",
    "CLUSTER_NODE",
    "SIMULATED_MARKER",
    "NcclParseError",
    "cluster_result",
    "isolate_faulty",
    "node_result",
    "pair_outcomes",
    "pair_waves",
    "parse_all_reduce",
    "plan_pairs",
]

CHECK = "nccl"
CLUSTER_NODE = "all"  # the node of the cross-node result
# The virtual cluster's stand-in prints this comment line; real output never has it.
SIMULATED_MARKER = "# deepops: SIMULATED"
# A pair below this share of the median pair's bus bandwidth is slow, when no
# cross-node threshold is set: a bad link shows against its peers.
PAIR_RELATIVE_FLOOR = 0.5
UNCHECKED = "all_reduce_perf ran without its correctness check (-c 1): #wrong is N/A"

_LABEL = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:\s)")
_DEVICE = re.compile(
    r"#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<model>.*?)\s*$"
)
_HEADER = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_VALIDATION = re.compile(r"validation:\s*(\d+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
# nccl-tests' own failure lines ("Test failure common.cu:1189", "Test NCCL failure ...",
# "Test CUDA failure ..."); NCCL's WARN log lines are not failures by themselves.
_FAILURE = re.compile(r"\bTest (?:\w+ )?failure\b")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# What NCCL prints at its start with NCCL_DEBUG=VERSION (the nccl check sets it),
# bare or behind its "host:pid:tid [rank] NCCL INFO " prefix: "NCCL version 2.21.5+cuda12.4".
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+\S*)")


class NcclParseError(ValueError):
    """The output holds no ``all_reduce_perf`` result; the message says what was there instead."""


# --------------------------------------------------------------------------
# parsing


def parse_all_reduce(text: Any) -> dict[str, Any]:
    """``all_reduce_perf`` stdout -> its devices, rows and verdict figures.

    Returns ``{"simulated", "nthread", "ngpus", "validation", "devices": [{rank, host,
    device, bus, model, gpu_type}], "hosts", "gpu_types", "rows": [{size, count, type,
    redop, root, out_of_place: {time_us, algbw, busbw, wrong}, in_place: {...}|None}],
    "curve": [[bytes, busbw]], "largest_size", "busbw_gbps", "avg_busbw_gbps",
    "wrong", "unvalidated_rows", "validated", "out_of_bounds", "failures", "ok", "nccl_version"}``
    (``nccl_version``: what NCCL printed with ``NCCL_DEBUG=VERSION``, else None).

    ``busbw_gbps`` is the better of out-of-place and in-place at the largest
    size: both move the same bytes over the same links, and the lower one is
    the noisier sample. ``wrong`` sums ``#wrong`` (the oldest layout's ``error``
    column holds the largest error: any nonzero counts 1). ``ok`` is true when
    rows were printed, nothing was wrong, out-of-bounds was OK and no test
    failure was reported; ``validated`` when the correctness check ran (the
    results builders fail a run without it). Text with neither rows nor devices raises
    ``NcclParseError``.
    """
    lines = [_LABEL.sub("", line, count=1) for line in str(text or "").splitlines()]
    parsed: dict[str, Any] = {
        "simulated": any(line.startswith(SIMULATED_MARKER) for line in lines),
        "nthread": None, "ngpus": None, "validation": None,
        "devices": [], "rows": [], "out_of_bounds": None, "oob_ok": None,
        "avg_busbw_gbps": None, "failures": [], "nccl_version": None,
    }
    for line in lines:
        _read_line(line, parsed)
    if not parsed["rows"] and not parsed["devices"]:
        excerpt = " ".join(" ".join(lines[-3:]).split())[:200]
        raise NcclParseError(f"no all_reduce_perf result in the output{': ' + excerpt if excerpt else ''}")
    return _summarise(parsed)


def _read_line(line: str, parsed: dict[str, Any]) -> None:
    stripped = line.strip()
    header = _HEADER.search(stripped)
    if header:
        parsed["nthread"], parsed["ngpus"] = int(header.group(1)), int(header.group(2))
        validation = _VALIDATION.search(stripped)
        parsed["validation"] = int(validation.group(1)) if validation else None
        return
    device = _DEVICE.match(stripped)
    if device:
        parsed["devices"].append(_device(device))
        return
    oob = _OOB.match(stripped)
    if oob:
        parsed["out_of_bounds"], parsed["oob_ok"] = int(oob.group(1)), oob.group(2).upper() == "OK"
        return
    avg = _AVG.match(stripped)
    if avg:
        parsed["avg_busbw_gbps"] = _float(avg.group(1))
        return
    if _FAILURE.search(stripped):
        parsed["failures"].append(" ".join(stripped.split()))
        return
    version = _NCCL_VERSION.search(stripped)
    if version:
        parsed["nccl_version"] = parsed["nccl_version"] or version.group(1)
        return
    row = _row(stripped.split())
    if row is not None:
        parsed["rows"].append(row)


def _device(match: re.Match[str]) -> dict[str, Any]:
    model = match.group("model")
    return {
        "rank": int(match.group("rank")),
        "host": match.group("host"),
        "device": int(match.group("device")),
        "bus": match.group("bus"),
        "model": model,
        "gpu_type": normalize_gpu_type(model),
    }


def _row(tokens: list[str]) -> dict[str, Any] | None:
    """One table row, old or new layout; None when the tokens are not one."""
    if len(tokens) < 8 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    if not _WORD.match(tokens[2]):
        return None
    redop = tokens[3] if _WORD.match(tokens[3]) else None  # the 1.x layout has no redop column
    tail = tokens[4:] if redop else tokens[3:]
    root = None
    if len(tail) in (5, 9):  # a root column ahead of one or two groups of four
        root = _int(tail[0])
        tail = tail[1:]
    if len(tail) not in (4, 8):
        return None
    groups = [_group(tail[i:i + 4]) for i in range(0, len(tail), 4)]
    if any(group is None for group in groups):
        return None
    return {
        "size": int(tokens[0]), "count": int(tokens[1]), "type": tokens[2], "redop": redop, "root": root,
        "out_of_place": groups[0], "in_place": groups[1] if len(groups) > 1 else None,
    }


def _group(fields: list[str]) -> dict[str, Any] | None:
    time_us, algbw, busbw = (_float(field) for field in fields[:3])
    if time_us is None or algbw is None or busbw is None:
        return None
    return {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": _wrong(fields[3])}


def _wrong(field: str) -> int | None:
    """``#wrong`` as a count; None for ``N/A`` (not validated)."""
    if field.upper() == "N/A":
        return None
    if field.isdigit():
        return int(field)
    value = _float(field)
    if value is None:
        return None
    return 1 if value > 0 else 0  # the old layout's largest error: any error is one wrong row


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _summarise(parsed: dict[str, Any]) -> dict[str, Any]:
    rows = parsed["rows"]
    groups = [group for row in rows for group in (row["out_of_place"], row["in_place"]) if group]
    wrong = sum(group["wrong"] or 0 for group in groups)
    largest = max((row for row in rows if row["size"] > 0), key=lambda row: row["size"], default=None)
    parsed["curve"] = sorted({row["size"]: _best(row) for row in rows if row["size"] > 0}.items())
    parsed["curve"] = [[size, busbw] for size, busbw in parsed["curve"]]
    parsed["largest_size"] = largest["size"] if largest else None
    parsed["busbw_gbps"] = _best(largest) if largest else None
    parsed["wrong"] = wrong
    parsed["unvalidated_rows"] = sum(1 for group in groups if group["wrong"] is None)
    # the correctness check ran: -c 1 in the header (when printed) and a #wrong count in every row
    parsed["validated"] = bool(rows) and parsed["validation"] != 0 and parsed["unvalidated_rows"] == 0
    parsed["hosts"] = list(dict.fromkeys(device["host"] for device in parsed["devices"]))
    parsed["gpu_types"] = sorted({device["gpu_type"] for device in parsed["devices"]})
    parsed["ok"] = bool(rows) and wrong == 0 and parsed["oob_ok"] is not False and not parsed["failures"]
    return parsed


def _best(row: Mapping[str, Any]) -> float:
    return max(group["busbw"] for group in (row["out_of_place"], row["in_place"]) if group)


# --------------------------------------------------------------------------
# pair testing


def plan_pairs(nodes: Iterable[Any]) -> list[tuple[str, str]]:
    """Pairs covering every node: (n0, n1), (n2, n3), ...; with an odd count the last
    node is paired with the first. The pairs of one wave (``pair_waves``) share no node."""
    names = list(dict.fromkeys(str(node) for node in nodes))
    if len(names) < 2:
        return []
    pairs = [(names[i], names[i + 1]) for i in range(0, len(names) - 1, 2)]
    if len(names) % 2:
        pairs.append((names[-1], names[0]))
    return pairs


def pair_waves(pairs: Iterable[Sequence[Any]]) -> list[list[tuple[str, str]]]:
    """The pairs in waves of disjoint pairs (in order, first fit): one wave's pairs run side by side."""
    waves: list[list[tuple[str, str]]] = []
    busy: list[set[str]] = []
    for pair in pairs:
        a, b = (str(node) for node in pair)
        for wave, used in zip(waves, busy):
            if a not in used and b not in used:
                wave.append((a, b))
                used.update((a, b))
                break
        else:
            waves.append([(a, b)])
            busy.append({a, b})
    return waves


def pair_outcomes(
    pair_parsed: Iterable[tuple[Sequence[Any], Mapping[str, Any] | None]],
    threshold_gbps: float | None = None,
    relative_floor: float = PAIR_RELATIVE_FLOOR,
) -> list[dict[str, Any]]:
    """Each pair test's verdict: ``[{"pair": [a, b], "ok": bool, "busbw_gbps", "why"}]``.

    ``pair_parsed`` gives each pair with its ``parse_all_reduce`` result (None:
    the run printed no result). A pair fails when its run is not ``ok``, when
    it is under ``threshold_gbps``, or, with no threshold, when it is under
    ``relative_floor`` of the median pair: a slow link stands out against its peers.
    """
    entries = [(tuple(str(node) for node in pair), parsed) for pair, parsed in pair_parsed]
    speeds = sorted(p["busbw_gbps"] for _pair, p in entries if p and p.get("ok") and p.get("busbw_gbps") is not None)
    median = _median(speeds)
    outcomes = []
    for pair, parsed in entries:
        ok, why, busbw = _pair_verdict(parsed, threshold_gbps, median, relative_floor)
        outcomes.append({"pair": list(pair), "ok": ok, "busbw_gbps": busbw, "why": why})
    return outcomes


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _pair_verdict(
    parsed: Mapping[str, Any] | None, threshold: float | None, median: float | None, floor: float
) -> tuple[bool, str, float | None]:
    if not parsed:
        return False, "no result", None
    busbw = parsed.get("busbw_gbps")
    if not parsed.get("ok"):
        return False, _not_ok(parsed), busbw
    if busbw is None:
        return False, "no bus bandwidth", None
    if threshold is not None and busbw < threshold:
        return False, f"busbw {busbw:g} < {threshold:g} GB/s", busbw
    if threshold is None and median and busbw < floor * median:
        return False, f"busbw {busbw:g} < {floor:g} x median {median:g} GB/s", busbw
    return True, f"busbw {busbw:g} GB/s", busbw


def _not_ok(parsed: Mapping[str, Any]) -> str:
    if parsed.get("wrong"):
        return f"#wrong {parsed['wrong']}"
    if parsed.get("oob_ok") is False:
        return f"out of bounds values {parsed.get('out_of_bounds')}"
    if parsed.get("failures"):
        return str(parsed["failures"][0])[:120]
    return "no result rows"


def isolate_faulty(
    nodes: Iterable[Any],
    pair_results: Iterable[Any],
    known_bad: Iterable[Any] = (),
) -> dict[str, Any]:
    """Which nodes the pair tests show at fault.

    ``pair_results``: every pair test so far, as ``pair_outcomes`` entries
    (``{"pair": [a, b], "ok": bool}``) or ``(a, b, ok)`` triples. ``known_bad``:
    nodes already failed on their own (their single-node run), which explain
    the failing pairs they are in. A passing pair proves both nodes good; a
    failing pair with a good (or known-bad) partner convicts (or clears) the other.

    Returns ``{"faulty", "good", "undecided", "next_pairs", "conclusive", "summary"}``:
    ``next_pairs`` pairs each undecided node with a known-good node (or, with
    none, with another undecided node it has not been tested with); run them
    and call again with all results. ``conclusive`` when nothing is undecided.
    """
    names = list(dict.fromkeys(str(node) for node in nodes))
    tests = [_pair_test(entry) for entry in pair_results]
    good = {node for a, b, ok in tests if ok for node in (a, b)}
    bad = {str(node) for node in known_bad}
    changed = True
    while changed:
        changed = False
        for a, b, ok in tests:
            if ok:
                continue
            for node, partner in ((a, b), (b, a)):
                if partner in good and node not in bad:
                    bad.add(node)
                    changed = True
    good -= bad  # a node seen failing with a good partner is at fault, even if it once passed
    suspects = {node for a, b, ok in tests if not ok for node in (a, b)}
    undecided = {node for node in suspects - good - bad if not _explained(node, tests, bad)}
    order = {node: index for index, node in enumerate(names)}

    def rank(node: str) -> tuple[int, str]:  # the order the caller gave the nodes in
        return order.get(node, len(order)), node

    faulty, undecided_list = sorted(bad, key=rank), sorted(undecided, key=rank)
    next_pairs = _next_pairs(undecided_list, sorted(good, key=rank), tests)
    return {
        "faulty": faulty,
        "good": sorted(good, key=rank),
        "undecided": undecided_list,
        "next_pairs": next_pairs,
        "conclusive": not undecided_list,
        "summary": _summary(faulty, undecided_list),
    }


def _pair_test(entry: Any) -> tuple[str, str, bool]:
    if isinstance(entry, Mapping):
        a, b = entry["pair"]
        return str(a), str(b), bool(entry["ok"])
    a, b, ok = entry
    return str(a), str(b), bool(ok)


def _explained(node: str, tests: Sequence[tuple[str, str, bool]], bad: set[str]) -> bool:
    """Every failing pair of NODE had a partner already at fault."""
    partners = [b if a == node else a for a, b, ok in tests if not ok and node in (a, b)]
    return bool(partners) and all(partner in bad for partner in partners)


def _next_pairs(
    undecided: list[str], good: list[str], tests: Sequence[tuple[str, str, bool]]
) -> list[tuple[str, str]]:
    met = {frozenset((a, b)) for a, b, _ok in tests}
    pairs: list[tuple[str, str]] = []
    if good:
        for index, node in enumerate(undecided):
            partner = next((g for g in good[index % len(good):] + good if frozenset((node, g)) not in met), None)
            if partner is not None:
                pairs.append((node, partner))
        return pairs
    paired: set[str] = set()
    for node in undecided:
        if node in paired:
            continue
        partner = next((o for o in undecided if o != node and o not in paired and frozenset((node, o)) not in met), None)
        if partner is not None:
            pairs.append((node, partner))
            paired.update((node, partner))
    return pairs


def _summary(faulty: list[str], undecided: list[str]) -> str:
    parts = []
    if faulty:
        parts.append(f"at fault: {', '.join(faulty)}")
    if undecided:
        parts.append(f"undecided: {', '.join(undecided)}")
    return "; ".join(parts) or "no node at fault in the pair tests"


# --------------------------------------------------------------------------
# results


def _gib(size: int | None) -> str:
    if not size:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _record(node: str, status: str, detail: str, seconds: float, simulated: bool,
            measurements: dict[str, Any] | None) -> dict[str, Any]:
    entry = result(CHECK, node, status, detail, seconds)
    entry["simulated"] = bool(simulated)
    entry["measurements"] = measurements or {}
    return entry


def node_result(
    node: str,
    parsed: Mapping[str, Any] | None,
    gpu_facts: Any = None,
    overrides: Any = None,
    seconds: float = 0.0,
    error: str = "",
) -> dict[str, Any]:
    """The recorded nccl result of one node's run over all its GPUs.

    ``parsed`` is ``parse_all_reduce`` of its output (None when it printed none;
    ``error`` says why). ``gpu_facts`` is the node's ``deepops_gpus`` fact: its
    GPU model and interconnect pick the threshold (``gpu_performance``).
    Status: ``fail`` when the run failed or was wrong, ``not_applicable`` when
    no threshold applies (the reason is the detail), else pass/fail on the
    bus bandwidth at the largest size.
    """
    facts = gpu_facts if isinstance(gpu_facts, Mapping) else {}
    if not parsed:
        return _record(node, FAIL, f"no all_reduce_perf result: {error or 'no output'}", seconds, False, None)
    model = _node_model(parsed, facts)
    interconnect, why = gpu_performance.interconnect_from_facts(facts) if facts else (None, "no GPU facts")
    mark = gpu_performance.nccl_threshold(model, interconnect, overrides)
    measurements = _measurements(parsed, mark["threshold_gbps"], model, interconnect or "")
    if not parsed["ok"]:
        return _record(node, FAIL, f"all_reduce_perf failed: {_not_ok(parsed)}", seconds, parsed["simulated"],
                       measurements)
    if not parsed["validated"]:
        return _record(node, FAIL, UNCHECKED, seconds, parsed["simulated"], measurements)
    busbw = parsed["busbw_gbps"]
    label = f"({model or 'unknown model'}, {interconnect or 'unknown interconnect'})"
    if mark["threshold_gbps"] is None:
        reason = why if interconnect is None else mark["reason"]
        detail = f"busbw {busbw:g} GB/s at {_gib(parsed['largest_size'])}, no threshold: {reason}"
        return _record(node, NOT_APPLICABLE, detail, seconds, parsed["simulated"], measurements)
    passed = busbw >= mark["threshold_gbps"]
    detail = (f"busbw {busbw:g} GB/s at {_gib(parsed['largest_size'])} {'>=' if passed else '<'} "
              f"{mark['threshold_gbps']:g} {label}")
    return _record(node, PASS if passed else FAIL, detail, seconds, parsed["simulated"], measurements)


def _node_model(parsed: Mapping[str, Any], facts: Mapping[str, Any]) -> str:
    types = [t for t in facts.get("types") or [] if t]
    if len(types) == 1:
        return str(types[0])
    seen = parsed.get("gpu_types") or []
    return seen[0] if len(seen) == 1 else ""


def _measurements(parsed: Mapping[str, Any], threshold: float | None, model: str, interconnect: str) -> dict[str, Any]:
    return {
        "busbw_gbps": float(parsed.get("busbw_gbps") or 0.0),
        "threshold_gbps": threshold,
        "curve": [list(point) for point in parsed.get("curve") or []],
        "gpus": len(parsed.get("devices") or []) or int(parsed.get("ngpus") or 0),
        "model": model,
        "interconnect": interconnect,
        "nccl_version": parsed.get("nccl_version"),
    }


def cluster_result(
    nodes: Sequence[Any],
    parsed: Mapping[str, Any] | None,
    isolation: Mapping[str, Any] | None = None,
    threshold_gbps: float | None = None,
    seconds: float = 0.0,
    error: str = "",
) -> dict[str, Any]:
    """The recorded nccl result of the run across every compute node (node ``all``).

    Passes when the run completed without wrong results and, if a cross-node
    threshold is set (override ``<model>/internode``), reached it; the table
    has no cross-node marks, as they depend on the network. On failure the
    detail names the node(s) at fault from ``isolate_faulty`` (``isolation``).
    """
    names = [str(node) for node in nodes]
    simulated = bool(parsed and parsed.get("simulated"))
    measurements = _measurements(parsed, threshold_gbps, _cluster_model(parsed), gpu_performance.INTERNODE) \
        if parsed else None
    if len(names) < 2:
        return _record(CLUSTER_NODE, NOT_APPLICABLE, "fewer than two compute nodes: no cross-node run", seconds,
                       simulated, measurements)
    verdict, figure = _cluster_verdict(parsed, threshold_gbps, error)
    if verdict == PASS:
        return _record(CLUSTER_NODE, PASS, f"{len(names)} nodes: {figure}", seconds, simulated, measurements)
    blame = (isolation or {}).get("summary") or "pair tests not run"
    return _record(CLUSTER_NODE, FAIL, f"{len(names)} nodes: {figure}; {blame}", seconds, simulated, measurements)


def _cluster_model(parsed: Mapping[str, Any]) -> str:
    seen = parsed.get("gpu_types") or []
    return seen[0] if len(seen) == 1 else ""


def _cluster_verdict(parsed: Mapping[str, Any] | None, threshold: float | None, error: str) -> tuple[str, str]:
    if not parsed:
        return FAIL, f"no all_reduce_perf result: {error or 'no output'}"
    if not parsed["ok"]:
        return FAIL, f"all_reduce_perf failed: {_not_ok(parsed)}"
    if not parsed["validated"]:
        return FAIL, UNCHECKED
    busbw, size = parsed["busbw_gbps"], _gib(parsed["largest_size"])
    if threshold is None:
        return PASS, f"busbw {busbw:g} GB/s at {size}, correct (no cross-node threshold set)"
    if busbw < threshold:
        return FAIL, f"busbw {busbw:g} GB/s at {size} < {threshold:g}"
    return PASS, f"busbw {busbw:g} GB/s at {size} >= {threshold:g}"
